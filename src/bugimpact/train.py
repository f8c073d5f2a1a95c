"""Step 5, host side: one train job = one run of one arm of one bug, launched in its runtime.

Outcomes, each leaving exactly one record (written atomically):
- ``ok``: the harness finished and wrote the record itself;
- ``skipped``: the early decision found the bug not triggered, or the group-sequential design
  stopped the bug (impact or futility), so this run was not needed;
- ``failed``: the harness exited with an error ``retries + 1`` times; the record keeps the exit
  code and the log tail so the report can say which runs failed and why.
A job killed from outside (SIGKILL, power loss) leaves no record and runs again next time.
"""
import os

from .experiment import experiment
from .io import read_json, write_json


def build_spec(train_cfg, bug, arm, arm_spec, run_index, seeds, data_npz, data_meta, key,
               artifact_id):
    spec = experiment(train_cfg)
    spec.update({"bug": bug, "arm": arm, "run": run_index, "seed": seeds["seeds"][run_index],
                 "fault": arm_spec.get("fault", ""), "artifact": artifact_id,
                 "experiment_key": key, "data": os.path.abspath(data_npz),
                 "data_sha256": data_meta["sha256"]})
    return spec


def _tail(path, limit=4000):
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - limit))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def train_one(spec, out, log_path, runtime, retries=0, threads=1, gpus=0, early=None, timeout=None,
              fork_server=False, stage=None):
    from .artifacts.runtimes import RunTimeout, launch
    reason = skip_reason(spec["run"], early, stage)
    if reason is not None:
        write_json(out, {"status": "skipped", "spec": spec, "reason": reason})
        return "skipped"
    if runtime.get("status") == "failed":
        write_json(out, {"status": "failed", "spec": spec, "exit_codes": None,
                         "log_tail": runtime.get("reason", "runtime unavailable")})
        return "failed"
    attempts, failure_class = [], "exit"
    for attempt in range(retries + 1):
        with open(log_path, "a") as log:
            log.write(f"attempt {attempt + 1}: {runtime['kind']} runtime, seed {spec['seed']}\n")
            log.flush()
            try:
                code = launch(runtime, spec, out, log, threads=threads, gpus=gpus, timeout=timeout,
                              fork_server=fork_server)
            except RunTimeout as exc:
                log.write(f"\n{exc}: the run and its processes were killed\n")
                code, failure_class = "timeout", "timeout"
        attempts.append(code)
        if code == 0 and os.path.exists(out):
            return "ok"
        if code == 5:  # harness.run.DIVERGED: the same seed diverges again, no retry
            failure_class = "diverged"
            break
    write_json(out, {"status": "failed", "spec": spec, "exit_codes": attempts,
                     "failure_class": failure_class, "log_tail": _tail(log_path)})
    return "failed"


def skip_reason(run, early=None, stage=None):
    """Why a run is not needed, or None: a decision file that stopped its bug before this run (the
    early decision: not triggered; a group-sequential look: impact or futility)."""
    if early and early.get("decision") == "not_triggered" and run >= early.get("runs", 0):
        return early.get("reason", "")
    if stage and stage.get("decision") in ("impact", "futility") and run >= stage.get("runs", 0):
        return (f"the group-sequential design stopped after {stage['runs']} pairs "
                f"({stage['decision']}): {stage.get('reason', '')}")
    return None


def load_decision(path):
    """A decision file (early decision, sequential look), or None where there is none."""
    return read_json(path) if path else None
