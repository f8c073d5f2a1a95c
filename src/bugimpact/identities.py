"""A study's things, each an object keyed by what it is, filling in its own paths (``layout``):
a bug (its name and the experiment its runs compute with) and an artifact (its identity and the
runtime it runs in). The plan makes them; rules, the CLI and the checks ask them for paths and
settings instead of spelling either again."""
from dataclasses import dataclass, field

from . import layout
from .harness.registry import ARMS


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
        """Its statistics in ``study`` (the json the figures and tables read, and its table)."""
        return self._path(layout.BUG_STATS, study=study), self._path(layout.BUG_TABLE, study=study)

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
