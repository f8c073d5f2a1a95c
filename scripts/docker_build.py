"""Snakemake shim: step 4, build a wheel at a commit in the toolchain image."""
from bugimpact import steps

steps.run_script(snakemake, steps.docker_build, config=snakemake.config, spec=snakemake.params.spec,
                 out=snakemake.output[0], log_path=snakemake.log[0])
