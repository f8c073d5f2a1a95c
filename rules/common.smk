# Parse-time helpers: validated config, the plan (bugs, artifacts, experiment key), input functions.
import json
import os
import re
import sys
from pathlib import Path

# The package is importable here and in every script job, installed or not.
SRC = str(Path(workflow.basedir) / "src")
sys.path.insert(0, SRC)
os.environ.update(PYTHONPATH=os.pathsep.join(filter(None, [SRC, dict(os.environ).get("PYTHONPATH")])))

from bugimpact import layout
from bugimpact.config import SHEET_SCHEMA, check_paths, emptied_in_vain, validate_config
from bugimpact.harness import TRACE_VERSION
from bugimpact.harness.registry import ARMS
from bugimpact.plan import Plan
from bugimpact.reach.run import verdict_settings
from bugimpact.artifacts.kinds import kind as runtime_kind
from bugimpact.artifacts.kinds import runtime_pattern
from bugimpact.artifacts.runtimes import gpu_slots
from bugimpact.artifacts.source_kinds import artifact_pattern
from bugimpact.artifacts.source_kinds import source as artifact_source
from bugimpact.challenges import challenges, raw_file
from bugimpact.steps import artifact_sources, study_design, study_setup
from bugimpact.steps.training import job_settings
from bugimpact.io import InputError
from bugimpact.recovery import of_plan
from bugimpact.status import command

# the files the config was read from, which its errors name (--config values may change it)
CONFIG_SOURCE = ", ".join(map(str, workflow.overwrite_configfiles)) or "config.yaml"
config.update(validate_config(dict(config), source=CONFIG_SOURCE))
if EMPTIED := [f"{key}={{}}" for key in emptied_in_vain(dict(workflow.config_settings.config), config)]:
    raise InputError(
        "--config",
        f"{', '.join(EMPTIED)} empties nothing: Snakemake merges a mapping given with --config into "
        f"the config's key by key, so what {CONFIG_SOURCE} gives it is kept. Empty it in a copy of "
        "the config file and give that with --configfile",
    )
check_paths(config, source=CONFIG_SOURCE)
PLAN = Plan(config, SHEET_SCHEMA, CONFIG_SOURCE)
STUDY = PLAN.study  # this study's own outputs: results/<study>/
GPU_JOBS = config["train"]["device"] == "cuda"  # the train and reach_trace jobs each need a GPU
TRAIN_SHIM = str(Path(workflow.basedir) / "scripts" / "train.py")
if PLAN.sheet_missing:
    print(f"bugimpact: {PLAN.sheet_missing}", file=sys.stderr)
for bug, why in sorted(PLAN.cannot_run.items()):
    print(f"bugimpact: {bug} is accepted in {config['sheet']} but not run: {why}", file=sys.stderr)
# A runtime that finished runs ran in, gone: Snakemake would make it again and (a missing input
# being a changed one) train them again. Refused before anything runs; the CLI makes it first.
for runtime_json, bugs in PLAN.lost_runtimes().items():
    raise InputError(
        runtime_json,
        f"gone, and finished runs of {', '.join(bugs)} ran in it: made again by this run, it would "
        f"train them again. `{command(PLAN, 'run', '--bug', bugs[0])}` (or "
        f"`{command(PLAN, 'retry-failed')}`) makes it again in place first, and keeps them",
    )
# What a run keeps that is not whole is said at its start too: with nothing else to do, Snakemake
# says only "Nothing to be done" (its end hooks do not run)
if workflow.is_main_process and (KEPT := [f for f in of_plan(PLAN) if f.state != "refused"]):
    print(
        f"bugimpact: {len(KEPT)} record(s) broken, failed or stale are kept (`{command(PLAN, 'status')}` "
        f"names them): `{command(PLAN, 'retry-failed')}` makes them again",
        file=sys.stderr,
    )
# How many cuda jobs run at once here: one per GPU slot (train.runs_per_gpu on each GPU the runs
# may use), unless --resources gpu=N says so. Snakemake has no option for a resource known only on
# the machine; a cluster's executor gives each job a GPU of its own instead.
if GPU_JOBS and workflow.local_exec and "gpu" not in workflow.global_resources:
    workflow.register_resource("gpu", gpu_slots(config["train"]))
FRAMEWORK = config["framework"]
BUGS = sorted(PLAN.bugs) or ["__none__"]
KEYS = PLAN.experiment_keys() or ["__none__"]


wildcard_constraints:
    bug="|".join(map(re.escape, BUGS)),
    arm="|".join(ARMS),
    run=r"\d+",
    pairs=r"\d+",
    key="|".join(map(re.escape, KEYS)),
    challenge="|".join(map(re.escape, challenges())),
    runtime=runtime_pattern(),


def untracked(value):
    """A param that Snakemake does not compare with the last run's (it skips params that are
    functions of the output): for settings that say how a step runs, never what it computes (the
    experiment is in the path: {key}, {artifact}), so that changing them reruns nothing."""
    return lambda wildcards, output: value


def toolchain_input(wildcards):
    """The toolchain image's record, for the steps that use the image; only its existence counts
    (its identity, the recipe hash, is in its path)."""
    path = PLAN.toolchain_json()
    return ancient(path) if path else []


def runtime_image_input(wildcards):
    """The toolchain image, for the steps that need it only in a docker runtime (a venv study
    with docker-built arms asks for the image only when a build starts)."""
    return toolchain_input(wildcards) if PLAN.kind.needs_toolchain else []


