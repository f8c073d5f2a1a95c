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
from .io import ConfigError, InputError

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


class Registry(dict):
    """One extension point's entries by name (runtime kinds, artifact sources, challenges,
    metrics, model protocols): the package's own, and the plugins' once one is asked for. The one
    place that adds, lists and finds an entry; ``what`` names the entry in messages and ``field``
    the config key whose value picks one (named when a name is unknown)."""

    def __init__(self, what, field, entries=()):
        super().__init__(entries)
        self.what, self.field = what, field

    def add(self, name, value):
        """Add ``value`` under ``name``, refusing a name that is empty or taken (a plugin never
        replaces what the package or another plugin registered)."""
        if not name:
            raise ValueError(f"a {self.what} needs a name")
        if name in self and self[name] != value:
            raise ValueError(f"{self.what} {name!r} is registered already: choose another name")
        self[name] = value
        return value

    def every(self):
        """Every entry, the plugins' included."""
        load()
        return self

    def named(self, name):
        """The entry ``name``, importing the plugins only for a name the package does not have (a
        run's process that names built-in entries never pays for the scan); a ``ConfigError`` on
        ``field`` names the known ones when none is."""
        if name not in self:
            load()
        if name not in self:
            raise ConfigError(f"unknown {self.what} {name!r}; known: {', '.join(self)}", field=self.field)
        return self[name]
