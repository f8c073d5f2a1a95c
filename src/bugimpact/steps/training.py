"""Step 5: data, seeds, one run, and the early decision."""
import logging
from pathlib import Path

from ..io import read_json, write_json

log = logging.getLogger("bugimpact")


def prepare_data(data_cfg, challenge, out_npz, out_meta):
    """A challenge's official files (``data_cfg``: the config's ``data``) to a canonical .npz."""
    from ..challenges import prepare
    return prepare(challenge, out_npz, out_meta, data_cfg["cifar10"], data_cfg["mnist"])


def experiment(spec, out):
    """The experiment of a key, one file (``spec``: ``Plan.experiments[key]``)."""
    write_json(out, spec)


def seeds(study_seed, policy, bug, out):
    from ..experiment import write_seeds
    write_seeds(out, study_seed, bug, policy)


# What a train job reads of the config's ``train``: how a run is attempted (``RunOptions``) and how
# a lost seeds archive is made again. What a run computes comes from its experiment's file.
JOB_SETTINGS = ("retries", "threads", "gpus", "runs_per_gpu", "timeout_s", "fork_server",
                "study_seed", "seed_policy")


def train_run(train_cfg, target, files, out, log_path, experiment_spec=None):
    """Step 5: one run (``target``: a ``train.RunTarget``). What it computes comes from its
    experiment's file (``files["experiment"]``, checked against the key in the run's path; made
    from ``experiment_spec`` when missing); ``train_cfg`` (``JOB_SETTINGS`` of it) says how runs
    are attempted (retries, timeout, GPUs, the fork server). ``files``: also the run's ``seeds``,
    ``data``, ``meta`` and ``runtime`` files."""
    from ..experiment import read_experiment
    from ..train import RunOptions, build_spec, train_one
    if not Path(files["experiment"]).exists() and experiment_spec:
        write_json(files["experiment"], experiment_spec)  # as its rule would have, before the gate
    attributes = read_experiment(files["experiment"], target.key)
    seeds = archived_seeds(files["seeds"], train_cfg, target.bug)["seeds"]
    spec = build_spec(attributes, target, seeds[target.run], files["data"], read_json(files["meta"])["sha256"])
    return train_one(spec, out, log_path, read_json(files["runtime"]), RunOptions.of(train_cfg))


def archived_seeds(path, train_cfg, bug):
    """The bug's archived seeds. The arms gate archives them before any run is asked for; a run
    asked for directly, or after the archive was lost, archives them again: they are a function
    of the study seed, the policy and the bug, so the file comes back identical."""
    from ..experiment import write_seeds
    from ..plan import check_seeds
    if not Path(path).exists():
        write_seeds(path, train_cfg["study_seed"], bug, train_cfg["seed_policy"])
        log.warning("%s: the seeds archive was missing; archived again from the study seed", bug)
    check_seeds(Path(path), bug)
    return read_json(path)


def early(runs, bug, records, out, repeats=()):
    """The early decision, made from the first ``runs`` pairs (and the repeats): it only asks
    for later records (``Plan.needed``), so redoing it never touches a finished one."""
    from ..records import read_record
    from ..stats.analysis import early_decision
    decision = early_decision([read_record(p) for p in records], runs,
                              [read_record(p) for p in repeats] if repeats else None)
    decision["bug"] = bug
    write_json(out, decision)
    log.info("%s: %s (%s)", bug, decision["decision"], decision["reason"])
    return decision
