"""Experiments (the paper's Table I attributes), their keys, the bug list, and the archived seeds.

A run record lives at ``results/runs/<bug>/<experiment-key>/<arm>/<run>.json``. The key hashes
every attribute that can change what a run computes (model, challenge, epochs, seed policy and
study seed, hyper-parameters, threads, device, harness version), so changing one yields new runs
that never mix with old ones, and editing unrelated code retrains nothing.
"""
import hashlib
import json
import logging
import re
from pathlib import Path

from .artifacts.source_kinds import OneFix, source
from .challenges import named_challenge
from .harness import HARNESS_VERSION
from .harness.registry import ARMS
from .io import InputError, read_json, write_json
from .models import model_of

KEY_FIELDS = ("model", "model_options", "challenge", "epochs", "batch_size", "test_batch_size",
              "optimizer", "lr", "momentum", "lr_schedule", "pooling", "seed_policy", "study_seed",
              "threads", "device", "allow_tf32", "augment", "test_fraction")
MAX_RUNS = 1000
log = logging.getLogger("bugimpact")


def experiment(train):
    """The attributes of the experiment ``train`` (the config's) describes: ``KEY_FIELDS``, the
    harness version, and the model's code where the harness's version does not cover it
    (``models.Model.code``: a dotted model's package, hashed where the host has it)."""
    attrs = {k: train.get(k) for k in KEY_FIELDS}
    if named_challenge(attrs["challenge"]).official_split:
        attrs["test_fraction"] = None  # the fraction plays no part
    if attrs["model"] != "vggx":
        attrs["pooling"] = None  # only VGG-X has the pool it chooses
    if not attrs["model_options"]:
        del attrs["model_options"]  # none given: the keys of before, and the runs under them
    attrs["harness_version"] = HARNESS_VERSION
    code = model_of(train).code()
    if code is not None:
        attrs["model_code"] = code
    return attrs


def experiment_key(train, runtime_id=None, arms=None):
    """The key of an experiment; ``runtime_id`` names the runtime's interpreter, which can change
    every result, so another interpreter makes new runs beside the old ones; ``arms`` (a bug's:
    ``arms_identity``) what each arm trains on, so another release or diff does too, and going
    back finds the runs made before."""
    return attributes_key(experiment(train), runtime_id, arms)


def arms_identity(spec):
    """What each arm of a bug (``spec``: its plan spec) trains on: its artifact (release, fix diff,
    source) and its fault; its runs are keyed by it."""
    return {arm: {"artifact": value["artifact"], "fault": value.get("fault", "")}
            for arm, value in sorted(spec["arms"].items())}


def attributes_key(attrs, runtime_id=None, arms=None):
    """The key of an experiment's attributes (``experiment``), as they are."""
    attrs = dict(attrs)
    if runtime_id is not None:
        attrs["runtime"] = runtime_id
    if arms is not None:
        attrs["arms"] = arms
    digest = hashlib.sha256(json.dumps(attrs, sort_keys=True).encode()).hexdigest()[:10]
    model = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(attrs["model"]))  # a dotted path may hold ':'
    return f"{model}-{attrs['challenge']}-e{attrs['epochs']}-{attrs['seed_policy']}-{digest}"


def experiment_file(train, runtime_id, arms=None):
    """An experiment as one value: its key, the attributes a run computes with, its runtime and,
    for a bug's, its arms (written once to ``results/experiments/<key>.json``, which every run of
    the key reads)."""
    found = {"key": experiment_key(train, runtime_id, arms), "attributes": experiment(train),
             "runtime": runtime_id}
    return found if arms is None else dict(found, arms=arms)


def read_experiment(path, key):
    """The attributes of experiment ``key`` from its file; a file that is not that experiment
    (edited, or from another version) stops the run: a record never disagrees with its path."""
    return experiment_attributes(read_json(path), key, path)


def experiment_attributes(found, key, where):
    """The attributes of ``found`` (an ``experiment_file`` value), which must be experiment
    ``key``; ``where``: the file or setting it came from, named when it is not."""
    attrs = found.get("attributes") if isinstance(found, dict) else None
    if not isinstance(attrs, dict) or found.get("key") != key or attributes_key(
            attrs, found.get("runtime"), found.get("arms")) != key:
        raise InputError(where, f"not the experiment {key}: its attributes hash to another key; "
                         "delete it and run again (it is made from the config)")
    return attrs


def derive_seeds(study_seed, bug, policy, count=MAX_RUNS):
    """Seeds from the study seed and the bug id: reproducible, and the same whatever the run count.

    ``paired``: run i uses seed_i in both arms. ``fixed`` (the paper): every run uses seed_0.
    """
    return [run_seed(study_seed, bug, policy, i) for i in range(count)]


