"""Snakemake shim: step 6, one bug's statistics."""
from bugimpact import steps

steps.run_script(snakemake, steps.bug_stats, stats_cfg=snakemake.params.stats,
                 design=snakemake.params.design, bug=snakemake.wildcards.bug,
                 records=list(snakemake.input.records),
                 outputs=(snakemake.output.csv, snakemake.output.json), tags=snakemake.params.tags,
                 arms_json=snakemake.input.arms,
                 decisions=list(snakemake.input.decisions))
