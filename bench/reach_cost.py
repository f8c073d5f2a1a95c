"""What the reach step costs against what it can save, side by side in one run: seconds of static
mapping per fix and seconds per workload trace, against the two source builds (buggy and corrected)
that a fix found not reached no longer needs.

    python bench/reach_cost.py [--clone CLONE --rows data/known_commits/pytorch.csv]
        [--python PY] [--build-hours 1]

Static side: the shipped ATen snapshot and real diffs (tests/fixtures/reach), or, with --clone, the
real fixes of --rows at their own commits (operator tables read from the clone, built once per
corrected commit and cached). Trace: the default study's workload (smallcnn on digits) in --python
(default: this interpreter's torch). The build side is not measured here: a PyTorch source build
takes 1-3 h on a GPU VM (--build-hours sets the low end used for the ratio).
"""
import argparse
import csv
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
from bugimpact.config import load_config  # noqa: E402
from bugimpact.framework.tables import DirTree, Tables  # noqa: E402
from bugimpact.reach.batch import trace_in  # noqa: E402
from bugimpact.reach.run import map_fix  # noqa: E402
from bugimpact.reach.static import map_diff  # noqa: E402

FIX = ROOT / "tests" / "fixtures" / "reach"


def static_fixture():
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(FIX / "aten-2020-03-25.tar.xz") as archive:
            archive.extractall(tmp)
        start = time.time()
        tables = Tables(DirTree(tmp))
        built = time.time() - start
        diffs = sorted((FIX / "diffs").glob("*.diff"))
        start = time.time()
        for diff in diffs:
            map_diff(diff.read_text(), tables)
        return built, (time.time() - start) / len(diffs), len(diffs)


def static_clone(clone, rows_csv, cache):
    rows = [r for r in csv.DictReader(open(rows_csv)) if r.get("buggy_sha") and r.get("corrected_sha")]
    sources = {"fix_clone": clone}
    times = []
    for row in rows:
        start = time.time()
        diff = subprocess.run(["git", "-C", clone, "diff", row["buggy_sha"], row["corrected_sha"]],
                              capture_output=True, text=True).stdout
        map_fix(diff, sources, {}, row, cache)
        times.append(time.time() - start)
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clone")
    parser.add_argument("--rows", default=str(ROOT / "data" / "known_commits" / "pytorch.csv"))
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--build-hours", type=float, default=1.0)
    args = parser.parse_args()
    train = load_config(ROOT / "config.yaml")["train"]
    with tempfile.TemporaryDirectory() as tmp:
        trace_s = trace_in(args.python, train, Path(tmp) / "trace.json", steps=3)
        if args.clone:
            cold = static_clone(args.clone, args.rows, Path(tmp) / "tables")
            warm = static_clone(args.clone, args.rows, Path(tmp) / "tables")
            per_fix, what = sum(warm) / len(warm), f"{len(cold)} fixes of {args.rows}"
            print(f"static, cold (tables built per commit): {sum(cold) / len(cold):.2f} s per fix")
        else:
            built, per_fix, n = static_fixture()
            what = f"{n} real diffs on the shipped ATen snapshot"
            print(f"operator tables of the snapshot: {built:.2f} s")
    print(f"static mapping ({what}): {per_fix:.3f} s per fix")
    print(f"trace of smallcnn on digits, 3 steps, {args.python}: {trace_s:.1f} s")
    build_pair = 2 * args.build_hours * 3600
    print(f"two source builds at {args.build_hours:g} h each: {build_pair:.0f} s")
    print(f"ratio (build pair / (static per fix + trace)) = {build_pair / (per_fix + trace_s):.0f}")


if __name__ == "__main__":
    main()
