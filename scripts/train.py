"""Snakemake shim: step 5, one run of one arm of one bug."""
import json

from bugimpact import steps
from bugimpact.train import RunTarget

w = snakemake.wildcards
steps.run_script(snakemake, steps.train_run, train_cfg=snakemake.params.train,
                 target=RunTarget(bug=w.bug, arm=w.arm, arm_spec=json.loads(snakemake.params.arm),
                                  run=int(w.run), key=w.key),
                 files={"seeds": f"results/seeds/{w.bug}/{w.key}.json", "data": snakemake.input.data,
                        "meta": snakemake.input.meta, "runtime": snakemake.input.runtime,
                        "experiment": f"results/experiments/{w.key}.json"},
                 out=snakemake.output[0], log_path=snakemake.log[0],
                 experiment_spec=snakemake.params.experiment)
