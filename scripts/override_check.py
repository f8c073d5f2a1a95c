"""Snakemake shim: a compiled fix's override library, checked on the study's workload."""
from bugimpact import steps

w = snakemake.wildcards
steps.run_script(snakemake, steps.override_check, train_cfg=snakemake.params.train,
                 steps=snakemake.params.steps, runtime_json=snakemake.input.runtime,
                 data=(snakemake.input.data, snakemake.input.meta), key=w.key,
                 artifact=w.artifact, out=snakemake.output[0], log_path=snakemake.log[0])
