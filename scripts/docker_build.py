"""Snakemake shim: step 4, build a wheel at a commit in the toolchain image."""
from bugimpact import steps

steps.run_script(snakemake, steps.docker_build, docker_cfg=snakemake.params.docker,
                 spec=snakemake.params.spec, toolchain_json=snakemake.input.toolchain,
                 out=snakemake.output[0], log_path=snakemake.log[0])
