# Reach, before artifacts and runs: can the workload execute what a fix changed? One trace per
# workload and release (a few training steps of the study's own model and data), then one verdict
# per bug from its diff and the operator tables. Bugs found not reached stop at their arms gate
# when reach.skip says so: no artifact, no build, no run.
rule reach_trace:
    input:
        runtime=lambda wc: PLAN.placed(wc.artifact, wc.key).runtime_json,
        data=lambda wc: PLAN.data_files(wc.key)[0],
        meta=lambda wc: PLAN.data_files(wc.key)[1],
    output:
        layout.TRACE,
    log:
        "logs/reach/traces/{key}/{artifact}.log",
    benchmark:
        "benchmarks/reach/traces/{key}/{artifact}.tsv"
    resources:
        gpu=int(GPU_JOBS),  # traced on the study's device: its kernels are what the runs execute
    params:
        train=lambda wc, output: PLAN.experiment_of(wc.key),  # untracked: the experiment is {key}
        steps=config["reach"]["steps"],
        version=TRACE_VERSION,  # a trace made by an older harness is made again
    script:
        "../scripts/reach_trace.py"


checkpoint reach:
    input:
        trace=lambda wc: PLAN.reach_trace(wc.bug) or [],
    output:
        layout.REACH,
    log:
        "logs/reach/{bug}/{key}.log",
    benchmark:
        "benchmarks/reach/{bug}/{key}.tsv"
    params:
        spec=lambda wc: PLAN.bug(wc.bug).reach_identity,
        sources=untracked(artifact_sources(config)),  # where diffs come from, not what they are
        reach=verdict_settings(config["reach"]),
    script:
        "../scripts/reach.py"


# Which fixes can touch which models: every fix of the sheet judged for every workload of the
# config on every release of reach.releases, with no build and no training (docs/reach.md). Made
# where both are named; the report shows it. A person's edits of the sheet judge nothing again:
# the merge (new fixes) does.
rule reach_matrix:
    input:
        merge=STUDY.sheet_merge(FRAMEWORK),
        sheet=ancient(config["sheet"]),
    output:
        csv=STUDY.reach_matrix,
        text=STUDY.reach_matrix_text,
        figure=STUDY.reach_matrix_figure,
    log:
        "logs/reach/matrix.log",
    params:
        workloads=config["workloads"],
        reach=config["reach"],
        patches=config["artifacts"].get("onefix", {}).get("patches", ""),
        # untracked: a trace keeps what it was made of (its workload, release and steps) and is
        # made again when that changes (steps.matrix.traces); where wheels come from is not that
        train=untracked(config["train"]),
        runtime=untracked(config["runtime"]),
        sources=untracked(artifact_sources(config)),
    script:
        "../scripts/reach_matrix.py"
