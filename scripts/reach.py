"""Snakemake shim: one bug's reach verdict (a checkpoint: its arms gate reads it)."""
from bugimpact import steps
from bugimpact.reach import run

steps.run_script(snakemake, run.judge_bug, bug=snakemake.wildcards.bug, spec=snakemake.params.spec,
                 sources=snakemake.params.sources, reach_cfg=snakemake.params.reach,
                 trace_json=snakemake.input.trace or None, out=snakemake.output[0])
