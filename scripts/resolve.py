"""Snakemake shim: step 2, resolve PRs to commits."""
from bugimpact import steps

steps.run_script(snakemake, steps.resolve, cfg=snakemake.params.resolve,
                 api_url=snakemake.params.api_url, repo=snakemake.params.repo,
                 bugs_csv=snakemake.input.bugs, out_commits=snakemake.output.commits)
