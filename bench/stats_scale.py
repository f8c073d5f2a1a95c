"""The statistics step at study scale: 100 bugs x 2 arms x 50 runs x 4 metrics, from records made
here (a tenth of the bugs triggered), then the dry-run time of a 100-bug study against a 10-bug
one, side by side.

    python bench/stats_scale.py [--bugs 100] [--runs 50]
"""
import argparse
import csv
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))
from workflow import project_copy  # noqa: E402

from bugimpact.harness.registry import RECORD_SCHEMA, sealed  # noqa: E402
from bugimpact.io import write_json  # noqa: E402
from bugimpact.sheet import COLUMNS  # noqa: E402
from bugimpact.stats.tables import bug_stats, study_tables  # noqa: E402

STATS = {"metrics": ["accuracy", "precision", "recall", "f1"], "alpha": 0.05, "power": 0.8,
         "min_effect": 0.0, "correction": "holm"}


def make_records(folder, bug, runs, triggered, rng):
    paths = []
    for i in range(runs):
        base = 0.9 + rng.normal(0, 0.003)
        for arm in ("buggy", "corrected"):
            shift = -0.004 if (triggered and arm == "buggy") else 0.0
            value = base + shift + (rng.normal(0, 0.002) if triggered else 0.0)
            fp = f"{arm if triggered else 'same'}-{i}"
            rec = {"status": "ok", "record_schema": RECORD_SCHEMA, "spec": {"arm": arm, "run": i},
                   "metrics": {m: value for m in STATS["metrics"]},
                   "fingerprints": {"init": fp, "epochs": [fp] * 30, "predictions": fp},
                   "nondeterministic_ops": [], "environment": {"determinism": {"cudnn_deterministic": True}}}
            path = folder / bug / arm / f"{i}.json"
            write_json(path, sealed(rec))
            paths.append(path)
    return paths


def dry_run_seconds(bugs, runs, tmp):
    work = project_copy(tmp / f"p{bugs}")
    sheet = work / "data" / "filter" / "pytorch.csv"
    with open(sheet, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        for b in range(bugs):
            writer.writerow({"id": f"pr{10000 + b}", "pr": 10000 + b, "decision": "accept",
                             "buggy_sha": f"{b:040x}", "corrected_sha": f"{b + 1:040x}", "mined": "yes"})
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    config["bugs"]["controls"] = {}
    config["artifacts"]["source"] = "installed"
    config["train"]["runs"] = runs
    (work / "scale.yaml").write_text(yaml.safe_dump(config))
    start = time.time()
    out = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--quiet", "rules", "--configfile",
                          "scale.yaml", "--cores", "2"], cwd=work, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    return time.time() - start, out.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bugs", type=int, default=100)
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    rng = np.random.RandomState(0)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        records = {f"pr{b}": make_records(tmp / "runs", f"pr{b}", args.runs, b % 10 == 0, rng)
                   for b in range(args.bugs)}
        start = time.time()
        for bug, paths in records.items():
            bug_stats(bug, paths, STATS, {"runs": args.runs, "seed_policy": "paired"},
                      (tmp / "stats" / f"{bug}.csv", tmp / "stats" / f"{bug}.json"))
        per_bug = time.time() - start
        start = time.time()
        _, verdicts, _ = study_tables(sorted((tmp / "stats").glob("*.json")), {}, "bench", STATS, [],
                                      tmp / "pvalues.csv", tmp / "verdicts.csv", tmp / "summary.csv")
        study = time.time() - start
        counts = {}
        for v in verdicts:
            counts[v["verdict"]] = counts.get(v["verdict"], 0) + 1
        print(f"stats for {args.bugs} bugs x 2 arms x {args.runs} runs x 4 metrics: "
              f"{per_bug:.1f} s per-bug step in all ({per_bug / args.bugs * 1000:.0f} ms a bug), "
              f"{study:.2f} s study tables; verdicts {counts}")
        small, _ = dry_run_seconds(args.bugs // 10, args.runs, tmp)
        large, _ = dry_run_seconds(args.bugs, args.runs, tmp)
    jobs = args.bugs * 2 * args.runs
    print(f"dry run: {args.bugs // 10} bugs {small:.1f} s, {args.bugs} bugs ({jobs} train jobs) {large:.1f} s")
    print(f"ratio dry-run {args.bugs} bugs / {args.bugs // 10} bugs = {large / small:.2f} (10x the jobs)")


if __name__ == "__main__":
    main()
