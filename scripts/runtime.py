"""Snakemake shim: the runtime (local, venv or docker) that trains on an artifact."""
from bugimpact import steps

steps.run_script(snakemake, steps.runtime, kind=snakemake.params.kind,
                 artifact_manifest=snakemake.input.artifact, out=snakemake.output[0],
                 settings={"interpreter": snakemake.params.interpreter,
                           **steps.made_with(snakemake.params.requirements),
                           "toolchain_json": snakemake.input.toolchain or None,
                           "installer": snakemake.params.installer, "cache": snakemake.params.cache,
                           "object_cache": snakemake.params.object_cache,
                           "sources": snakemake.params.sources, "model": snakemake.params.model,
                           "threads": snakemake.threads})
