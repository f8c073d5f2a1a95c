# One job per run. Only attributes that are part of the experiment key are params, so a change of
# retries or GPU count (resources) never retrains anything; the key in the path does the rest.
rule train:
    input:
        unpack(train_inputs),
    output:
        "results/runs/{bug}/{key}/{arm}/{run}.json",
    params:
        arm=arm_json,
    resources:
        gpu=1 if config["train"]["device"] == "cuda" else 0,
        gpu_devices=config["train"]["gpus"],
        harness_retries=config["train"]["retries"],
    log:
        "logs/train/{bug}/{key}/{arm}/{run}.log",
    benchmark:
        "benchmarks/train/{bug}/{key}/{arm}/{run}.tsv"
    conda:
        "../envs/host.yaml"
    script:
        "../scripts/train.py"


rule early_decision:
    input:
        lambda wc: PLAN.records(wc.bug, PLAN.early_runs()),
    output:
        "results/early/{bug}/{key}.json",
    log:
        "logs/early/{bug}/{key}.log",
    conda:
        "../envs/host.yaml"
    script:
        "../scripts/early.py"
