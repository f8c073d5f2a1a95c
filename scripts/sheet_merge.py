"""Snakemake shim: step 3, merge mining into the filter sheet (a side effect) and report it."""
from bugimpact import steps

steps.run_script(snakemake, steps.merge_sheet, sheet_path=snakemake.params.sheet,
                 bugs_csv=snakemake.input.bugs, commits_csv=snakemake.input.commits,
                 out_merge=snakemake.output.merge)
