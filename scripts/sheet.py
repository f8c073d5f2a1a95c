"""Snakemake shim: step 3, merge mining into the filter sheet."""
from bugimpact import steps

steps.run_script(snakemake, steps.sheet, sheet_path=snakemake.params.sheet,
                 bugs_csv=snakemake.input.bugs, commits_csv=snakemake.input.commits,
                 out_merge=snakemake.output.merge, out_funnel=snakemake.output.funnel)