def run_seed(study_seed, bug, policy, run):
    """The seed of run ``run`` of ``bug`` (``derive_seeds``)."""
    index = 0 if policy == "fixed" else run
    digest = hashlib.sha256(f"{study_seed}:{bug}:{index}".encode()).hexdigest()
    return int(digest[:8], 16) % (2 ** 31 - 1)


def write_seeds(path, study_seed, bug, policy):
    write_json(path, {"bug": bug, "study_seed": study_seed, "policy": policy,
                      "seeds": derive_seeds(study_seed, bug, policy)})


def check_seeds(path, bug, study_seed, policy):
    """An archived seeds file must read back as this bug's seeds as the study derives them from its
    study seed and policy: one corrupt, or edited so that it keeps its shape (every seed one more),
    stops the workflow before anything runs (nothing is deleted)."""
    if not Path(path).exists():
        return
    seeds = read_json(path)
    if not (isinstance(seeds, dict) and seeds.get("bug") == bug and isinstance(seeds.get("seeds"), list)
            and seeds["seeds"] and all(isinstance(s, int) for s in seeds["seeds"])):
        raise InputError(path, f"not the archived seeds of bug {bug} (expected bug, seeds: a list of "
                         "integers); restore the file: the finished runs were made with it")
    derived = derive_seeds(study_seed, bug, policy, len(seeds["seeds"]))
    differ = next((i for i, (have, want) in enumerate(zip(seeds["seeds"], derived)) if have != want), None)
    if differ is not None or (seeds.get("study_seed"), seeds.get("policy")) != (study_seed, policy):
        at = (f"run {differ}'s seed is {seeds['seeds'][differ]}, the derivation's {derived[differ]}"
              if differ is not None else f"it says study seed {seeds.get('study_seed')!r}, policy "
              f"{seeds.get('policy')!r}")
        raise InputError(path, f"not the seeds the study derives for bug {bug} from study seed {study_seed} "
                         f"({policy}): {at}; edited? delete it and the workflow writes it again from the "
                         "derivation (each run's record holds the seed it ran with: `bugimpact verify` names "
                         "one whose seed is not the derivation's)", field="seeds")


def run_seeds(path, train_cfg, bug):
    """The bug's seeds: its archive, made by its own rule before any run is asked for; while the
    archive is lost, the same seeds derived again (a function of the study seed, the policy and
    the bug id, as the archive is)."""
    if not Path(path).exists():
        log.warning("%s: the seeds archive %s is lost; its rule makes it again, the run derives "
                    "the same seeds from the study seed", bug, path)
        return derive_seeds(train_cfg["study_seed"], bug, train_cfg["seed_policy"])
    check_seeds(path, bug, train_cfg["study_seed"], train_cfg["seed_policy"])
    return read_json(path)["seeds"]


def study_bugs(config, sheet_rows):
    """Bug id -> {label, arms: {arm: {source..., fault}}, workloads}: the sheet's accepted rows
    (their arms made by ``artifacts.source``, or by ``bugs.overrides``), the one-fix
    ``bugs.fixes`` and the controls; ``workloads``: the names it is studied with
    (``workloads.items``)."""
    bugs = {}
    default_source = config["artifacts"]["source"]
    overrides = config["bugs"].get("overrides", {})
    if config["bugs"].get("from_sheet", True):
        for row in sheet_rows:
            if row.get("decision") != "accept":
                continue
            arms = source(default_source).sheet_arms(row, config["artifacts"])
            for arm, spec in overrides.get(row["id"], {}).items():
                arms[arm] = source(spec["source"]).sheet_override(spec, arm, row)
            bugs[row["id"]] = {"label": row.get("text", ""), "kind": "bug", "arms": arms,
                               "tags": row.get("tags") or "", "workloads": row.get("workloads") or "",
                               "sheet_row": row}
    for fix_id, spec in config["bugs"].get("fixes", {}).items():
        if fix_id in bugs:
            raise ValueError(f"config.yaml: fix id {fix_id!r} is also a sheet id")
        bugs[fix_id] = {"label": spec.get("label", fix_id), "kind": "bug",
                        "arms": OneFix.arms(spec["release"], spec), "tags": spec.get("tags", ""),
                        "workloads": spec.get("workloads", [])}
    for control_id, spec in config["bugs"].get("controls", {}).items():
        if control_id in bugs:
            raise ValueError(f"config.yaml: control id {control_id!r} is also a sheet id")
        bugs[control_id] = {"label": spec.get("label", control_id), "kind": "control",
                            "arms": {arm: dict(spec[arm]) for arm in ARMS},
                            "tags": spec.get("tags", ""), "workloads": spec.get("workloads", [])}
    return bugs
