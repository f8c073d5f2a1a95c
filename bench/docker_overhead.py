"""Overhead of the docker runtime over the local runtime for the same harness job (same artifact:
the installed torch, same spec), interleaved in one run. Prints the ratio of wall time per job.

    python bench/docker_overhead.py [--jobs 6] [--epochs 10]
Needs a Docker engine (bin/start-docker) and the base image (bin/make-base-image).
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
from bugimpact.artifacts.docker import build_toolchain, prepare_runtime  # noqa: E402
from bugimpact.artifacts.launch import launch  # noqa: E402
from bugimpact.artifacts.runtimes import prepare_local  # noqa: E402
from bugimpact.artifacts.sources import installed_manifest  # noqa: E402
from bugimpact.challenges import prepare  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=6)
    parser.add_argument("--epochs", type=int, default=10)
    args = parser.parse_args()
    subprocess.run([str(ROOT / "bin" / "make-base-image")], check=True, capture_output=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        wheels = tmp / "wheels"
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(wheels),
                        "torch==2.13.0"], check=True)
        artifact = installed_manifest()
        docker_cfg = {"toolchain": "cpu", "base_image": "", "build_command": "python setup.py bdist_wheel",
                      "build_env": {}, "ca_bundle": "/etc/ssl/certs/ca-certificates.crt"}
        with open(tmp / "image.log", "w") as log:
            toolchain = build_toolchain(docker_cfg, log)
        runtimes = {"local": prepare_local(artifact),
                    "docker": prepare_runtime(artifact, toolchain, [str(next(wheels.glob("*.whl")))],
                                              "", tmp / "rt")}
        npz = tmp / "data" / "digits.npz"
        meta = prepare("digits", npz, tmp / "data" / "digits.json")
        spec = {"bug": "bench", "arm": "buggy", "run": 0, "seed": 1, "model": "smallcnn",
                "data": str(npz), "data_sha256": meta["sha256"], "epochs": args.epochs,
                "batch_size": 32, "lr": 0.02, "momentum": 0.5, "threads": 1}
        times = {"local": [], "docker": []}
        fingerprints = {}
        with open(tmp / "log", "w") as log:
            for i in range(args.jobs):
                for kind in ("local", "docker"):
                    out = tmp / "out" / f"{kind}-{i}.json"
                    out.parent.mkdir(exist_ok=True)
                    start = time.time()
                    assert launch(runtimes[kind], spec, out, log) == 0, (tmp / "log").read_text()
                    times[kind].append(time.time() - start)
                    fingerprints[kind] = json.loads(out.read_text())["fingerprints"]
    local, docker = statistics.median(times["local"]), statistics.median(times["docker"])
    print(f"{args.jobs} jobs each, interleaved; smallcnn on digits, {args.epochs} epochs")
    print(f"median wall time per job: local {local:.2f} s, docker {docker:.2f} s")
    print(f"ratio docker/local = {docker / local:.3f}")
    print(f"same fingerprints in both runtimes: {fingerprints['local'] == fingerprints['docker']}")


if __name__ == "__main__":
    main()
