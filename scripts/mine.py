"""Snakemake shim: step 1, mine release notes."""
from bugimpact import steps

steps.run_script(snakemake, steps.mine, cfg=snakemake.params.mine, repo=snakemake.params.repo,
                 out_bugs=snakemake.output.bugs, out_counts=snakemake.output.counts)
