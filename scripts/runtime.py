"""Snakemake shim: the runtime (local, venv or docker) that trains on an artifact."""
from bugimpact import steps

steps.run_script(snakemake, steps.runtime, kind=snakemake.params.kind,
                 artifact_manifest=snakemake.input.artifact, out=snakemake.output[0],
                 settings={**snakemake.params.settings, "toolchain_json": snakemake.input.toolchain or None,
                           "threads": snakemake.threads})
