"""Which build of torch the host environment gets, said before it is installed, and installed.

``bin/setup-host`` runs this with the environment's own Python, before anything else is installed
there (standard library only): ``python -m bugimpact.torch_install --version 2.13.0``.

- A GPU here (``nvidia-smi -L`` lists one): PyPI's build, which is the CUDA build on Linux x86_64
  (``torch===V``: exactly that version, so a local ``+cpu`` wheel is not taken instead).
- No GPU, and PyTorch's CPU wheel index answers: the CPU build from it (about 200 MB instead of
  several GB).
- No GPU and no CPU index: whatever pip's configured indexes have, which is the CPU build only
  where a local wheel provides it, and PyPI's CUDA build otherwise: said so, with its size.

What pip will install is asked first (``pip install --dry-run --report``): the build is read from
it (a ``+cpu`` version, or NVIDIA packages beside torch) and the download size from the files'
sizes, so the message is what happens, not what was hoped.
"""
import argparse
import json
import os
import platform
import re
import shutil
import ssl
import subprocess
import sys
import urllib.request
from urllib.parse import urlparse

CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def gpus_here():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def _tls():
    cert = os.environ.get("PIP_CERT")
    return ssl.create_default_context(cafile=cert) if cert and os.path.exists(cert) else None


def reachable(url, timeout=5.0):
    try:
        request = urllib.request.Request(url.rstrip("/") + "/torch/", method="HEAD")
        with urllib.request.urlopen(request, timeout=timeout, context=_tls()):
            return True
    except (OSError, ValueError):
        return False


def choose(version, gpus, cpu_index):
    """(requirement, pip arguments, why) for this machine: ``cpu_index`` is the CPU wheel index
    when it answers, else None."""
    if gpus:
        return f"torch==={version}", [], f"{gpus} GPU(s) here: PyPI's CUDA build"
    if cpu_index:
        return f"torch=={version}", ["--extra-index-url", cpu_index], f"no GPU here: the CPU build from {cpu_index}"
    return (f"torch=={version}", [], f"no GPU here, and PyTorch's CPU index ({CPU_INDEX}) does not "
            "answer: the build pip's indexes have (a CUDA build runs on the CPU too)")


def planned(python, requirement, pip_args, env=None):
    """What ``pip install`` would install: [{name, version, url}] from its dry-run report."""
    out = subprocess.run([python, "-m", "pip", "install", "--dry-run", "--quiet",
                          "--report", "-", *pip_args, requirement],
                         capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise SystemExit(f"pip cannot install {requirement}: {out.stderr.strip()[-1500:]}")
    report = json.loads(out.stdout)
    return [{"name": re.sub(r"[-_.]+", "-", item["metadata"]["name"]).lower(),
             "version": item["metadata"]["version"], "requires": item["metadata"].get("requires_dist", []),
             "url": item["download_info"]["url"]} for item in report["install"]]


def size_of(url, timeout=20.0):
    """A file's size in bytes (a local path, or a HEAD request), or None."""
    parsed = urlparse(url)
    try:
        if parsed.scheme == "file":
            return os.path.getsize(urllib.request.url2pathname(parsed.path))
        request = urllib.request.Request(url, method="HEAD")
        with urllib.request.urlopen(request, timeout=timeout, context=_tls()) as answer:
            return int(answer.headers["Content-Length"])
    except (OSError, ValueError, TypeError):
        return None


def describe(items, sizes):
    """'torch 2.13.0+cpu (CPU build, 1 package, 192 MB)' from the planned items and their sizes.
    The build is torch's own: a ``+cuXYZ`` version, or NVIDIA CUDA libraries among its
    requirements (PyPI's Linux build), whether or not they are installed already."""
    torch = next(item for item in items if item["name"] == "torch")
    local = re.search(r"\+cu(\d+)(\d)$", torch["version"])
    cuda = [r for r in map(_here, torch["requires"]) if r and re.match(r"(nvidia|cuda)[-_]", r)]
    pinned = next((m.group(1) for m in (re.match(r"(?:cuda-toolkit|nvidia-cuda-runtime)[^=;]*==\s*"
                                                 r"(\d+\.\d+)", r.replace("_", "-")) for r in cuda) if m),
                  None)
    if local:
        build = f"CUDA {local.group(1)}.{local.group(2)} build"
    elif cuda:
        build = f"CUDA {pinned} build" if pinned else "CUDA build"
    else:
        build = "CPU build"
    known = [s for s in sizes if s is not None]
    size = (f"{_mb(sum(known))} to download" + ("" if len(known) == len(sizes) else " and more")
            if known else "size unknown")
    return f"torch {torch['version']} ({build}, {len(items)} package{'s' * (len(items) != 1)}, {size})"


def _here(requirement):
    """The requirement without its marker, where the marker can hold on this platform (torch's
    CUDA libraries are marked for Linux), else None."""
    name, _, marker = requirement.partition(";")
    if "extra ==" in marker:
        return None
    other = re.search(r"platform_system\s*==\s*[\"'](\w+)", marker)
    return name.strip() if not other or other.group(1) == platform.system() else None


def _mb(count):
    return f"{count / 1e9:.1f} GB" if count >= 1e9 else f"{count / 1e6:.0f} MB"


def folder_size(path):
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            full = os.path.join(root, name)
            if not os.path.islink(full):
                total += os.path.getsize(full)
    return total


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--version", required=True)
    parser.add_argument("--cpu-index", default=os.environ.get("TORCH_CPU_INDEX", CPU_INDEX),
                        help="PyTorch's CPU wheel index (TORCH_CPU_INDEX); '' to not ask it")
    args = parser.parse_args(argv)
    gpus = gpus_here()
    cpu_index = args.cpu_index if args.cpu_index and not gpus and reachable(args.cpu_index) else None
    requirement, pip_args, why = choose(args.version, gpus, cpu_index)
    items = planned(sys.executable, requirement, pip_args)
    what = describe(items, [size_of(item["url"]) for item in items])
    print(f"setup-host: installing {what}: {why}", file=sys.stderr, flush=True)
    code = subprocess.run([sys.executable, "-m", "pip", "install", "--progress-bar", "on", *pip_args,
                           requirement]).returncode
    if code == 0:
        print(f"setup-host: {sys.prefix} is now {_mb(folder_size(sys.prefix))} "
              f"({shutil.disk_usage(sys.prefix).free / 1e9:.0f} GB left on its disk)",
              file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
