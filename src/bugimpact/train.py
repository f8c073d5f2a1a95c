"""Step 5, host side: one train job = one run of one arm of one bug, launched in its runtime.

Outcomes, each leaving exactly one record (written atomically):
- ``ok``: the harness finished and wrote the record itself;
- ``failed``: the harness exited with an error ``retries + 1`` times; the record keeps the exit
  code and the log tail so the report can say which runs failed and why.
A job killed from outside (SIGKILL, power loss) leaves no record and runs again next time. Runs
that the early decision or a group-sequential stop makes unneeded are never asked for
(``Plan.needed``); results of earlier versions may still hold ``skipped`` records of them.
"""
import os
from dataclasses import dataclass

from .artifacts.common import RunTimeout
from .artifacts.launch import RunOptions, launch
from .experiment import derive_seeds, experiment
from .harness.registry import sealed
from .io import write_json


@dataclass(frozen=True)
class RunTarget:
    """Which run a harness job makes: for a train job, from its path (bug, arm, run, experiment
    key) and the plan (the arm's spec: its artifact and fault); a reach trace and the GPU check
    name their own."""
    bug: str
    arm: str
    arm_spec: dict
    run: int
    key: str = ""


def build_spec(attributes, target, seed, data_npz, data_sha256, **extra):
    """The harness's spec, the one place its fields are named: an experiment's attributes, which
    run it is (``target``), its seed and its data; ``extra``: what a reach trace adds."""
    spec = dict(attributes)
    spec.update({"bug": target.bug, "arm": target.arm, "run": target.run, "seed": seed,
                 "fault": target.arm_spec.get("fault", ""), "artifact": target.arm_spec["artifact"],
                 "experiment_key": target.key, "data": os.path.abspath(data_npz),
                 "data_sha256": data_sha256, **extra})
    return spec


def short_spec(train_cfg, target, data_npz, data_sha256, **extra):
    """The spec of a short run that is no run of a bug (``target``: a reach trace's, an override
    check's): the study's experiment, a seed of its own (derived for the target's bug name, as a
    bug's are), the data; ``extra``: what it adds (its steps)."""
    seed = derive_seeds(train_cfg["study_seed"], target.bug, "paired", 1)[0]
    return build_spec(experiment(train_cfg), target, seed, data_npz, data_sha256, **extra)


def _tail(path, limit=4000):
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - limit))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def train_one(spec, out, log_path, runtime, options=None):
    options = options or RunOptions()
    if runtime.get("status") == "failed":
        write_json(out, sealed({"status": "failed", "spec": spec, "exit_codes": None,
                                "log_tail": runtime.get("reason", "runtime unavailable")}))
        return "failed"
    attempts, failure_class = [], "exit"
    for attempt in range(options.retries + 1):
        with open(log_path, "a") as log:
            log.write(f"attempt {attempt + 1}: {runtime['kind']} runtime, seed {spec['seed']}\n")
            log.flush()
            try:
                code = launch(runtime, spec, out, log, options)
            except RunTimeout as exc:
                log.write(f"\n{exc}: the run and its processes were killed\n")
                code, failure_class = "timeout", "timeout"
        attempts.append(code)
        if code == 0 and os.path.exists(out):
            return "ok"
        if code == 5:  # harness.run.DIVERGED: the same seed diverges again, no retry
            failure_class = "diverged"
            break
    write_json(out, sealed({"status": "failed", "spec": spec, "exit_codes": attempts,
                            "failure_class": failure_class, "log_tail": _tail(log_path)}))
    return "failed"
