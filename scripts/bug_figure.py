"""Snakemake shim: one bug's metric distributions (the paper's Fig. 2)."""
from bugimpact import steps

steps.run_script(snakemake, steps.bug_figure, bug_json=snakemake.input[0], out=snakemake.output[0])
