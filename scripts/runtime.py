"""Snakemake shim: the runtime (local, venv or docker) that trains on an artifact."""
from bugimpact import steps

steps.run_script(snakemake, steps.runtime, config=snakemake.config, kind=snakemake.params.kind,
                 interpreter=snakemake.params.interpreter, artifact_manifest=snakemake.input[0],
                 out=snakemake.output[0])
