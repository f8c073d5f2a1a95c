# A bug's runs exist only once both its arms are made: a refused or failed artifact (or runtime)
# stops the bug here, with one reason, and nothing of it is scheduled (a checkpoint: the statistics
# ask it which records they need). A bug that reach found not reached stops here before its
# artifacts are asked for, when reach.skip says so.
checkpoint arms:
    input:
        unpack(arms_inputs),
    output:
        layout.ARMS_GATE,
    log:
        "logs/arms/{bug}/{key}.log",
    params:
        gated=lambda wc: reach_gated(wc.bug) or "",
    script:
        "../scripts/arms.py"


# One job per run. The experiment is in the path ({key}) and in the arm; the rest of `train` says how
# a run is attempted (retries, timeout, GPUs, fork server), so it is untracked: changing it, or the
# run count, retrains nothing. Resources only schedule: gpu=1 asks for a GPU slot (rules/common.smk).
# A shell command, not a script: see scripts/train.py.
rule train:
    input:
        unpack(train_inputs),
    output:
        layout.RUN,
    log:
        "logs/train/{bug}/{key}/{arm}/{run}.log",
    benchmark:
        "benchmarks/train/{bug}/{key}/{arm}/{run}.tsv"
    resources:
        gpu=int(GPU_JOBS),
    params:
        arm=arm_json,
        train=untracked(json.dumps(job_settings(config))),
        # what results/experiments/{key}.json holds (made before the gate): used while it is lost
        experiment=lambda wildcards, output: json.dumps(PLAN.experiments[wildcards.key]),
        # the gate's files a run reads, not inputs: a gate lost or rewritten retrains nothing
        experiment_json=lambda wildcards, output: PLAN.bug(wildcards.bug).experiment,
        seeds_json=lambda wildcards, output: PLAN.bug(wildcards.bug).seeds,
        python=untracked(sys.executable),
        shim=untracked(TRAIN_SHIM),
        # the content of the runtime the plan saw (or its runs ran in): a run never runs in
        # another, made since (the next workflow run gives that one a key of its own)
        runtime_content=lambda wildcards, output: PLAN.runtime_contents[wildcards.bug][wildcards.arm],
    shell:
        "{params.python:q} {params.shim:q} --bug {wildcards.bug:q} --key {wildcards.key:q}"
        " --arm {wildcards.arm} --run {wildcards.run} --arm-spec {params.arm:q}"
        " --train {params.train:q} --experiment {params.experiment:q}"
        " --experiment-json {params.experiment_json:q} --seeds {params.seeds_json:q}"
        " --data {input.data:q} --meta {input.meta:q} --runtime {input.runtime:q}"
        " --runtime-content={params.runtime_content:q} --out {output:q} --log {log:q}"


# A measured repeat for the early decision: the same arm and seed run a second time. On CUDA a
# determinism flag proves nothing (before torch 1.8 nothing reports a non-deterministic kernel).
use rule train as train_repeat with:
    output:
        layout.REPEAT,
    log:
        "logs/train/{bug}/{key}/{arm}/{run}.repeat.log",
    benchmark:
        "benchmarks/train/{bug}/{key}/{arm}/{run}.repeat.tsv"


# Decisions are checkpoints made from the records before them: the statistics (and the targets)
# ask them which later records are needed. They gate nothing that exists, so a decision being
# redone, failed or deleted never retrains a finished run.
checkpoint early_decision:
    input:
        records=lambda wc: PLAN.bug(wc.bug).records(PLAN.early_runs()),
        repeats=lambda wc: PLAN.repeat_records(wc.bug),
    output:
        layout.EARLY,
    log:
        "logs/early/{bug}/{key}.log",
    params:
        runs=PLAN.early_runs(),
    script:
        "../scripts/early.py"


# A group-sequential look after the first {pairs} pairs: impact, futility or continue; asked for
# only when the looks before it continued.
checkpoint stage_decision:
    input:
        records=lambda wc: PLAN.bug(wc.bug).records(int(wc.pairs)),
    output:
        layout.STAGE,
    log:
        "logs/stages/{bug}/{key}/{pairs}.log",
    params:
        stats=config["stats"],
        design=study_design(config["train"], len(PLAN.bugs)),
    script:
        "../scripts/stage.py"
