"""Second-arm rebuild time with the shared compiler cache against a cold build of the same commit,
measured side by side in one run on the tiny C-extension package of the tests (24 filler units
plus the one file the fix touches). The toolchain image is built first and not counted.

    python bench/rebuild.py
"""
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))
from tinypkg import make_repo  # noqa: E402

from bugimpact.artifacts.docker import build_toolchain, build_wheel  # noqa: E402


def main():
    subprocess.run([str(ROOT / "bin" / "make-base-image")], check=True, capture_output=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        shas = make_repo(tmp / "repo")
        volumes = [f"bugimpact-bench-{uuid.uuid4().hex[:8]}" for _ in range(2)]
        cfg = {"toolchain": "cpu", "clone": str(tmp / "repo"), "base_image": "",
               "build_command": "python setup.py bdist_wheel", "build_env": {},
               "ca_bundle": "/etc/ssl/certs/ca-certificates.crt", "timeout_s": 3600}
        with open(tmp / "image.log", "w") as log:
            toolchain = build_toolchain(cfg, log)
        try:
            first = build_wheel(shas["buggy"], dict(cfg, ccache_volume=volumes[0]), toolchain,
                                tmp / "a", tmp / "a.log")
            second = build_wheel(shas["corrected"], dict(cfg, ccache_volume=volumes[0]), toolchain, tmp / "b",
                                 tmp / "b.log")
            cold = build_wheel(shas["corrected"], dict(cfg, ccache_volume=volumes[1]), toolchain, tmp / "c",
                               tmp / "c.log")
        finally:
            subprocess.run(["docker", "volume", "rm", "-f", *volumes], capture_output=True)
    assert first["status"] == second["status"] == cold["status"] == "ok"
    print(f"first arm (cold cache): {first['build_seconds']:.1f} s")
    print(f"second arm (shared cache): {second['build_seconds']:.1f} s")
    print(f"second arm built cold, for comparison: {cold['build_seconds']:.1f} s")
    print(f"ratio second-arm/cold = {second['build_seconds'] / cold['build_seconds']:.3f}")


if __name__ == "__main__":
    main()
