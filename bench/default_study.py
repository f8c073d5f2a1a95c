"""The default study (config.yaml as shipped) from a fresh copy of the project: its wall time, and
each train job's fixed cost (the job's time less its epochs, as a share of the job). Targets: the
study under 10 minutes on 2 cores; a run's fixed cost at most 20% of a small job.

    python bench/default_study.py [--cores 2]                 # CPU, as make study
    python bench/default_study.py --cores 16 --gpu            # on a GPU VM: the cuda study beside
                                                              # the CPU one on 2 of its cores

With ``--gpu`` both studies run in one invocation, the CPU one confined to two cores (taskset), and
the ratio of their wall times is the target "a 1-GPU VM no slower than 2 CPU cores" (at most 1).
"""
import argparse
import csv
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the controls' verdicts README shows for the shipped study (on any device)
EXPECTED = {"aa": "not triggered", "fault-labelnoise": "impact", "fault-momentum": "impact"}
sys.path.insert(0, str(ROOT / "tests"))
from workflow import project_copy  # noqa: E402

from bugimpact.workflow import run_to_the_end  # noqa: E402


def job_costs(work):
    """(job seconds, epoch seconds) of every train job (its benchmark file and its record)."""
    costs = []
    for tsv in sorted((work / "benchmarks" / "train").glob("*/*/*/*.tsv")):
        if tsv.name.endswith(".repeat.tsv"):
            continue
        with open(tsv) as handle:
            job = float(next(csv.DictReader(handle, delimiter="\t"))["s"])
        bug, key, arm = tsv.parts[-4:-1]
        record = json.loads((work / "results" / "runs" / bug / key / arm / f"{tsv.stem}.json").read_text())
        costs.append((job, sum(e["wall_s"] for e in record["epochs"])))
    return costs


def study(cores, device, pin=None):
    """Wall seconds, the verdict lines and the train jobs' costs of one default study."""
    with tempfile.TemporaryDirectory() as tmp:
        work = project_copy(Path(tmp) / "p")
        cmd = [sys.executable, "-m", "snakemake", "--cores", str(cores), "--config",
               f"train={{device: {device}}}"]
        if pin:
            cmd = ["taskset", "-c", pin] + cmd
        start = time.time()
        out = run_to_the_end(cmd, cwd=work, capture_output=True, text=True)  # as make study
        wall = time.time() - start
        assert out.returncode == 0, out.stderr[-3000:]
        verdicts = (work / "results" / "calibration" / "stats" / "verdicts.csv").read_text()
        return wall, verdicts, job_costs(work)


def verdicts_of(table):
    return {row["bug"]: row["verdict"] for row in csv.DictReader(table.splitlines())}


def report(label, wall, verdicts, costs):
    job = statistics.median(j for j, _ in costs)
    epochs = statistics.median(e for _, e in costs)
    print(f"{label}: {wall:.0f} s ({wall / 60:.1f} min); {len(costs)} train jobs, median job "
          f"{job:.2f} s of which epochs {epochs:.2f} s: fixed cost {(job - epochs) / job:.0%} of "
          "the job (target at most 20%)")
    for row in list(csv.DictReader(verdicts.splitlines())):
        effect = f" {float(row['effect']):+.4f} [{float(row['effect_low']):+.4f}, {float(row['effect_high']):+.4f}]" if row['effect'] else ''
        print(f"  {row['bug']}: {row['verdict']}{effect}")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--gpu", action="store_true", help="also the cuda study, and the ratio")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 unless each control has the verdict README promises (CI)")
    args = parser.parse_args()
    cpu = study(2 if args.gpu else args.cores, "cpu", "0,1" if args.gpu else None)
    report(f"default study, cpu, {2 if args.gpu else args.cores} cores", *cpu)
    if args.check and verdicts_of(cpu[1]) != EXPECTED:
        print(f"expected {EXPECTED}, got {verdicts_of(cpu[1])}")
        return 1
    if not args.gpu:
        print(f"ratio to the 10-minute target = {cpu[0] / 600:.2f}")
        return 0
    gpu = study(args.cores, "cuda")
    report(f"default study, cuda, {args.cores} cores, {os.environ.get('CUDA_VISIBLE_DEVICES', 'every')} GPU(s)", *gpu)
    print(f"cuda study / cpu study on 2 cores = {gpu[0] / cpu[0]:.2f} (target at most 1)")
    return 1 if args.check and verdicts_of(gpu[1]) != EXPECTED else 0


if __name__ == "__main__":
    sys.exit(main())
