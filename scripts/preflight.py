"""Snakemake shim: the preflight checks; every build and artifact waits for them."""
from bugimpact import steps

steps.run_script(snakemake, steps.preflight, config=snakemake.config, out=snakemake.output[0])
