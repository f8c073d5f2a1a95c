"""What the workflow will run, decided at parse time from the config and the filter sheet.

Kept out of the rule files so it can be unit-tested: the bug list (accepted sheet rows plus
controls), each arm's artifact, the experiment key, and every target path.
"""
from pathlib import Path

from .experiment import ARMS, artifact_id, experiment_key, study_bugs
from .io import InputError
from .sheet import validate


class Plan:
    def __init__(self, config, sheet_schema):
        self.config = config
        sheet_path = Path(config["sheet"])
        rows = validate(sheet_path, sheet_schema) if sheet_path.exists() else []
        self.sheet_rows = rows
        self.bugs = study_bugs(config, rows)
        self.key = experiment_key(config["train"])
        self.artifacts = {}
        recipe_sha = ""
        if any(a["source"] == "docker" for b in self.bugs.values() for a in b["arms"].values()):
            from .artifacts.docker import recipe
            recipe_sha = recipe(config["artifacts"]["docker"])[1]
        for bug, spec in self.bugs.items():
            for arm in ARMS:
                arm_spec = spec["arms"][arm]
                self._check_arm(bug, arm, arm_spec)
                ident = artifact_id(arm_spec, recipe_sha)
                base = {k: v for k, v in arm_spec.items() if k != "fault"}
                self.artifacts.setdefault(ident, base)
                arm_spec["artifact"] = ident
        self.runtime = config["runtime"]["kind"]
        if self.runtime == "local":
            others = sorted(a for a in self.artifacts if a != "installed")
            if others:
                raise InputError("config.yaml", f"runtime.kind local runs only the installed torch; "
                                 f"artifacts {', '.join(others)} need venv or docker",
                                 field="runtime.kind")

    @staticmethod
    def _check_arm(bug, arm, spec):
        need = {"docker": "commit", "pypi": "version", "wheel": "wheel"}.get(spec["source"])
        if need and not spec.get(need):
            raise InputError("config.yaml", f"bug {bug}, arm {arm}: source {spec['source']} needs "
                             f"'{need}'", field=f"bugs.{bug}.{arm}.{need}")

    @property
    def runs(self):
        return self.config["train"]["runs"]

    def early_runs(self):
        early = self.config["train"]["early_decision"]
        return early["runs"] if early["enabled"] and early["runs"] < self.runs else 0

    def arm(self, bug, arm):
        return self.bugs[bug]["arms"][arm]

    def record(self, bug, arm, run):
        return f"results/runs/{bug}/{self.key}/{arm}/{run}.json"

    def records(self, bug, runs=None):
        count = self.runs if runs is None else runs
        return [self.record(bug, arm, i) for arm in ARMS for i in range(count)]

    def runtime_json(self, bug, arm):
        return f"results/runtimes/{self.runtime}/{self.arm(bug, arm)['artifact']}/runtime.json"

    def build_statuses(self):
        return [f"results/builds/{bug}/{arm}.status" for bug in sorted(self.bugs) for arm in ARMS]

    def artifact_spec(self, ident):
        return self.artifacts[ident]

    def targets(self):
        out = ["results/filter/funnel.csv", "results/mined/releases.csv"]
        if self.bugs:
            # Records are targets in their own right: a deleted one is rerun even when the
            # statistics built from it are up to date.
            out += [path for bug in self.bugs for path in self.records(bug)]
            out += [f"results/stats/{bug}.csv" for bug in self.bugs]
            out.append("results/builds/summary.csv")
            out += ["results/stats/pvalues.csv", "results/stats/summary.csv", "results/report.html"]
        return out
