"""Snakemake shim: every bug arm's build status in one table."""
from bugimpact import steps

steps.run_script(snakemake, steps.build_summary, statuses=list(snakemake.input),
                 out=snakemake.output[0])
