"""Snakemake shim: one bug arm's build status."""
from bugimpact import steps

steps.run_script(snakemake, steps.build_status, bug=snakemake.wildcards.bug,
                 arm=snakemake.wildcards.arm, artifact_manifest=snakemake.input[0],
                 out=snakemake.output[0])
