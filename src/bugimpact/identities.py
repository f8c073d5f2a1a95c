"""A study's things, each an object keyed by what it is, filling in its own paths (``layout``):
the study (its own tables, figures and report), a bug (its name and the experiment its runs
compute with) and an artifact (its identity and the runtime it runs in). The plan makes them; rules, the CLI and the checks ask them for paths and
settings instead of spelling either again."""
from dataclasses import dataclass, field

from . import layout
from .harness.registry import ARMS


@dataclass(frozen=True)
class Study:
    """A study's own outputs, under ``results/<name>/``; a rule asks for a pattern by giving a
    wildcard as the value (``study.bug_figure("{bug}")``)."""
    name: str

    def _path(self, pattern, **fields):
        return pattern.format(study=self.name, **fields)

    out = property(lambda self: self._path(layout.STUDY))
    preflight = property(lambda self: self._path(layout.PREFLIGHT))
    mined_bugs = property(lambda self: self._path(layout.MINED_BUGS))
    mined_releases = property(lambda self: self._path(layout.MINED_RELEASES))
    resolved = property(lambda self: self._path(layout.RESOLVED))
    funnel = property(lambda self: self._path(layout.FUNNEL))
    builds_summary = property(lambda self: self._path(layout.BUILDS_SUMMARY))
    pvalues = property(lambda self: self._path(layout.PVALUES))
    verdicts = property(lambda self: self._path(layout.VERDICTS))
    override_checks = property(lambda self: self._path(layout.OVERRIDE_CHECKS))
    stats_summary = property(lambda self: self._path(layout.STATS_SUMMARY))
    std_figure = property(lambda self: self._path(layout.STD_FIGURE))
    report = property(lambda self: self._path(layout.REPORT))
    reach = property(lambda self: self._path(layout.STUDY) + "/reach", doc="the reach matrix's folder")
    reach_matrix = property(lambda self: self._path(layout.REACH_MATRIX))
    reach_matrix_text = property(lambda self: self._path(layout.REACH_MATRIX_TEXT))
    reach_matrix_figure = property(lambda self: self._path(layout.REACH_MATRIX_FIGURE))

    def sheet_merge(self, framework):
        return self._path(layout.SHEET_MERGE, framework=framework)

    def build_status(self, bug, arm):
        return self._path(layout.BUILD_STATUS, bug=bug, arm=arm)

    def bug_stats(self, bug, key):
        """A bug's statistics under experiment ``key``: the json the figures and tables read, and
        its table."""
        return self._path(layout.BUG_STATS, bug=bug, key=key), self._path(layout.BUG_TABLE, bug=bug, key=key)

    def bug_figure(self, bug):
        return self._path(layout.BUG_FIGURE, bug=bug)

    def bug_line(self, bug):
        return self._path(layout.BUG_LINE, bug=bug)


@dataclass(frozen=True)
class Bug:
    """One bug of a study: ``spec`` (its kind and arms, each arm with its artifact) and ``key``,
    the experiment its runs compute with. Every file of the bug is keyed by both."""
    name: str
    key: str
    spec: dict = field(compare=False, repr=False)

    def arm(self, arm):
        return self.spec["arms"][arm]

    @property
    def is_control(self):
        return self.spec.get("kind") == "control"

    @property
    def reach_identity(self):
        """What its reach verdict is judged from: its kind and its arms (their diffs or commits),
        never its label, tags or a person's notes on its sheet row, so that editing those judges
        nothing again."""
        return {"kind": self.spec["kind"], "arms": self.spec["arms"]}

    def _path(self, pattern, **fields):
        return pattern.format(bug=self.name, key=self.key, **fields)

    # its files keyed by the bug and its key alone (the seeds' key holds the study seed and the
    # policy they are derived from: two studies with other seeds never share a file)
    seeds = property(lambda self: self._path(layout.SEEDS))
    experiment = property(lambda self: self._path(layout.EXPERIMENT))
    arms_gate = property(lambda self: self._path(layout.ARMS_GATE))
    reach = property(lambda self: self._path(layout.REACH), doc="its reach verdict")
    early = property(lambda self: self._path(layout.EARLY))
    runs_folder = property(lambda self: self._path(layout.BUG_RUNS))
    repeats_folder = property(lambda self: self._path(layout.BUG_REPEATS))

    def stats(self, study):
        """Its statistics in ``study`` (a ``Study``), under its key."""
        return study.bug_stats(self.name, self.key)

    def stage(self, pairs):
        return self._path(layout.STAGE, pairs=pairs)

    def record(self, arm, run):
        return self._path(layout.RUN, arm=arm, run=run)

    def records(self, count):
        """The records of its first ``count`` runs of each arm, in arm order."""
        return [self.record(arm, i) for arm in ARMS for i in range(count)]

    def repeat(self, arm, run):
        return self._path(layout.REPEAT, arm=arm, run=run)


@dataclass(frozen=True)
class Artifact:
    """A framework build or release that arms (or a reach trace) run: ``ident`` says what it is,
    ``spec`` how it is had; ``runtime`` is the identity of the runtime it runs in, of ``kind``."""
    ident: str
    runtime: str
    kind: str
    spec: dict = field(compare=False, repr=False)

    @property
    def manifest(self):
        return layout.ARTIFACT.format(artifact=self.ident)

    @property
    def runtime_json(self):
        return layout.RUNTIME.format(runtime=self.runtime, artifact=self.ident)

    def trace(self, key):
        """Its reach trace under the experiment ``key`` (the workload traced)."""
        return layout.TRACE.format(key=key, artifact=self.ident)

    def check(self, key):
        """The check of its override library (a compiled fix's) on the workload of ``key``."""
        return layout.CHECK.format(key=key, artifact=self.ident)
