"""Extensions from outside the package: installed Python packages that declare an entry point in
the group ``bugimpact.plugins`` (in their pyproject.toml: ``[project.entry-points."bugimpact.plugins"]
name = "their_module"``). Each is imported once per host-side process (the workflow's parse, its
script jobs, the CLI), the first time a registry is asked for all its names or for one the package
does not have; importing it registers what it adds, with no edit to this package or the schema:

- an artifact source: a ``artifacts.source_kinds.Source`` subclass, decorated ``@register``;
- a runtime kind: a ``artifacts.kinds.RuntimeKind`` subclass, decorated ``@register``;
- a challenge: ``challenges.register_challenge(name, Challenge(...))``;
- a metric: ``stats.exact.register_metric(name, of_matrix)``, exact from the confusion counts.

A model needs no plugin: ``train.model: module:Class`` names a class importable inside the
runtime. The config schema takes its lists of sources, kinds and challenges from the registries
(``config.code_lists``), so a config naming the new ones validates as it is."""
from .io import InputError

GROUP = "bugimpact.plugins"
_loaded = set()


def load():
    """Import every plugin once (a registry calls this before it lists its names)."""
    if GROUP in _loaded:
        return
    _loaded.add(GROUP)
    from importlib.metadata import entry_points  # 20 ms of a run's start: only when needed
    for point in sorted(entry_points(group=GROUP), key=lambda p: p.name):
        try:
            point.load()
        except Exception as exc:  # a broken plugin is named, with what it raised
            raise InputError(f"plugin {point.name} ({point.value}, entry point group {GROUP})",
                             f"cannot be imported: {type(exc).__name__}: {exc}") from exc


def every(registry):
    """The whole ``registry``, the plugins' entries included."""
    load()
    return registry


def lookup(registry, name):
    """``registry[name]`` (KeyError if absent), importing the plugins only for a name the
    package does not have: a run's process that names built-in kinds never pays for the scan."""
    if name not in registry:
        load()
    return registry[name]


def register(registry, name, value, what):
    """Add ``value`` under ``name``, refusing a name that is empty or taken (a plugin never
    replaces what the package or another plugin registered)."""
    if not name:
        raise ValueError(f"a {what} needs a name")
    if name in registry and registry[name] != value:
        raise ValueError(f"{what} {name!r} is registered already: choose another name")
    registry[name] = value
    return value
