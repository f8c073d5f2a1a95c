"""Fixed cost per run: the wall time of a launch minus its epochs (training and evaluation, the
records' per-epoch wall_s), as a share of the epochs, for a process per run against a child
forked from the fork server, interleaved in one process so machine noise hits both alike.
Target: the fork server's fixed cost at most 20% of the run.

    python bench/run_overhead.py [--rounds 6] [--epochs 15]
"""
import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from bugimpact.artifacts.launch import RunOptions, launch  # noqa: E402
from bugimpact.artifacts.runtimes import prepare_local  # noqa: E402
from bugimpact.challenges import prepare  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--epochs", type=int, default=15, help="the default study's 15")
    args = parser.parse_args()
    runtime = prepare_local({"source": "installed"})
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        meta = prepare("digits", tmp / "digits.npz", tmp / "digits.json")
        spec = {"bug": "bench", "arm": "buggy", "seed": 1, "model": "smallcnn",
                "challenge": "digits", "data": str(tmp / "digits.npz"),
                "data_sha256": meta["sha256"], "epochs": args.epochs, "batch_size": 32, "lr": 0.05,
                "momentum": 0.9, "lr_schedule": "cosine", "threads": 1, "test_fraction": 0.25}
        results = {False: [], True: []}
        with open(tmp / "log", "a") as log:
            launch(runtime, dict(spec, run=0), tmp / "warm.json", log, RunOptions(fork_server=True))  # starts it
            for i in range(args.rounds):
                for fork in (False, True):
                    out = tmp / f"{fork}-{i}.json"
                    start = time.time()
                    assert launch(runtime, dict(spec, run=i, seed=i), out, log, RunOptions(fork_server=fork)) == 0
                    wall = time.time() - start
                    run = sum(e["wall_s"] for e in json.loads(out.read_text())["epochs"])
                    results[fork].append((wall - run, run))
    print(f"{args.rounds} runs per path, smallcnn on digits, {args.epochs} epochs, torch "
          f"{runtime['probe']['version']}")
    print("path                  fixed cost (s)  epochs (s)  fixed / epochs")
    ratios = {}
    for fork, label in ((False, "a process per run"), (True, "fork server")):
        fixed = statistics.median(f for f, _ in results[fork])
        run = statistics.median(r for _, r in results[fork])
        ratios[fork] = fixed / run
        print(f"{label:21} {fixed:14.3f} {run:11.3f} {fixed / run:14.1%}")
    print(f"fixed cost, fork server against a process per run: {ratios[True] / ratios[False]:.3f}x")


if __name__ == "__main__":
    main()
