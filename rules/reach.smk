# Reach, before artifacts and runs: can the workload execute what a fix changed? One trace per
# workload and release (a few training steps of the study's own model and data), then one verdict
# per bug from its diff and the operator tables. Bugs found not reached stop at their arms gate
# when reach.skip says so: no artifact, no build, no run.
rule reach_trace:
    input:
        runtime=lambda wc: PLAN.artifacts[wc.artifact].runtime_json,
        data=PLAN.data_files()[0],
        meta=PLAN.data_files()[1],
    output:
        layout.TRACE,
    log:
        "logs/reach/traces/{key}/{artifact}.log",
    benchmark:
        "benchmarks/reach/traces/{key}/{artifact}.tsv"
    resources:
        gpu=int(GPU_JOBS),  # traced on the study's device: its kernels are what the runs execute
    params:
        train=untracked(config["train"]),  # the experiment is {key}
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
        reach=config["reach"],
    script:
        "../scripts/reach.py"
