"""Shim: step 5, one run of one arm of one bug, called by the train rule's shell command.

The one rule that runs thousands of times is a command, not a ``script:``: its job costs a Python
start and this package's imports, without Snakemake's script preamble (0.07 s of CPU a job, three
points of a small run's fixed cost). Its arguments are the rule's wildcards, params, input, output
and log, as a script's ``snakemake`` object would hold them."""
import argparse
import json

from bugimpact.steps.script import run_logged_step
from bugimpact.steps.training import train_run
from bugimpact.train import RunTarget

parser = argparse.ArgumentParser(description=__doc__)
for name in ("bug", "key", "arm", "run", "arm-spec", "train", "experiment", "experiment-json", "seeds",
             "data", "meta", "runtime", "out", "log"):
    parser.add_argument(f"--{name}", required=True)
parser.add_argument("--runtime-content", default="")
a = parser.parse_args()
run_logged_step(a.log, train_run, train_cfg=json.loads(a.train),
                target=RunTarget(bug=a.bug, arm=a.arm, arm_spec=json.loads(a.arm_spec), run=int(a.run),
                                 key=a.key),
                files={"seeds": a.seeds, "data": a.data, "meta": a.meta, "runtime": a.runtime,
                       "experiment": a.experiment_json},
                out=a.out, log_path=a.log, experiment_spec=json.loads(a.experiment),
                runtime_content=a.runtime_content)
