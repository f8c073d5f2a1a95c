"""Extensions from outside the package: installed Python packages that declare an entry point in
the group ``bugimpact.plugins`` (in their pyproject.toml: ``[project.entry-points."bugimpact.plugins"]
name = "their_module"``). Each is imported once, the first time a registry is read, in every
host-side process (the workflow's parse, its script jobs, the CLI); importing it registers what it
adds, with no edit to this package or the schema:

- an artifact source: a ``artifacts.source_kinds.Source`` subclass, decorated ``@register``;
- a runtime kind: a ``artifacts.kinds.RuntimeKind`` subclass, decorated ``@register``;
- a challenge: ``datasets.register_challenge(name, Challenge(...))``;
- a metric: ``stats.exact.register_metric(name, of_matrix)``, exact from the confusion counts.

A model needs no plugin: ``train.model: module:Class`` names a class importable inside the
runtime. The config schema takes its lists of sources, kinds and challenges from the registries
(``config.code_lists``), so a config naming the new ones validates as it is."""
from importlib.metadata import entry_points

from .io import InputError

GROUP = "bugimpact.plugins"
_loaded = set()


def load():
    """Import every plugin once (a registry calls this before it answers)."""
    if GROUP in _loaded:
        return
    _loaded.add(GROUP)
    for point in sorted(entry_points(group=GROUP), key=lambda p: p.name):
        try:
            point.load()
        except Exception as exc:  # a broken plugin is named, with what it raised
            raise InputError(f"plugin {point.name} ({point.value}, entry point group {GROUP})",
                             f"cannot be imported: {type(exc).__name__}: {exc}") from exc


def register(registry, name, value, what):
    """Add ``value`` under ``name``, refusing a name that is empty or taken (a plugin never
    replaces what the package or another plugin registered)."""
    if not name:
        raise ValueError(f"a {what} needs a name")
    if name in registry and registry[name] != value:
        raise ValueError(f"{what} {name!r} is registered already: choose another name")
    registry[name] = value
    return value
