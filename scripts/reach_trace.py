"""Snakemake shim: a reach trace of the study's workload on one release."""
from bugimpact import steps

w = snakemake.wildcards
steps.run_script(snakemake, steps.trace, train_cfg=snakemake.params.train,
                 steps=snakemake.params.steps, runtime_json=snakemake.input.runtime,
                 data=(snakemake.input.data, snakemake.input.meta), key=w.key,
                 artifact=w.artifact, out=snakemake.output[0], log_path=snakemake.log[0])
