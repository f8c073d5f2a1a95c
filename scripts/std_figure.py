"""Snakemake shim: per-experiment standard deviations (the paper's Fig. 3)."""
from bugimpact import steps

steps.run_script(snakemake, steps.std_figure, bug_jsons=list(snakemake.input), out=snakemake.output[0])
