"""Workloads: the models a study can train, by name (config ``workloads``: a model, its challenge
and options), which the reach matrix judges every fix for and a bug can be studied with.

A bug studied with named workloads (its sheet row's ``workloads`` cell, or ``workloads`` of its
config fix or control) is one study item per workload, named ``<bug>@<workload>``; a bug that
names none is studied with ``train`` as it is, under its own name. Each item's experiment is
``train`` with the workload's model, challenge and options in place, so its runs, seeds, checks,
statistics and verdict are keyed by it as any bug's are."""
from .io import ConfigError, InputError

SEPARATOR = "@"  # between a bug and its workload: bug ids never hold it (the sheet schema)


def named(config):
    """The config's workloads by name."""
    return {w["name"]: w for w in config.get("workloads") or []}


def train_of(train_cfg, workload):
    """The study's experiment with one workload's model, challenge and options in place."""
    return {**train_cfg, "model": workload["model"], "model_options": workload.get("model_options") or {},
            "challenge": workload.get("challenge") or train_cfg["challenge"]}


def listed(value):
    """The workload names of a sheet cell ("lstm;resnet18") or a config list."""
    if isinstance(value, str):
        return [name.strip() for name in value.split(";") if name.strip()]
    return list(value or [])


def items(config, specs, sheet_path=None, sheet_rows=()):
    """Study item -> spec: each bug of ``specs`` (``experiment.study_bugs``) once per workload it
    names, its spec holding ``bug`` (its id) and ``workload`` (the name, or None for ``train``).
    A name ``workloads`` does not hold is refused where it was written: the sheet's row and
    column, or the config's field."""
    known = named(config)
    lines = {row.get("id"): index + 2 for index, row in enumerate(sheet_rows)}  # the header is line 1
    out = {}
    for bug, spec in specs.items():
        names = listed(spec.get("workloads"))
        unknown = [n for n in names if n not in known]
        if unknown:
            message = (f"workload {unknown[0]!r} is not one of workloads "
                       f"({', '.join(sorted(known)) or 'none are named'})")
            if "sheet_row" in spec:
                raise InputError(sheet_path, message, row=lines.get(bug), field="workloads")
            kind = "controls" if spec["kind"] == "control" else "fixes"
            raise ConfigError(message, field=f"bugs.{kind}.{bug}.workloads")
        for name in names or [None]:
            item = bug if name is None else f"{bug}{SEPARATOR}{name}"
            out[item] = {**spec, "bug": bug, "workload": name}
    return out


def train(config, workload):
    """The experiment an item with ``workload`` (a name, or None) trains."""
    return config["train"] if workload is None else train_of(config["train"], named(config)[workload])