def train_inputs(wildcards):
    """What a run is made from, and nothing that decides whether it is needed: a finished record
    is never the product of a gate (seeds, arms, decisions), so a gate being missing, failed or
    rewritten retrains nothing. The seeds are archived by their own rule, which the arms gate
    waits for (so before any run is asked for), and read by the run itself; the decisions ask
    for records (``needed``). (A runtime whose record is gone would be made again, and retrain
    what ran in it: the workflow refuses to start then, ``PLAN.lost_runtimes``.)"""
    return {
        "data": PLAN.data_files(wildcards.key)[0],
        "meta": PLAN.data_files(wildcards.key)[1],
        # the runtime's content decides, not its time stamp: a runtime made again with the same
        # content retrains nothing, one with other content moves the bug to a new key (Plan)
        "runtime": ancient(PLAN.artifact_of(wildcards.bug, wildcards.arm).runtime_json),
    }


def made_decision(bug):
    """``Plan.needed``'s reader in the workflow: each decision from its checkpoint."""
    from bugimpact.io import read_json

    key = PLAN.bug(bug).key

    def read(kind, pairs, path):
        if kind == "early":
            checkpoints.early_decision.get(bug=bug, key=key)
        else:
            checkpoints.stage_decision.get(bug=bug, key=key, pairs=pairs)
        return read_json(path)

    return read


def bug_stats_inputs(wildcards):
    """The bug's records, once its arms gate says they can be made (none when it cannot), as far
    as its decisions ask for them, and those decisions."""
    bug = wildcards.bug
    gate = checkpoints.arms.get(bug=bug, key=PLAN.bug(bug).key).output[0]
    with open(gate) as handle:
        runnable = json.load(handle)["runnable"]
    if not runnable:
        return {"arms": gate, "records": [], "decisions": []}
    records, decisions = PLAN.needed(bug, made_decision(bug))
    return {"arms": gate, "records": records, "decisions": decisions}


def reach_gated(bug):
    """The reach verdict that stops this bug before its artifacts ("" when none does); asks the
    reach checkpoint, so it is known only once the bug's verdict is written."""
    from bugimpact.io import read_json

    def read(path):
        checkpoints.reach.get(bug=bug, key=PLAN.bug(bug).key)
        return read_json(path)

    return PLAN.reach_stop(bug, read)


def arms_inputs(wildcards):
    bug = wildcards.bug
    inputs = {"reach": PLAN.reach_json(bug)} if PLAN.reach_json(bug) else {}
    if not reach_gated(bug):
        inputs["seeds"] = PLAN.bug(bug).seeds  # archived before any run is asked for
        # the file every run of the key reads
        inputs["experiment"] = PLAN.bug(bug).experiment
        inputs.update({arm: PLAN.artifact_of(bug, arm).runtime_json for arm in ARMS})
        inputs.update({f"check_{arm}": path for arm, path in PLAN.override_checks(bug).items()})
    return inputs


def build_status_inputs(wildcards):
    """The arm's manifest, and the runtime of an arm that may carry a compiled fix's override
    library (whose build the Builds table shows with the artifact's)."""
    if reach_gated(wildcards.bug):
        return {"reach": PLAN.reach_json(wildcards.bug)}
    artifact = PLAN.artifact_of(wildcards.bug, wildcards.arm)
    runtime = {"runtime": artifact.runtime_json} if artifact_source(artifact.spec["source"]).overrides else {}
    return {"manifest": artifact.manifest, **runtime}


def arm_json(wildcards):
    return json.dumps(PLAN.bug(wildcards.bug).arm(wildcards.arm), sort_keys=True)


def raw_data(wildcards):
    """The raw file a challenge is prepared from, which it names (digits ships with scikit-learn)."""
    raw = raw_file(wildcards.challenge, config["data"])
    return [raw] if raw else []


def override_threads(wildcards, input):
    """The runtime job's threads: an artifact whose manifest carries a compiled fix's kernels
    builds an override library, with up to four compilers at once (``--cores`` bounds them); any
    other runtime, one. Snakemake asks again when the job is ready, the manifest made: until then
    an artifact that may carry kernels is counted as one that does."""
    if not artifact_source(PLAN.artifacts[wildcards.artifact].spec["source"]).overrides:
        return 1
    try:
        if not json.loads(Path(input.artifact).read_text()).get("kernels"):
            return 1
    except (OSError, ValueError):  # not made yet, or unreadable: the job itself says which
        pass
    return min(4, workflow.cores)


def artifact_manifest(wildcards):
    return PLAN.artifacts[wildcards.artifact].manifest


def end_if_targets_unmade():
    """A run Snakemake ended as done, checked against what it was asked for
    (``steps.unmade_targets``): targets not made end it with ``LOST_JOBS``, saying so."""
    from bugimpact.steps import unmade_targets
    from bugimpact.workflow import LOST_JOBS

    rule_names = {rule.name for rule in workflow.rules}
    unmade = unmade_targets(workflow.dag_settings, workflow.touch, rule_names, PLAN.targets())
    if unmade:
        print(
            f"bugimpact: Snakemake ended this run as done, but {len(unmade)} of its targets are not "
            f"made ({', '.join(unmade[:3])}{', ...' if len(unmade) > 3 else ''}): it dropped jobs when "
            "it updated its DAG after a checkpoint (a Snakemake defect). What was made is kept, and "
            "the same command again makes the rest (bugimpact run and make study do so themselves)",
            file=sys.stderr,
        )
        sys.exit(LOST_JOBS)


def where_the_study_stands():
    """What failed, then each bug's line and the report's path: the end of every run."""
    from bugimpact.status import summary
    from bugimpact.steps import failures_at_end

    for line in failures_at_end(STUDY.stats_summary, STUDY.builds_summary):
        print(line, file=sys.stderr)
    if PLAN.bugs:
        print(summary(PLAN), file=sys.stderr)
