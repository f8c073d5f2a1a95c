rule prepare_data:
    input:
        raw_data,
    output:
        npz=layout.DATA,
        meta=layout.DATA_META,
    log:
        "logs/data/{challenge}.log",
    params:
        data=config["data"],
    script:
        "../scripts/prepare_data.py"


# An experiment key, one file: what every run of the key computes with (a run checks that the file
# hashes to the key in its path, so no record can disagree with where it lies).
rule experiment:
    output:
        layout.EXPERIMENT,
    log:
        "logs/experiments/{key}.log",
    params:
        spec=lambda wc: PLAN.experiments[wc.key],
    script:
        "../scripts/experiment.py"


# Seeds are archived before the first run of a bug and read by every run; they depend only on the
# study seed, the policy and the bug id, so changing the run count never changes them.
rule seeds:
    output:
        layout.SEEDS,
    log:
        "logs/seeds/{bug}/{key}.log",
    params:
        study_seed=config["train"]["study_seed"],
        policy=config["train"]["seed_policy"],
    script:
        "../scripts/seeds.py"
