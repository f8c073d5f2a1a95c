"""Step 5: data, seeds, one run, and the early decision."""
import logging

from ..challenges import prepare
from ..experiment import write_seeds
from ..io import write_json
from ..stats.decisions import early_decision
from ..stats.exact import counted_record
from ..train import Run, RunOptions
from .runtime import whole

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


def train_run(train_cfg, target, files, out, log_path, experiment_spec, runtime_content=""):
    """Step 5: one run (``train.Run.of_job``: ``target``, its ``files``, ``out``, ``log_path``
    and ``experiment_spec``), attempted as ``train_cfg`` (``job_settings``) says: retries,
    timeout, GPUs, the fork server. Its runtime is made whole first, and must have the content
    the plan saw (``runtime_content``: ``runtime.whole``), or no run is made."""
    whole(files["runtime"], runtime_content)
    return Run.of_job(target, files, out, log_path, experiment_spec, train_cfg).train(RunOptions.of(train_cfg))


def early(runs, bug, records, out, repeats=()):
    """The early decision, made from the first ``runs`` pairs (and the repeats): it only asks
    for later records (``Plan.needed``), so redoing it never touches a finished one."""
    decision = early_decision([counted_record(p) for p in records], runs,
                              [counted_record(p) for p in repeats] if repeats else None)
    decision["bug"] = bug
    write_json(out, decision)
    log.info("%s: %s (%s)", bug, decision["decision"], decision["reason"])
    return decision
