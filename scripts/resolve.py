"""Snakemake shim: step 2, resolve PRs to commits."""
from bugimpact import steps

steps.run_script(snakemake, steps.resolve, config=snakemake.config,
                 bugs_csv=snakemake.input.bugs, out_commits=snakemake.output.commits)
