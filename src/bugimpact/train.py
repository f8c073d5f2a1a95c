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
from pathlib import Path

from .artifacts.common import RunTimeout
from .artifacts.kinds import content_digest
from .artifacts.launch import RunOptions, launch
from .experiment import derive_seeds, experiment, experiment_attributes, read_experiment, run_seeds
from .harness.registry import sealed
from .io import read_json, write_json
from .overrides.parts import Route


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


@dataclass(frozen=True)
class Run:
    """One train job's run, each of its inputs read once, here: what it computes (the attributes
    of its experiment and its seed), the data and the runtime it computes with, and where its
    record and log go. ``of_job`` reads them from the job's files."""
    target: RunTarget
    attributes: dict
    seed: int
    data: str
    data_sha256: str
    runtime: dict
    record: str
    log: str

    @classmethod
    def of_job(cls, target, files, out, log_path, experiment_spec, train_cfg):
        """The run a train job makes (``target``: its bug, arm, run and key). Its experiment is
        the key's file (``files["experiment"]``), else ``experiment_spec``, the value that file is
        made from, each checked against the key; its seed the bug's archive (``files["seeds"]``),
        else derived again from ``train_cfg`` as the archive was. An archive lost is made again by
        its own rule (``Plan.bug_targets``); a run writes nothing but its record. ``files``: also
        its ``data``, ``meta`` and ``runtime``."""
        if Path(files["experiment"]).exists():
            attributes = read_experiment(files["experiment"], target.key)
        else:
            attributes = experiment_attributes(experiment_spec, target.key, "the train rule's experiment")
        return cls(target, attributes, run_seeds(files["seeds"], train_cfg, target.bug)[target.run],
                   files["data"], read_json(files["meta"])["sha256"], read_json(files["runtime"]),
                   out, log_path)

    @property
    def spec(self):
        """The harness's spec: a compiled fix's arm runs with its override library; the content of
        the runtime it runs in is recorded (``runtime_sha256``: ``kinds.content_digest``)."""
        content = {} if self.runtime.get("status") == "failed" else {"runtime_sha256": content_digest(self.runtime)}
        return build_spec(self.attributes, self.target, self.seed, self.data, self.data_sha256,
                          **override_spec(self.runtime.get("override"), "arm"), **content)

    def train(self, options):
        """Train it (``options``: a ``RunOptions``); "ok" or "failed", its record written."""
        return train_one(self.spec, self.record, self.log, self.runtime, options)


def override_spec(override, build):
    """What a run's spec says of a compiled fix's override library (the runtime's ``override``
    record; ``build``: which of its libraries): its path, and whether it is preloaded (an
    interposed library, ``overrides.parts``)."""
    library = ((override or {}).get("libraries") or {}).get(build)
    if not library:
        return {}
    return {"override": library["library"], **({"preload": True} if Route.read(override.get("route")).interposes else {})}


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
    if failure_class == "exit" and isinstance(attempts[-1], int) and attempts[-1] < 0:
        failure_class = "killed"  # by a signal (stats.failures.failure_text says which, and who)
    write_json(out, sealed({"status": "failed", "spec": spec, "exit_codes": attempts,
                            "failure_class": failure_class, "log_tail": _tail(log_path),
                            "log": str(log_path)}))
    return "failed"
