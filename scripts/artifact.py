"""Snakemake shim: step 4, an artifact that needs no build (installed, pypi, wheel)."""
from bugimpact import steps

steps.run_script(snakemake, steps.artifact, config=snakemake.config, spec=snakemake.params.spec,
                 out=snakemake.output[0])
