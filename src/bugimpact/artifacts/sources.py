"""Artifacts that need no build: the installed torch, released versions, user wheels.

A manifest records what the artifact is: the wheel (path, sha256) when there is one, and the
version and git version reported by importing it, which the runtime fills in (``probe``).
"""
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from pathlib import Path

from packaging.utils import parse_wheel_filename
from packaging.version import Version

from ..failures import DownloadFailed
from ..harness.files import sha256_file
from ..io import InputError, write_json
from ..progress import copy_logged, run_logged
from .interpreters import describe, pip_target, wheel_tags

log = logging.getLogger(__name__)
PROBE = ("import json, torch; print(json.dumps({'version': torch.__version__, "
         "'git_version': getattr(torch.version, 'git_version', None), "
         "'cuda': getattr(torch.version, 'cuda', None)}))")


def installed_manifest(python=sys.executable):
    out = subprocess.run([python, "-c", PROBE], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{python} cannot import torch: {out.stderr.strip()[-500:]}")
    info = json.loads(out.stdout.strip().splitlines()[-1])
    return {"source": "installed", "status": "ok", "wheel": None, "wheel_sha256": None, "python": python, **info}


def fits(wheel, tags):
    """Whether a wheel file can be installed by the interpreter with these ``wheel_tags``."""
    supported_py = {tags["implementation"] + tags["python_version"].replace(".", ""), "py3",
                    "py" + tags["python_version"].replace(".", "")}
    for tag in parse_wheel_filename(Path(wheel).name)[3]:
        if tag.interpreter in supported_py and tag.abi in (tags["abi"], "abi3", "none") \
                and tag.platform in tags["platforms"] + ["any"]:
            return True
    return False


def pypi_cache_dir(cache, version):
    """Where the wheels of one torch release from the index are kept, a folder per wheel tag."""
    return Path(cache) / "pypi" / f"torch-{version}"


def pypi_wheel(version, cache, interpreter, index_url=""):
    """The released torch wheel for the runtime's interpreter, downloaded once.

    The cache is keyed by version, Python tag, ABI and platform; pip picks the wheel for the target
    interpreter's tags (``pip download --python-version ...``), not for the host's.
    """
    tags = wheel_tags(interpreter)
    folder = pypi_cache_dir(cache, version) / tags["key"]
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:  # one download per wheel, however many jobs want it
        fcntl.flock(lock, fcntl.LOCK_EX)
        wheels = [w for w in sorted(folder.glob("torch-*.whl")) if fits(w, tags)]
        for wheel in wheels:
            if usable(wheel):
                return wheel
            log.warning("%s is not a readable wheel: fetched again", wheel)
            wheel.unlink()
        with tempfile.TemporaryDirectory(dir=folder) as tmp:  # a killed download leaves no wheel
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--progress-bar", "off",
                   "-d", tmp, *pip_target(tags, index_url), "--", f"torch=={version}"]
            code, output = run_logged(cmd, f"download torch=={version} ({tags['key']})", watch=tmp)
            got = [w for w in sorted(Path(tmp).glob("torch-*.whl")) if fits(w, tags)]
            if code == 0 and got:
                os.replace(got[0], folder / got[0].name)
                return folder / got[0].name
    # why, in this project's words, from the index itself (pip's wording depends on its version
    # and config): pip's own last lines come after, as the detail
    try:
        versions, why = index_versions(tags, index_url), "the index lists it for this interpreter"
    except IndexUnanswered as exc:  # said, with what pip said
        versions, why = None, f"the index could not be asked which versions exist: {exc}"
    if versions is not None and version not in versions:
        raise DownloadFailed(f"no torch=={version} wheel for {describe(interpreter)}; the versions "
                             f"that exist for it: {', '.join(versions) or 'none'}")
    said = " | ".join(line.strip() for line in output.strip().splitlines()[-3:])
    raise DownloadFailed(f"torch=={version} for {describe(interpreter)} could not be downloaded "
                         f"({why}); pip said: {said[-600:]}")


class IndexUnanswered(RuntimeError):
    """The package index could not be asked, or its answer did not read as one."""


