"""The runtimes a study's artifacts run in, and what each is made with (as airspeed velocity's
environments: one object per runtime identity).

An artifact runs in the runtime of the study's own model (``train.model``); an item whose
workload's model needs other things of a runtime (torchvision) runs its artifacts in runtimes of
their own, so that adding such a workload names no runtime of the study anew, and retrains
nothing."""
from dataclasses import replace

from .artifacts.kinds import kind as runtime_kind
from .artifacts.kinds import runtime_id
from .artifacts.runtimes import made_with
from .artifacts.source_kinds import source
from .artifacts.sources import artifact_sources
from .identities import Artifact
from .models import model_of


class StudyRuntimes:
    def __init__(self, config, kind, interpreter, recipe_sha, toolchain_json):
        """``kind``: the runtime kind of ``config``'s ``runtime.kind``; ``interpreter`` what its
        runtimes run (``RuntimeKind.interpreter``); ``toolchain_json``: the toolchain image's
        record where a runtime is made in it, else None."""
        self.config, self.kind, self.interpreter = config, kind, interpreter
        self.recipe_sha, self.toolchain_json = recipe_sha, toolchain_json
        self.model = model_of(config["train"])  # what the study's runtimes hold for it
        self.artifacts = {}  # artifact id -> Artifact, in the runtime of train's model
        self.trains = {}  # runtime id -> the experiment whose model's needs it holds

    def register(self, ident, spec):
        """The artifact ``ident``, made with its source's own settings, if it has any (in its spec:
        an edit remakes it), and the runtime it runs in (``RuntimeKind.runs_in``)."""
        if source(spec["source"]).settings_schema:
            spec = {**spec, "settings": self.config["artifacts"].get(spec["source"], {})}
        if ident not in self.artifacts:
            kind = self.kind.runs_in(spec["source"], self.config["runtime"])
            self.artifacts[ident] = Artifact(ident, self._id(kind, self.model.runtime_needs()), kind, spec)
            self.trains.setdefault(self.artifacts[ident].runtime, self.config["train"])

    def of(self, ident, train):
        """Artifact ``ident`` in the runtime that holds what ``train``'s model needs."""
        artifact, needs = self.artifacts[ident], model_of(train).runtime_needs()
        if needs == self.model.runtime_needs():
            return artifact
        return replace(artifact, runtime=self._id(artifact.kind, needs))

    def place(self, ident, train):
        """``of``, the runtime's experiment kept for what it is made with (``made_with``)."""
        artifact = self.of(ident, train)
        self.trains.setdefault(artifact.runtime, train)
        return artifact

    def _id(self, kind, needs):
        return runtime_id({**self.config["runtime"], "kind": kind}, self.interpreter, self.recipe_sha, needs)

    def made_with(self, ident, runtime):
        """What runtime ``runtime`` of artifact ``ident`` is made with besides the artifact, compared
        with the last run's (the runtime rule's tracked param: an edit remakes it): the extra
        requirements, what the model needs of it (the torchvision table) and its kind's own
        settings (runtime.<kind>). Where neither of the last two applies, the requirements alone,
        the value this param had before they existed: such a runtime is kept."""
        kind = self.artifacts[ident].kind
        made, runtime_cfg = {}, self.config["runtime"]
        needs = model_of(self.trains[runtime]).runtime_needs()
        if needs is not None:
            made["model_needs"] = needs
        if runtime_kind(kind).settings_schema:
            made["kind_settings"] = runtime_cfg.get(kind, {})
        return {"requirements": runtime_cfg["requirements"], **made} if made else runtime_cfg["requirements"]

    def settings(self, ident, runtime):
        """The settings runtime ``runtime`` of artifact ``ident`` is made with (``steps.runtime``;
        the job's threads aside): its rule's, and ``bugimpact``'s when it makes one again in place."""
        runtime_cfg, train = self.config["runtime"], self.trains[runtime]
        return {"interpreter": self.interpreter, **made_with(self.made_with(ident, runtime)),
                "toolchain_json": self.toolchain_json, "installer": runtime_cfg["installer"],
                "cache": runtime_cfg["cache"], "object_cache": runtime_cfg["object_cache"],
                "sources": artifact_sources(self.config),
                "model": {k: train.get(k) for k in ("model", "model_options")}}
