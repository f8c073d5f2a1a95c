"""Snakemake shim: step 4, an artifact that needs no docker build (a release wheel, the installed
torch, a one-fix arm, a plugin's source)."""
from bugimpact import steps

steps.run_script(snakemake, steps.artifact, sources=snakemake.params.sources, spec=snakemake.params.spec,
                 out=snakemake.output[0], toolchain_json=snakemake.input.toolchain or None)
