"""Snakemake shim: step 3, the funnel from the sheet as it is now."""
from bugimpact import steps

steps.run_script(snakemake, steps.funnel, sheet_path=snakemake.input.sheet,
                 out_funnel=snakemake.output.funnel)
