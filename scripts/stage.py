"""Snakemake shim: one interim look of the group-sequential design."""
from bugimpact import steps

steps.run_script(snakemake, steps.stage, stats_cfg=snakemake.params.stats,
                 design=snakemake.params.design, bug=snakemake.wildcards.bug, pairs=int(snakemake.wildcards.pairs),
                 records=list(snakemake.input.records), out=snakemake.output[0])
