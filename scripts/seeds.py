"""Snakemake shim: archive a bug's seeds before its first run."""
from bugimpact import steps

steps.run_script(snakemake, steps.seeds, study_seed=snakemake.params.study_seed,
                 policy=snakemake.params.policy, bug=snakemake.wildcards.bug, out=snakemake.output[0])
