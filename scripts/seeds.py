"""Snakemake shim: archive a bug's seeds before its first run."""
from bugimpact import steps

steps.run_script(snakemake, steps.seeds, config=snakemake.config, bug=snakemake.wildcards.bug,
                 out=snakemake.output[0])
