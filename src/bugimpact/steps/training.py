"""Step 5: data, seeds, one run, and the early decision."""
import logging
from pathlib import Path

from ..challenges import prepare
from ..experiment import derive_seeds, experiment_attributes, read_experiment, write_seeds
from ..io import read_json, write_json
from ..stats.decisions import early_decision
from ..stats.exact import counted_record
from ..train import RunOptions, build_spec, train_one

log = logging.getLogger("bugimpact")


def prepare_data(data_cfg, challenge, out_npz, out_meta):
    """A challenge's raw file (``data_cfg``: the config's ``data``) to a canonical .npz."""
    return prepare(challenge, out_npz, out_meta, data_cfg)


def experiment(spec, out):
    """The experiment of a key, one file (``spec``: ``Plan.experiments[key]``)."""
    write_json(out, spec)


def seeds(study_seed, policy, bug, out):
    write_seeds(out, study_seed, bug, policy)


# What a train job reads of the config's ``train``: how a run is attempted (``RunOptions``) and how
# its seed is derived while the seeds archive is lost. What a run computes is its experiment.
JOB_SETTINGS = ("retries", "threads", "gpus", "runs_per_gpu", "timeout_s", "fork_server",
                "study_seed", "seed_policy")


def job_settings(config):
    """What a train job reads of the config: ``JOB_SETTINGS`` of ``train``, and ``runtime.gpus``
    (which GPUs the lock hands its runs), read when a run starts: never a copy kept elsewhere."""
    return {**{k: config["train"][k] for k in JOB_SETTINGS}, "runtime_gpus": config["runtime"]["gpus"]}


def train_run(train_cfg, target, files, out, log_path, experiment_spec):
    """Step 5: one run (``target``: a ``train.RunTarget``). What it computes is its experiment:
    its file (``files["experiment"]``), else ``experiment_spec``, the value that file is made from,
    each checked against the key in the run's path; ``train_cfg`` (``JOB_SETTINGS`` of it) says
    how runs are attempted (retries, timeout, GPUs, the fork server). ``files``: also the run's
    ``seeds``, ``data``, ``meta`` and ``runtime`` files. A run writes its record alone: an archive
    it reads and finds lost is made again by its own rule (``Plan.bug_targets``)."""
    if Path(files["experiment"]).exists():
        attributes = read_experiment(files["experiment"], target.key)
    else:
        attributes = experiment_attributes(experiment_spec, target.key, "the train rule's experiment")
    seed = run_seeds(files["seeds"], train_cfg, target.bug)[target.run]
    runtime = read_json(files["runtime"])
    override = (runtime.get("override") or {}).get("libraries", {}).get("arm")  # a compiled fix's
    spec = build_spec(attributes, target, seed, files["data"], read_json(files["meta"])["sha256"],
                      **({"override": override["library"]} if override else {}))
    return train_one(spec, out, log_path, runtime, RunOptions.of(train_cfg))


def run_seeds(path, train_cfg, bug):
    """The bug's seeds: its archive, which the arms gate makes before any run is asked for; while
    the archive is lost, the same seeds derived again (a function of the study seed, the policy
    and the bug id, as the archive is)."""
    from ..plan import check_seeds  # jsonschema and yaml: only while a seeds archive is read
    if not Path(path).exists():
        log.warning("%s: the seeds archive %s is lost; its rule makes it again, the run derives "
                    "the same seeds from the study seed", bug, path)
        return derive_seeds(train_cfg["study_seed"], bug, train_cfg["seed_policy"])
    check_seeds(Path(path), bug)
    return read_json(path)["seeds"]


def early(runs, bug, records, out, repeats=()):
    """The early decision, made from the first ``runs`` pairs (and the repeats): it only asks
    for later records (``Plan.needed``), so redoing it never touches a finished one."""
    decision = early_decision([counted_record(p) for p in records], runs,
                              [counted_record(p) for p in repeats] if repeats else None)
    decision["bug"] = bug
    write_json(out, decision)
    log.info("%s: %s (%s)", bug, decision["decision"], decision["reason"])
    return decision
