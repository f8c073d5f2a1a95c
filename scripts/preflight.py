"""Snakemake shim: the preflight checks; every build waits for them."""
from bugimpact import steps

steps.run_script(snakemake, steps.preflight, config=snakemake.params.config,
                 out=snakemake.output[0], builds_only=True)
