"""Snakemake shim: step 5, one run of one arm of one bug."""
import json

from bugimpact import steps

w = snakemake.wildcards
steps.run_script(snakemake, steps.train_run, train_cfg=snakemake.params.train, bug=w.bug, arm=w.arm,
                 arm_spec=json.loads(snakemake.params.arm), run_index=int(w.run), key=w.key,
                 seeds_json=f"results/seeds/{w.bug}/{w.key}.json", data_npz=snakemake.input.data,
                 data_meta=snakemake.input.meta, runtime_json=snakemake.input.runtime,
                 out=snakemake.output[0], log_path=snakemake.log[0])
