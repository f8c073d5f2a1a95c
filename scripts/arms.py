"""Snakemake shim: whether a bug's two arms can run (a checkpoint: no runs for a bug that cannot)."""
from bugimpact import steps

steps.run_script(snakemake, steps.arms, bug=snakemake.wildcards.bug,
                 runtime_jsons={"buggy": snakemake.input.buggy,
                                "corrected": snakemake.input.corrected},
                 out=snakemake.output[0])
