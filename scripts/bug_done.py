"""Snakemake shim: one bug's line, once everything it needs is made."""
from bugimpact import steps

steps.run_script(snakemake, steps.bug_done, bug=snakemake.wildcards.bug,
                 stats_json=snakemake.input.stats, out=snakemake.output[0])
