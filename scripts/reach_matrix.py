"""Snakemake shim: the reach matrix of the config's workloads and releases over the sheet's fixes."""
from pathlib import Path

from bugimpact import steps
from bugimpact.steps import matrix

p = snakemake.params
steps.run_script(snakemake, matrix.reach_matrix, workloads_cfg=p.workloads, reach_cfg=p.reach, train_cfg=p.train,
                 runtime_cfg=p.runtime, sources=p.sources, patches=p.patches, sheet=snakemake.input.sheet,
                 folder=Path(snakemake.output.csv).parent)
