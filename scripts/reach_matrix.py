"""Snakemake shim: the reach matrix of the config's workloads and releases over the sheet's fixes."""
from pathlib import Path

from bugimpact import steps
from bugimpact.steps import matrix

steps.run_script(snakemake, matrix.reach_matrix, config=snakemake.config, sheet=snakemake.input.sheet,
                 folder=Path(snakemake.output.csv).parent)
