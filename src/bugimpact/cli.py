"""``bugimpact``: run any step by hand on explicit files (the functions the rules call)."""
import argparse
import logging
import sys

from . import steps
from .config import SHEET_SCHEMA, load_config
from .io import InputError, read_json


def _config(args):
    return load_config(args.config)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="bugimpact", description=__doc__)
    parser.add_argument("--config", default="config.yaml", help="study config (default: config.yaml)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("mine", help="step 1: release notes to bugs.csv and a per-release count table")
    p.add_argument("--out", default="results/mined/bugs.csv")
    p.add_argument("--counts", default="results/mined/releases.csv")

    p = sub.add_parser("resolve", help="step 2: each bug's PR to its buggy and corrected commits")
    p.add_argument("--bugs", default="results/mined/bugs.csv")
    p.add_argument("--out", default="results/resolved/commits.csv")

    p = sub.add_parser("sheet", help="step 3: create or merge the filter sheet")
    p.add_argument("--bugs", default="results/mined/bugs.csv")
    p.add_argument("--commits", default="results/resolved/commits.csv")
    p.add_argument("--sheet", help="default: the config's sheet")
    p.add_argument("--funnel", default="results/filter/funnel.csv")
    p.add_argument("--merge-report", default="results/filter/merge.json")

    p = sub.add_parser("validate-sheet", help="check a filter sheet; errors name file, row, column")
    p.add_argument("sheet", nargs="?")

    p = sub.add_parser("validate-config", help="check a study config; errors name file, line, key")
    p.add_argument("file", nargs="?", help="default: --config")

    p = sub.add_parser("prepare-data", help="a challenge's official files to a canonical .npz")
    p.add_argument("challenge", choices=["digits", "cifar10", "mnist"])
    p.add_argument("--out", required=True)
    p.add_argument("--meta", required=True)

    p = sub.add_parser("train-run", help="step 5: one run of one arm from a spec JSON, in a runtime")
    p.add_argument("--spec", required=True, help="run spec JSON (as the harness takes it)")
    p.add_argument("--runtime", required=True, help="runtime.json")
    p.add_argument("--out", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--retries", type=int, default=0)

    p = sub.add_parser("stats", help="step 6: one bug's statistics from its run records")
    p.add_argument("bug")
    p.add_argument("records", nargs="+")
    p.add_argument("--out", required=True, help="per-metric CSV")
    p.add_argument("--json", required=True)

    p = sub.add_parser("retry-failed", help="delete failed run records and failed build manifests "
                                           "so that the next workflow run retries them")
    p.add_argument("--runs", default="results/runs")
    p.add_argument("--artifacts", default="results/artifacts")

    p = sub.add_parser("preflight", help="check in seconds what hours of builds need: commits, "
                                         "submodules, images, disk, GPUs, data, wheels")
    p.add_argument("--nvidia-smi", help="a recorded `nvidia-smi --query-gpu=name,compute_cap,"
                                        "driver_version --format=csv,noheader` (default: run it)")

    p = sub.add_parser("verify", help="list run records that are cut short, edited or from "
                                      "another harness version; --remove deletes only those")
    p.add_argument("--runs", default="results/runs")
    p.add_argument("--remove", action="store_true")

    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    try:
        return _dispatch(args) or 0
    except (InputError, FileNotFoundError) as exc:
        print(f"bugimpact: {exc}", file=sys.stderr)
        return 2


def _dispatch(args):
    if args.command == "mine":
        steps.mine(_config(args), args.out, args.counts)
    elif args.command == "resolve":
        steps.resolve(_config(args), args.bugs, args.out)
    elif args.command == "sheet":
        sheet = args.sheet or _config(args)["sheet"]
        steps.dump(steps.sheet(sheet, args.bugs, args.commits, args.merge_report, args.funnel))
    elif args.command == "validate-config":
        load_config(args.file or args.config)
        print(f"{args.file or args.config}: valid")
    elif args.command == "validate-sheet":
        from .sheet import accepted, validate
        rows = validate(args.sheet or _config(args)["sheet"], SHEET_SCHEMA)
        print(f"ok: {len(rows)} rows, {len(accepted(rows))} accepted")
    elif args.command == "prepare-data":
        steps.dump(steps.prepare_data(_config(args), args.challenge, args.out, args.meta))
    elif args.command == "train-run":
        from .train import train_one
        runtime = read_json(args.runtime)
        spec = read_json(args.spec)
        status = train_one(spec, args.out, args.log, runtime, retries=args.retries,
                           threads=spec.get("threads", 1))
        print(status)
        return 0 if status != "failed" else 1
    elif args.command == "stats":
        config = _config(args)
        steps.bug_stats(config, args.bug, args.records, args.out, args.json)
    elif args.command == "preflight":
        try:
            steps.preflight(_config(args), nvidia_smi=args.nvidia_smi)
        except InputError:
            return 1
    elif args.command == "verify":
        from .records import broken
        bad = broken(args.runs)
        for path, why in bad:
            if args.remove:
                path.unlink()
            print(f"{'removed ' if args.remove else ''}{path}: {why}")
        print(f"{len(bad)} broken record(s)" + (" removed; rerun snakemake to make them again"
                                                if args.remove and bad else ""))
        return 1 if bad and not args.remove else 0
    elif args.command == "retry-failed":
        from pathlib import Path
        candidates = list(Path(args.runs).rglob("*.json")) + \
            list(Path(args.artifacts).glob("*/manifest.json"))
        removed = [p for p in candidates if read_json(p).get("status") == "failed"]
        for path in removed:
            path.unlink()
            print(f"removed {path}")
        print(f"{len(removed)} failed records removed; rerun snakemake to retry them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
