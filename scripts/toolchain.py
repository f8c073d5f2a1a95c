"""Snakemake shim: step 4, the toolchain image that docker builds and runtimes use."""
from bugimpact import steps

steps.run_script(snakemake, steps.toolchain, docker_cfg=snakemake.params.docker,
                 out=snakemake.output[0], log_path=snakemake.log[0])
