# Before hours of builds: what can be checked in seconds. Builds wait for it (downloads need not:
# a release that cannot be had is recorded by its own job); it is redone when the config changes.
rule preflight:
    output:
        "results/preflight.txt",
    params:
        config_sha=CONFIG_SHA,
    log:
        "logs/preflight.log",
    conda:
        "../envs/host.yaml"
    script:
        "../scripts/preflight.py"


rule artifact:
    output:
        "results/artifacts/{artifact}/manifest.json",
    wildcard_constraints:
        artifact=r"installed|pypi-[^/]+|wheel-[0-9a-f]+|onefix-[^/]+",
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


# The runtime's path holds its identity (kind, interpreter version and path hash): another
# interpreter gets its own venv and, through the experiment key, its own runs.
rule runtime:
    input:
        artifact_manifest,
    output:
        "results/runtimes/{runtime}/{artifact}/runtime.json",
    params:
        kind=config["runtime"]["kind"],
        interpreter=PLAN.interpreter,
    log:
        "logs/runtimes/{runtime}/{artifact}.log",
    benchmark:
        "benchmarks/runtimes/{runtime}/{artifact}.tsv"
    conda:
        "../envs/host.yaml"
    script:
        "../scripts/runtime.py"


# Builds are keyed by commit and recipe hash: editing this project's code never rebuilds a wheel.
# A failed build is a result (status failed, its class and log tail), so other bugs go on.
rule docker_build:
    input:
        ancient("results/preflight.txt"),  # waited for; being redone never rebuilds a wheel
    output:
        "results/artifacts/{artifact}/manifest.json",
    wildcard_constraints:
        artifact=r"docker-[0-9a-f]+-[0-9a-f]+",
    params:
        spec=lambda wc: PLAN.artifact_spec(wc.artifact),
    log:
        "logs/artifacts/{artifact}.log",
    benchmark:
        "benchmarks/artifacts/{artifact}.tsv"
    conda:
        "../envs/host.yaml"
    script:
        "../scripts/docker_build.py"


rule build_status:
    input:
        lambda wc: f"results/artifacts/{PLAN.arm(wc.bug, wc.arm)['artifact']}/manifest.json",
    output:
        "results/builds/{bug}/{arm}.status",
    log:
        "logs/builds/{bug}/{arm}.log",
    conda:
        "../envs/host.yaml"
    script:
        "../scripts/build_status.py"


rule build_summary:
    input:
        PLAN.build_statuses(),
    output:
        report("results/builds/summary.csv", caption="../report/builds.rst", category="Tables"),
    log:
        "logs/builds/summary.log",
    conda:
        "../envs/host.yaml"
    script:
        "../scripts/build_summary.py"
