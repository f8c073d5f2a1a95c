"""``bugimpact``: run one step of the workflow, and the checks and housekeeping around it.

Every step has one way in, its Snakemake rule: ``bugimpact run STEP`` runs that rule (and what it
needs) with the same params, logs and provenance as a full ``snakemake`` run."""
import argparse
import logging
import sys
from pathlib import Path

from . import gpucheck, layout, recovery, steps, workflow
from .config import SHEET_SCHEMA, check_paths, load_config, load_schema
from .config_docs import render
from .identities import Study
from .io import InputError, read_json, write_text
from .plan import Plan
from .records import broken
from .sheet import accepted, validate
from .status import bug_row, command, summary, table, verdicts

# retry-failed --all: the results folders it reads, each with its own option
RETRY_FOLDERS = {"runs": layout.RUNS, "repeats": layout.REPEATS, "artifacts": layout.ARTIFACTS,
                 "runtimes": layout.RUNTIMES, "gates": layout.ARMS_GATES, "checks": layout.CHECKS}


def _config(args):
    return load_config(args.config)


def _parser():
    parser = argparse.ArgumentParser(prog="bugimpact", description=__doc__)
    parser.add_argument("--config", default="config.yaml", help="study config (default: config.yaml)")
    sub = parser.add_subparsers(dest="command", required=True)
    # --config also after the command (`bugimpact status --config configs/releases.yaml`)
    either = argparse.ArgumentParser(add_help=False)
    either.add_argument("--config", default=argparse.SUPPRESS, help="study config")

    def command(name, **kw):
        return sub.add_parser(name, parents=[either], **kw)

    p = command("run", help="run the study (`snakemake`, run again where Snakemake lost jobs), or "
                            "one step of it and what that needs: the same rule, params and logs; "
                            "`bugimpact steps` lists them; or, with --bug, everything one bug "
                            "still needs")
    p.add_argument("step", nargs="?",
                   help="a rule name, e.g. mine, resolve, sheet_merge, funnel, train, report")
    p.add_argument("--bug", help="one bug (see `bugimpact status`): its failed runs are retried and "
                                 "what it still needs is made, nothing of other bugs")
    p.add_argument("-n", "--dry-run", action="store_true", help="say what would run")
    p.add_argument("--cores", default="2")
    p.add_argument("snakemake_args", nargs=argparse.REMAINDER,
                   help="passed on to snakemake, e.g. --dry-run or --profile profiles/slurm")

    command("steps", help="the workflow's steps (its rules), in the order they run")
    command("status", help="per bug: sheet decision, arms, runs done/needed, failures, "
                           "verdict, and the command that makes what it still needs")

    p = command("validate-sheet", help="check a filter sheet; errors name file, row, column")
    p.add_argument("sheet", nargs="?")

    p = command("validate-config", help="check a study config; errors name file, line, key")
    p.add_argument("file", nargs="?", help="default: --config")

    p = command("retry-failed", help="remove each run record, artifact manifest, runtime record, "
                                    "override check and arms gate of the study (--config) that is broken, failed "
                                    "or stale, saying each, so that the next workflow run makes it again")
    p.add_argument("--all", action="store_true", help="those of every study under the results folders "
                                                      "(the folders below), not only the config's")
    for name, folder in RETRY_FOLDERS.items():
        p.add_argument(f"--{name}", help=f"with --all: where the {name} are (default {folder})")
    p.add_argument("--dry-run", action="store_true", help="say what would be removed")

    p = command("preflight", help="check in seconds what hours of builds need: commits, "
                                  "submodules, images, disk, GPUs, data, wheels")
    p.add_argument("--nvidia-smi", help="a recorded `nvidia-smi --query-gpu=name,compute_cap,"
                                        "driver_version --format=csv,noheader` (default: run it)")

    p = command("verify", help="list run records and override checks that are cut short, edited "
                               "or from another harness version; --remove deletes only those")
    p.add_argument("--runs", default=layout.RUNS)
    p.add_argument("--checks", default=layout.CHECKS)
    p.add_argument("--remove", action="store_true")

    p = command("gc", help="list the artifacts, runtimes (venvs), docker images and cached "
                           "wheels that no current config or run record refers to; "
                           "--remove deletes them")
    p.add_argument("--keep", nargs="+", metavar="CONFIG",
                   help="the current configs (default: config.yaml and configs/*.yaml)")
    p.add_argument("--results", default="results")
    p.add_argument("--remove", action="store_true")

    p = command("config-docs", help="the configuration reference (docs/configuration.md), "
                                    "made from schemas/config.schema.yaml")
    p.add_argument("--out", help="write it here (default: print it)")

    p = command("check-gpu", help="before hours of GPU runs: the study's model on this GPU, two "
                                  "runs with one seed (bit-identical?), an epoch against its FLOP "
                                  "floor, runs per GPU-hour at 1, 2 and 4 runs per GPU, and the "
                                  "train.runs_per_gpu it recommends")
    p.add_argument("--epochs", type=int, default=1, help="epochs per measured run (default 1)")
    p.add_argument("--shares", type=int, nargs="+", default=[1, 2, 4],
                   help="runs at once on the GPU to measure (default 1 2 4)")

    p = command("reach-trace", help="trace a few training steps of the study's workload in "
                                    "an interpreter (operators dispatched, torch lines run)")
    p.add_argument("--python", required=True, help="an interpreter with torch and numpy")
    p.add_argument("--out", required=True)
    p.add_argument("--model", help="default: the config's train.model")
    p.add_argument("--challenge", help="default: the config's train.challenge")
    p.add_argument("--data", help="a prepared .npz (default: random pixels in the challenge's shapes)")
    p.add_argument("--steps", type=int, help="default: the config's reach.steps")

    p = command("cpp-called", help="reach's ground truth: one whole run of the study's workload in an "
                                   "interpreter, and the release's own C++ functions it called (the dynamic "
                                   "loader's record, its blind spots named)")
    p.add_argument("--python", required=True, help="an interpreter with torch and numpy")
    p.add_argument("--out", required=True)
    p.add_argument("--epochs", type=int, help="default: the config's train.epochs")
    p.add_argument("--model", help="default: the config's train.model")
    p.add_argument("--challenge", help="default: the config's train.challenge")
    p.add_argument("--data", help="a prepared .npz (default: random pixels in the challenge's shapes)")

    p = command("reach", help="judge fixes against reach traces, with no build: reached, "
                              "not reached, not reached on cpu, unknown (why); without --trace, every fix "
                              "for every workload of workloads on every release of reach.releases, "
                              "into results/<study>/reach/matrix.csv")
    p.add_argument("--trace", nargs="+", help="traces from reach-trace or the workflow")
    p.add_argument("--truth", nargs="+", help="ground truths from cpp-called: each not reached of a trace "
                                              "of the same torch is checked against the release's calls")
    p.add_argument("--rows", help="a CSV of fixes (id, buggy_sha, corrected_sha): default the sheet")
    p.add_argument("--ids", nargs="+", help="only these ids")
    p.add_argument("--clone", help="a clone with the fixes' commits (default: the config's clones)")
    p.add_argument("--tables", help="without a clone: a folder of source snapshots")
    p.add_argument("--patches", help="a folder of <id>.diff (default: the config's artifacts.onefix.patches)")
    p.add_argument("--out", help="write the table as CSV")
    return parser


