"""Snakemake shim: the early decision after the first k paired runs."""
from bugimpact import steps

steps.run_script(snakemake, steps.early, runs=snakemake.params.runs, bug=snakemake.wildcards.bug,
                 records=list(snakemake.input.records), out=snakemake.output[0],
                 repeats=list(snakemake.input.repeats))
