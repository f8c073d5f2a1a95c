"""The shipped release study's environments made by pip (a full copy per venv, the former way)
and by uv (files hard-linked from one unpacked copy in uv's cache), side by side in one run:
seconds per venv, disk for all of them (each inode counted once, uv's cache included) and what a
one-fix arm costs beside its release.

The six environments of configs/releases.yaml: torch 1.4.0, 1.5.0, 1.5.1 and 1.6.0 for CPython
3.7, and the buggy and corrected arms of the one-fix bug pr37881 on 1.5.1. Wheels come from
data/cache/wheels (downloaded once, 750 MB each, not counted); each installer starts with an
empty cache of its own, so uv's first venv of a release pays its unpacking.

    python bench/venv_sharing.py [--keep]
"""
import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))
from conftest import config_with  # noqa: E402

from bugimpact import steps  # noqa: E402
from bugimpact.artifacts import interpreters  # noqa: E402
from bugimpact.artifacts.runtimes import prepare_venv  # noqa: E402

RELEASES = ("1.4.0", "1.5.0", "1.5.1", "1.6.0")
PATCH = ROOT / "data" / "patches" / "pytorch" / "pr37881.diff"
WHEELS = ROOT / "data" / "cache" / "wheels"


def artifacts(python, folder):
    """The six artifacts' manifests (and the one-fix overlays) in ``folder``, made (downloads
    included) before anything is timed."""
    sources = steps.artifact_sources(config_with(**{"artifacts.wheel_cache": str(WHEELS)}))
    specs = {f"torch-{v}": {"source": "pypi", "version": v, "python": python} for v in RELEASES}
    for arm in ("buggy", "corrected"):
        specs[f"pr37881-{arm}"] = {"source": "onefix", "arm": arm, "patch": str(PATCH), "python": python,
                                   "release": {"source": "pypi", "version": "1.5.1"}}
    manifests = {}
    for name, spec in specs.items():
        manifests[name] = steps.artifact(sources, spec, folder / name / "manifest.json")
        assert manifests[name]["status"] == "ok", manifests[name]
    return manifests


def inodes(*folders):
    """{(device, inode): size} of every regular file under the folders: a hard-linked file once."""
    found = {}
    for folder in folders:
        for dirpath, _, files in os.walk(folder):
            for name in files:
                st = os.lstat(os.path.join(dirpath, name))
                if not os.path.islink(os.path.join(dirpath, name)):
                    found[(st.st_dev, st.st_ino)] = st.st_size
    return found


def measure(installer, manifests, python, work):
    cache = work / "cache"
    seconds, venvs = {}, {}
    for name, manifest in manifests.items():
        start = time.perf_counter()
        prepare_venv(manifest, work / name, python, installer=installer, cache=cache)
        seconds[name] = time.perf_counter() - start
        venvs[name] = work / name / "venv"
    total = inodes(*venvs.values(), *([cache] if installer == "uv" else []))
    elsewhere = inodes(*(v for n, v in venvs.items() if n != "pr37881-buggy"),
                       *([cache] if installer == "uv" else []))
    own = sum(size for key, size in inodes(venvs["pr37881-buggy"]).items() if key not in elsewhere)
    return {"seconds": seconds, "disk": sum(total.values()), "onefix_own": own}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the venvs (printed folder)")
    args = parser.parse_args()
    python = interpreters.find("3.7")
    # beside the repository: uv links need its cache and the venvs on one file system
    work = Path(tempfile.mkdtemp(prefix="bench-venv-", dir=ROOT / "data" / "cache"))
    try:
        manifests = artifacts(python, work / "artifacts")
        results = {inst: measure(inst, manifests, python["executable"], work / inst) for inst in ("pip", "uv")}
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    pip, uv = results["pip"], results["uv"]
    print(f"{'environment':<20}{'pip s':>9}{'uv s':>9}")
    for name in manifests:
        print(f"{name:<20}{pip['seconds'][name]:>9.1f}{uv['seconds'][name]:>9.1f}")
    gb = 1e9
    print(f"{'disk, 6 envs (GB)':<20}{pip['disk'] / gb:>9.2f}{uv['disk'] / gb:>9.2f}")
    print(f"{'one-fix arm own (MB)':<20}{pip['onefix_own'] / 1e6:>9.1f}{uv['onefix_own'] / 1e6:>9.1f}")
    worst_uv = max(uv["seconds"].values())
    print(f"ratio uv/pip: time of the 6 envs = {sum(uv['seconds'].values()) / sum(pip['seconds'].values()):.3f}, "
          f"disk = {uv['disk'] / pip['disk']:.3f}; slowest uv venv {worst_uv:.1f} s "
          f"(its release unpacked into the cache), on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