def main(argv=None):
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    try:
        return COMMANDS[args.command](args) or 0
    except (InputError, FileNotFoundError) as exc:
        print(f"bugimpact: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Snakemake says what it stopped; one line here, no traceback
        print("bugimpact: interrupted", file=sys.stderr)
        return 130


def _run(args):
    extra, config = list(args.snakemake_args), args.config
    for flag in ("--config", "--configfile"):  # `run STEP --config FILE`: the study's file
        if flag in extra[:-1] and "=" not in extra[extra.index(flag) + 1]:
            at = extra.index(flag)
            config = extra[at + 1]
            del extra[at:at + 2]
    check_paths(load_config(config), config)  # a bad file is named here, not in a traceback
    extra += ["--dry-run"] if args.dry_run else []
    if args.bug:
        return _run_bug(args.bug, config, args.cores, extra)
    return workflow.run(args.step, args.cores, extra, config)  # no step: the whole study


def _status(args):
    print(summary(Plan(_config(args), SHEET_SCHEMA, args.config)))


def _steps(args):
    for name in workflow.steps():
        print(name)


def _validate_config(args):
    path = args.file or args.config
    config = load_config(path)
    check_paths(config, path)
    Plan(config, SHEET_SCHEMA, path)  # what the workflow refuses at its start, refused here too
    print(f"{path}: valid")


def _validate_sheet(args):
    rows = validate(args.sheet or _config(args)["sheet"], SHEET_SCHEMA)
    print(f"ok: {len(rows)} rows, {len(accepted(rows))} accepted")


def _preflight(args):
    try:
        steps.preflight(_config(args), nvidia_smi=args.nvidia_smi)
    except InputError as exc:  # the table was logged; the reason is said once more, last
        print(f"bugimpact preflight: {exc}", file=sys.stderr)
        return 1


def _verify(args):
    _need_folder(args.runs, "--runs")
    bad = broken(args.runs) + [(f.path, f.why) for f in recovery.of_checks(sorted(Path(args.checks).glob("*/*.json")))
                               if f.state == "broken"]
    for path, why in bad:
        if args.remove:
            path.unlink()
        print(f"{'removed ' if args.remove else ''}{path}: {why}")
    print(f"{len(bad)} broken record(s)" + (" removed; rerun snakemake to make them again"
                                            if args.remove and bad else ""))
    return 1 if bad and not args.remove else 0


def _gc(args):
    from . import gc  # the CLI imports what a command needs when it runs
    names = args.keep or ["config.yaml"] + sorted(str(p) for p in Path("configs").glob("*.yaml"))
    print(f"current configs: {', '.join(names)}")
    items = gc.garbage({n: load_config(n) for n in names}, args.results)
    print("\n".join(gc.report(items)))
    if not args.remove:
        print("dry run: nothing removed (--remove deletes these)" if items else "nothing to remove")
        return 0
    problems = gc.remove(items)
    for line in problems:
        print(f"not removed: {line}", file=sys.stderr)
    print(f"removed {len(items) - len(problems)} item(s)")
    return 1 if problems else 0


def _config_docs(args):
    page = render(load_schema())
    if args.out:
        write_text(args.out, page)
        print(f"wrote {args.out}")
    else:
        print(page, end="")


def _retry_failed(args):
    """The study's findings (``recovery.of_plan``; the config's bugs only: another study's failures
    are its own), or with --all every study's under the folders (``recovery.under``)."""
    given = {name: getattr(args, name) for name in RETRY_FOLDERS if getattr(args, name) is not None}
    if given and not args.all:
        raise InputError(f"--{next(iter(given))}", "names a results folder, which only --all reads "
                         "(without it, the study of --config is found from its config)")
    if args.all:
        folders = [given.get(name, default) for name, default in RETRY_FOLDERS.items()]
        if not any(Path(f).is_dir() for f in folders):  # run from the wrong folder: not "nothing"
            _need_folder(folders[0], "--runs")
        found = recovery.under(*folders)
    else:
        plan = Plan(_config(args), SHEET_SCHEMA, args.config)
        _need_folder(Path(layout.RUNS).parent, "--config")
        found = recovery.of_plan(plan)
    lines = recovery.remove(found, args.dry_run)
    print("\n".join(lines or ["nothing broken, failed or stale"]))
    removed = sum(line.startswith("removed ") for line in lines)
    if removed and not args.dry_run:
        configfile = "" if args.all or args.config == "config.yaml" else f" --configfile {args.config}"
        one = "bugimpact run --bug ID" if args.all else command(plan, "run", "--bug", "ID")
        again = f"`snakemake{configfile}`, or `{one}` for one bug"
        print(f"{removed} removed; the next run makes them again ({again})")


def _run_bug(bug, config_path, cores, extra):
    """Everything one bug still needs (a bug studied with several workloads: each of its items,
    or the one named ``<bug>@<workload>``): its broken, failed and stale records (runs, its arms'
    artifacts and runtimes: ``recovery``) are removed, saying each, so that they are made again,
    then its targets are made; its lines are printed."""
    plan = Plan(load_config(config_path), SHEET_SCHEMA, config_path)
    items = [name for name in sorted(plan.bugs) if bug in (name, plan.bug(name).spec["bug"])]
    if not items:
        known = sorted(plan.bugs)
        raise InputError(config_path, f"no bug {bug!r} in this study (it has {', '.join(known[:12])}"
                         f"{', ...' if len(known) > 12 else ''}); a sheet row is a bug once its "
                         f"decision is accept", field="--bug")
    for line in recovery.remove(recovery.of_plan(plan, items), "--dry-run" in extra):
        print(line)
    code = workflow.run(None, cores, extra + [t for name in items for t in plan.bug_targets(name)], config_path)
    after = Plan(load_config(config_path), SHEET_SCHEMA, config_path)
    print(table([bug_row(after, name, verdicts(plan.study)) for name in items]))
    return code


def _check_gpu(args):
    try:
        result = gpucheck.check(_config(args), epochs=args.epochs, shares=sorted(set(args.shares)))
    except gpucheck.NoGpuHere as exc:
        print(f"bugimpact check-gpu: {exc}", file=sys.stderr)
        return 1
    print(gpucheck.text(result))
    return 0


def _need_folder(path, flag):
    """A results folder that is not there (run from the wrong folder) is an error, not "0"."""
    if not Path(path).is_dir():
        raise InputError(path, f"no such folder ({flag}): run this in the study's folder, or pass "
                         f"{flag}")


def _reach(args):
    config = _config(args)
    from .reach import batch  # numpy: the CLI imports what a command needs when it runs
    if args.command == "reach-trace":
        train = dict(config["train"], **{k: v for k, v in (("model", args.model),
                                                              ("challenge", args.challenge)) if v})
        seconds = batch.trace_in(args.python, train, args.out, args.steps or config["reach"]["steps"],
                                 data=args.data)
        trace = read_json(args.out)
        print(f"{args.out}: torch {trace['torch_version']}, {len(trace['ops'])} operators, "
              f"{sum(len(v) for v in trace['lines'].values())} torch lines, {seconds:.1f} s")
        return 0
    if args.command == "cpp-called":
        train = dict(config["train"], **{k: v for k, v in (("model", args.model),
                                                              ("challenge", args.challenge)) if v})
        count = batch.called_in(args.python, train, args.out, args.epochs, data=args.data)
        print(f"{args.out}: {count} functions of torch {read_json(args.out)['torch_version']} called")
        return 0
    sources = steps.artifact_sources(config)
    if args.clone:
        sources["fix_clone"] = args.clone
    reach_cfg = dict(config["reach"], **({"tables": args.tables} if args.tables else {}))
    # the fixes' diffs shipped with the project, where the config names them (one-fix arms read them)
    patches = args.patches or config["artifacts"].get("onefix", {}).get("patches")
    if not args.trace:
        return _reach_matrix(config, sources, reach_cfg, patches, args)
    rows = batch.rows_of(args.rows or config["sheet"], args.ids)
    truths = {truth["torch_version"]: truth for truth in map(read_json, args.truth or ())}
    table = batch.judge_rows(rows, batch.load_traces(args.trace), sources, reach_cfg,
                             layout.REACH_TABLES, patches, truths)
    batch.print_table(table)
    if args.out:
        batch.write_table(args.out, table)
    wrong = [f"{r['id']} ({r['trace']}): {r['truth']}" for r in table if r.get("truth", "").startswith("contradicted")]
    if wrong:  # a wrong not reached tells a user to skip a study: reach's own check fails
        print(f"bugimpact reach: {len(wrong)} not reached contradicted by the ground truth:\n  " + "\n  ".join(wrong),
              file=sys.stderr)
        return 1
    return 0


def _reach_matrix(config, sources, reach_cfg, patches, args):
    from .reach import batch  # numpy: imported when the command runs
    from .steps import matrix  # with reach's batch
    reach = config["reach"]
    if not config["workloads"] or not reach["releases"]:
        raise InputError(args.config, "give --trace, or name workloads and reach.releases for a matrix",
                         field="workloads" if not config["workloads"] else "reach.releases")
    if not args.rows and not Path(config["sheet"]).exists():  # a fresh clone: its fixes mined first
        print(f"bugimpact reach: no sheet yet: {config['sheet']} is made first (mine, resolve, sheet_merge)",
              file=sys.stderr)
        code = workflow.run("sheet_merge", 2, [], args.config)
        if code != 0:
            return code
    study = Study(config["study"])
    table, failed = matrix.study_matrix(config, batch.rows_of(args.rows or config["sheet"], args.ids), sources,
                                        reach_cfg, patches, study.reach)
    print(f"{study.reach_matrix}: {len({r['fix'] for r in table})} fixes x {len(config['workloads'])} workloads x "
          f"{len(reach['releases'])} releases; {study.reach_matrix_text}, {study.reach_matrix_figure}")
    for name, why in sorted(failed.items()):
        print(f"bugimpact reach: no trace of {name}: {why}", file=sys.stderr)
    return 1 if failed else 0


COMMANDS = {"run": _run, "status": _status, "steps": _steps, "validate-config": _validate_config,
            "validate-sheet": _validate_sheet, "preflight": _preflight, "verify": _verify, "gc": _gc,
            "config-docs": _config_docs, "reach": _reach, "reach-trace": _reach, "cpp-called": _reach,
            "retry-failed": _retry_failed, "check-gpu": _check_gpu}

