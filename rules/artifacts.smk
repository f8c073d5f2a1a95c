# Before hours of builds: what can be checked in seconds. Builds wait for it (downloads need not:
# a release that cannot be had is recorded by its own job); it is redone when the config changes.
# It reads the reach verdicts that can stop builds, so it never fails for a build that reach cancels.
rule preflight:
    input:
        reach=PLAN.reach_gating_jsons(),
    output:
        STUDY.preflight,
    log:
        "logs/preflight.log",
    params:
        config=config,  # it checks the whole plan
    script:
        "../scripts/preflight.py"


# The toolchain image is made by one job, so parallel builds never race to make it; the steps that
# use it take its record, which also names the interpreter that release wheels must fit.
rule toolchain:
    output:
        layout.TOOLCHAIN,
    log:
        "logs/toolchains/{toolchain}.log",
    benchmark:
        "benchmarks/toolchains/{toolchain}.tsv"
    params:
        docker=untracked(config["artifacts"]["docker"]),  # what matters is hashed into {toolchain}
    script:
        "../scripts/toolchain.py"


rule artifact:
    input:
        toolchain=runtime_image_input,
    output:
        layout.ARTIFACT,
    log:
        "logs/artifacts/{artifact}.log",
    benchmark:
        "benchmarks/artifacts/{artifact}.tsv"
    wildcard_constraints:
        artifact=artifact_pattern(built=False),
    params:
        spec=lambda wc: PLAN.artifacts[wc.artifact].spec,
        sources=untracked(artifact_sources(config)),  # where from, not what: that is {artifact}
    script:
        "../scripts/artifact.py"


# The runtime's path holds its identity (kind, interpreter version and path hash): another
# interpreter gets its own venv and, through the experiment key, its own runs.
rule runtime:
    input:
        artifact=artifact_manifest,
        toolchain=runtime_image_input,
    output:
        layout.RUNTIME,
    log:
        "logs/runtimes/{runtime}/{artifact}.log",
    benchmark:
        "benchmarks/runtimes/{runtime}/{artifact}.tsv"
    # a compiled fix's override library is built by as many compilers at once
    threads: override_threads
    params:
        kind=lambda wc: PLAN.artifacts[wc.artifact].kind,  # per artifact
        # the extra requirements, the model's needs, the kind's settings: an edit remakes it
        requirements=lambda wc: PLAN.runtimes.made_with(wc.artifact, wc.runtime),
        # all it is made with (PLAN.runtimes.settings), untracked: how it is called (python or
        # python3 of one environment), how it is installed (uv or pip: the same files), the
        # caches, where a cached download is fetched again from, are not what it is (its
        # identity is in the path, {runtime}; its content in its record)
        settings=lambda wildcards, output: PLAN.runtimes.settings(wildcards.artifact, wildcards.runtime),
    script:
        "../scripts/runtime.py"


# A compiled fix's override library, checked on the study's own workload before any run: the
# faithful build trains as the release does, bit for bit, the workload's operators are called
# through it, and the rebuilt code runs (src/bugimpact/steps/override.py). An arm without an
# override passes at once. The arms gate refuses an arm whose check failed.
rule override_check:
    input:
        runtime=lambda wc: PLAN.placed(wc.artifact, wc.key).runtime_json,
        data=lambda wc: PLAN.data_files(wc.key)[0],
        meta=lambda wc: PLAN.data_files(wc.key)[1],
    output:
        layout.CHECK,
    log:
        "logs/checks/{key}/{artifact}.log",
    benchmark:
        "benchmarks/checks/{key}/{artifact}.tsv"
    resources:
        gpu=int(GPU_JOBS),
    params:
        train=lambda wc, output: PLAN.experiment_of(wc.key),  # untracked: the experiment is {key}
        steps=config["artifacts"]["onefix"]["check_steps"],
    script:
        "../scripts/override_check.py"


# Builds are keyed by commit and recipe hash: editing this project's code never rebuilds a wheel.
# A failed build is a result (status failed, its class and log tail), so other bugs go on.
rule docker_build:
    input:
        preflight=ancient(STUDY.preflight),  # waited for; being redone never rebuilds a wheel
        toolchain=toolchain_input,
    output:
        layout.ARTIFACT,
    log:
        "logs/artifacts/{artifact}.log",
    benchmark:
        "benchmarks/artifacts/{artifact}.tsv"
    wildcard_constraints:
        artifact=artifact_pattern(built=True),
    params:
        spec=lambda wc: PLAN.artifacts[wc.artifact].spec,
        docker=untracked(config["artifacts"]["docker"]),  # the recipe is hashed into {artifact}
    script:
        "../scripts/docker_build.py"


rule build_status:
    input:
        unpack(build_status_inputs),
    output:
        STUDY.build_status("{bug}", "{arm}"),
    log:
        "logs/builds/{bug}/{arm}.log",
    script:
        "../scripts/build_status.py"


rule build_summary:
    input:
        PLAN.build_statuses(),
    output:
        report(STUDY.builds_summary, caption="../report/builds.rst", category="Tables"),
    log:
        "logs/builds/summary.log",
    script:
        "../scripts/build_summary.py"
