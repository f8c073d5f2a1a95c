"""Snakemake shim: step 5, one run of one arm of one bug."""
import json

from bugimpact import steps

w = snakemake.wildcards
arm = json.loads(snakemake.params.arm)
steps.run_script(snakemake, steps.train_run, train_cfg=snakemake.config["train"], bug=w.bug,
                 arm=w.arm, arm_spec=arm, run_index=int(w.run), key=w.key,
                 artifact_id=arm["artifact"], seeds_json=snakemake.input.seeds,
                 data_npz=snakemake.input.data, data_meta=snakemake.input.meta,
                 runtime_json=snakemake.input.runtime, out=snakemake.output[0],
                 log_path=snakemake.log[0], early_json=snakemake.input.get("early"),
                 stage_json=snakemake.input.get("stage"),
                 retries=snakemake.resources.harness_retries,
                 gpus=snakemake.resources.gpu_devices)
