"""The interpreter a runtime trains with: found, probed, and turned into the wheel tags it accepts.

Release wheels of torch 1.0-1.7 exist only for CPython 3.5-3.8, so the wheel must be chosen for the
runtime's interpreter, never the host's. The interpreter (its path and version) is also part of the
runtime's identity: another interpreter can change every result, so it gets its own venv and runs.
"""
import glob
import json
import os
import shutil
import subprocess
import sys

from ..io import InputError

# Runs in the target interpreter (down to Python 3.6): the standard library only.
PROBE = ("import json, os, sys, sysconfig\n"
         "glibc = os.confstr('CS_GNU_LIBC_VERSION') if hasattr(os, 'confstr') else None\n"
         "print(json.dumps({'executable': sys.executable, 'prefix': sys.prefix,\n"
         "  'version': '%d.%d.%d' % sys.version_info[:3],\n"
         "  'implementation': sys.implementation.name,\n"
         "  'abiflags': getattr(sys, 'abiflags', ''),\n"
         "  'platform': sysconfig.get_platform(), 'glibc': glibc}))\n")

HOW_TO_GET = ("get one with `pyenv install 3.7`, `uv python install 3.7` or "
              "`conda create -p /opt/py37 python=3.7`, then give its path or its version")


def probe(python):
    """What the interpreter ``python`` is (``PROBE``'s answer)."""
    try:
        out = subprocess.run([python, "-c", PROBE], capture_output=True, text=True,
                             timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"{python} does not run: {exc}") from exc
    if out.returncode != 0:
        raise RuntimeError(f"{python} does not run: {out.stderr.strip()[-500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _candidates(spec):
    """Paths to try for ``spec``: a path, a command, or a version such as ``3.7``."""
    if os.sep in spec:
        return [spec]
    if not all(part.isdigit() for part in spec.split(".")):
        found = shutil.which(spec)
        return [found] if found else []
    major_minor = ".".join(spec.split(".")[:2])
    found = [shutil.which(f"python{major_minor}")]
    roots = [os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv")),
             os.path.expanduser("~/.local/share/uv/python")]
    for root in roots:  # pyenv's versions/3.7.16 and uv's cpython-3.7.16-linux-x86_64-gnu
        found += sorted(glob.glob(os.path.join(root, "versions", f"{spec}*", "bin",
                                               f"python{major_minor}")), reverse=True)
        found += sorted(glob.glob(os.path.join(root, f"cpython-{spec}*", "bin",
                                               f"python{major_minor}")), reverse=True)
    return [path for path in found if path]


def find(spec, field="runtime.python", source="config.yaml"):
    """The probed interpreter that ``spec`` names; a clear error when there is none."""
    spec = str(spec or "python3")
    tried = []
    for path in _candidates(spec):
        try:
            info = probe(path)
        except RuntimeError as exc:  # e.g. a pyenv shim for a version that is not active
            tried.append(str(exc).splitlines()[0])
            continue
        if "." in spec and os.sep not in spec and not info["version"].startswith(spec):
            tried.append(f"{path} is Python {info['version']}")
            continue
        return info
    detail = f" (tried: {'; '.join(tried)})" if tried else ""
    raise InputError(source, f"no Python interpreter {spec!r} on this machine{detail}; "
                     f"{HOW_TO_GET}", field=field)


def host():
    """The interpreter running this code (the ``local`` runtime's)."""
    return probe(sys.executable)


def describe(info):
    return (f"{info['implementation']} {info['version']} at {info['executable']} "
            f"({wheel_tags(info)['abi']}, {info['platform']})")


def wheel_tags(info):
    """The tags of the wheels this interpreter can install, as ``pip download`` options take them."""
    major, minor = info["version"].split(".")[:2]
    impl = {"cpython": "cp", "pypy": "pp"}.get(info["implementation"], info["implementation"])
    abi = f"{impl}{major}{minor}{info.get('abiflags') or ''}"
    arch = info["platform"].split("-", 1)[-1].replace("-", "_").replace(".", "_")
    platforms = []
    if info["platform"].startswith("linux") and info.get("glibc"):
        glibc_minor = int(info["glibc"].split()[-1].split(".")[1])
        platforms += [f"manylinux_2_{m}_{arch}" for m in range(glibc_minor, 4, -1)]
        legacy = {"manylinux2014": 17, "manylinux2010": 12, "manylinux1": 5}
        platforms += [f"{name}_{arch}" for name, m in legacy.items() if m <= glibc_minor]
    platforms.append(info["platform"].replace("-", "_").replace(".", "_"))
    return {"python_version": f"{major}.{minor}", "implementation": impl, "abi": abi,
            "platforms": platforms, "key": f"{impl}{major}{minor}-{abi}-{platforms[-1]}"}


def pip_target(tags, index_url=""):
    """``pip download``/``pip index`` options that choose wheels for these ``wheel_tags``."""
    args = ["--only-binary", ":all:", "--python-version", tags["python_version"],
            "--implementation", tags["implementation"], "--abi", tags["abi"]]
    for platform in tags["platforms"]:
        args += ["--platform", platform]
    return args + (["--index-url", index_url] if index_url else [])
