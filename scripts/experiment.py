"""Snakemake shim: one experiment key's file, which every run of the key reads."""
from bugimpact import steps

steps.run_script(snakemake, steps.experiment, spec=snakemake.params.spec, out=snakemake.output[0])