def index_versions(tags, index_url="", package="torch"):
    """The versions of ``package`` with a wheel for these ``wheel_tags``, oldest first, read from
    the package index's simple API (PEP 691 JSON, else the PEP 503 page) at ``index_url``, else
    pip's configured index, with pip's configured certificate bundle (PIP_CERT: a proxy's CA) and
    the environment's proxy settings. ``IndexUnanswered`` where the index cannot say."""
    import requests  # requests: only when the index is asked (a train job imports this module)
    base = (index_url or os.environ.get("PIP_INDEX_URL") or pip_setting("index-url")
            or "https://pypi.org/simple").rstrip("/")
    verify = os.environ.get("PIP_CERT") or pip_setting("cert") or True
    try:
        response = requests.get(f"{base}/{package}/", timeout=120, verify=verify, headers={
            "Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1"})
        response.raise_for_status()
    except OSError as exc:  # requests' errors are OSErrors, and name the address
        raise IndexUnanswered(str(exc)) from exc
    try:
        if "json" in response.headers.get("Content-Type", ""):
            names = [f["filename"] for f in response.json()["files"]]
        else:
            names = re.findall(r">\s*([^<>\s]+\.whl)\s*<", response.text)
    except (ValueError, KeyError, TypeError) as exc:
        raise IndexUnanswered(f"{base}/{package}/ is no index page ({type(exc).__name__}: {exc})") from exc
    versions = {str(parse_wheel_filename(name)[1]) for name in names
                if name.endswith(".whl") and fits(name, tags)}
    return sorted(versions, key=Version)


def pip_setting(name):
    out = subprocess.run([sys.executable, "-m", "pip", "config", "get", f"global.{name}"],
                         capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else ""


class ChecksumMismatch(RuntimeError):
    """A wheel whose bytes are not the configured ones: a failure of its artifact, recorded."""


def usable(wheel):
    """Whether a cached wheel reads as a zip archive (a cut download or a corrupted file does
    not: it is fetched again)."""
    return zipfile.is_zipfile(wheel)


def user_wheel(location, expected_sha256, cache):
    """A wheel file or URL, copied into the cache and checked against its sha256."""
    name = location.rstrip("/").rsplit("/", 1)[-1]
    remote = location.startswith(("http://", "https://"))
    if not remote and not Path(location).exists():
        raise InputError(location, "wheel not found")
    # Keyed by content: a wheel file replaced under the same name is never mistaken for the old one.
    key = expected_sha256 or (sha256_file(location) if not remote
                              else "url-" + hashlib.sha256(location.encode()).hexdigest())
    target = Path(cache) / "user" / key / name
    if target.exists() and not usable(target):
        target.unlink()  # a corrupted copy is made again from its source
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".part")
        if remote:
            with urllib.request.urlopen(location, timeout=300) as response, open(tmp, "wb") as out:
                copy_logged(response, out, f"download {name}")
        else:
            shutil.copyfile(location, tmp)
        tmp.rename(target)
    actual = sha256_file(target)
    if expected_sha256 and actual != expected_sha256:
        target.unlink()
        raise ChecksumMismatch(f"{location}: sha256 {actual} does not match the configured "
                               f"{expected_sha256}")
    return target


def wheel_manifest(source, wheel, started):
    return {"source": source, "status": "ok", "wheel": str(Path(wheel).resolve()), "wheel_sha256": sha256_file(wheel),
            "build_seconds": round(time.time() - started, 3)}


def write_manifest(path, manifest):
    write_json(path, manifest)


def artifact_sources(config):
    """Where the artifact step gets wheels and fixes from: how it fetches, never what (the artifact
    is named by its id), so the rule gives these as an untracked param. Also the releases a
    one-fix arm its release refuses may move to (``other_side``): an arm its release takes is the
    same whatever they are, and one that moved names its release in its manifest, whose runtime's
    content keys its runs."""
    return {"wheel_cache": config["artifacts"]["wheel_cache"],
            "pip_index_url": config["artifacts"]["pip_index_url"],
            "fix_clone": config["artifacts"]["onefix"]["clone"] or config["resolve"].get("clone", ""),
            "fix_api": config["artifacts"]["onefix"]["api"], "api_url": config["mine"]["api_url"],
            "other_side": config["artifacts"]["onefix"]["other_side"],
            "submodules": config["artifacts"]["onefix"]["submodules"],
            "repo": config["repo"]}
