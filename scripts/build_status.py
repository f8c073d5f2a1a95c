"""Snakemake shim: one bug arm's build status."""
from bugimpact import steps

steps.run_script(snakemake, steps.build_status, bug=snakemake.wildcards.bug,
                 arm=snakemake.wildcards.arm, artifact_manifest=snakemake.input.get("manifest"),
                 out=snakemake.output[0], reach_json=snakemake.input.get("reach"),
                 runtime_json=snakemake.input.get("runtime"))
