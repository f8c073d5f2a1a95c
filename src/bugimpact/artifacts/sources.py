"""Artifacts that need no build: the installed torch, released versions, user wheels.

A manifest records what the artifact is: the wheel (path, sha256) when there is one, and the
version and git version reported by importing it, which the runtime fills in (``probe``).
"""
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from ..harness.data import sha256_file
from ..io import InputError, write_json

PROBE = ("import json, torch; print(json.dumps({'version': torch.__version__, "
         "'git_version': getattr(torch.version, 'git_version', None), "
         "'cuda': getattr(torch.version, 'cuda', None)}))")


def installed_manifest(python=sys.executable):
    import json
    out = subprocess.run([python, "-c", PROBE], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{python} cannot import torch: {out.stderr.strip()[-500:]}")
    info = json.loads(out.stdout.strip().splitlines()[-1])
    return {"source": "installed", "status": "ok", "wheel": None, "wheel_sha256": None, "python": python, **info}


def pypi_wheel(version, cache, index_url="", python=sys.executable):
    """Download the released wheel once into the cache (CPU builds come from the index given)."""
    cache = Path(cache) / f"pypi-{version}"
    wheels = sorted(cache.glob("torch-*.whl"))
    if not wheels:
        cache.mkdir(parents=True, exist_ok=True)
        cmd = [python, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
               "-d", str(cache), f"torch=={version}"]
        if index_url:
            cmd += ["--index-url", index_url]
        out = subprocess.run(cmd, capture_output=True, text=True)
        wheels = sorted(cache.glob("torch-*.whl"))
        if out.returncode != 0 or not wheels:
            raise RuntimeError(f"pip download torch=={version} failed: {out.stderr.strip()[-800:]}")
    return wheels[0]


def user_wheel(location, expected_sha256, cache):
    """A wheel file or URL, copied into the cache and checked against its sha256."""
    name = location.rstrip("/").rsplit("/", 1)[-1]
    target = Path(cache) / "user" / (expected_sha256 or "unchecked") / name
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".part")
        if location.startswith(("http://", "https://")):
            with urllib.request.urlopen(location, timeout=300) as response, open(tmp, "wb") as out:
                shutil.copyfileobj(response, out)
        else:
            if not Path(location).exists():
                raise InputError(location, "wheel not found")
            shutil.copyfile(location, tmp)
        tmp.rename(target)
    actual = sha256_file(target)
    if expected_sha256 and actual != expected_sha256:
        target.unlink()
        raise InputError(location, f"sha256 {actual} does not match the configured {expected_sha256}",
                         field="sha256")
    return target


def wheel_manifest(source, wheel, started):
    return {"source": source, "status": "ok", "wheel": str(Path(wheel).resolve()), "wheel_sha256": sha256_file(wheel),
            "build_seconds": round(time.time() - started, 3)}


def write_manifest(path, manifest):
    write_json(path, manifest)
