rule artifact:
    output:
        "results/artifacts/{artifact}/manifest.json",
    wildcard_constraints:
        artifact=r"installed|pypi-[^/]+|wheel-[0-9a-f]+",
    params:
        spec=lambda wc: PLAN.artifact_spec(wc.artifact),
    log:
        "logs/artifacts/{artifact}.log",
    benchmark:
        "benchmarks/artifacts/{artifact}.tsv"
    conda:
        "../envs/host.yaml"
    script:
        "../scripts/artifact.py"


rule runtime:
    input:
        artifact_manifest,
    output:
        "results/runtimes/{runtime}/{artifact}/runtime.json",
    log:
        "logs/runtimes/{runtime}/{artifact}.log",
    conda:
        "../envs/host.yaml"
    script:
        "../scripts/runtime.py"
