"""What the workflow will run, decided at parse time from the config and the filter sheet.

Kept out of the rule files so it can be unit-tested: the bug list (accepted sheet rows plus
controls), each arm's artifact, the experiment key, and every target path.
"""
import re
from pathlib import Path

from . import layout, workloads
from .artifacts.kinds import content_digest
from .artifacts.kinds import kind as runtime_kind
from .artifacts.source_kinds import artifact_id, source
from .experiment import arms_identity, check_seeds, experiment_file, experiment_key, study_bugs
from .harness.registry import ARMS
from .identities import Bug, Study
from .io import ConfigError, InputError, config_file, read_json
from .reach.run import gate
from .records import ran_in, record_paths, record_status, trained_on
from .sheet import sheet_missing, validate
from .stats.decisions import pairs_for_rate, stops
from .study_runtimes import StudyRuntimes


class Plan:
    def __init__(self, config, sheet_schema, source="config.yaml"):
        """``source``: the file the config was read from, which the config's errors name (and the
        commands said to the user pass on)."""
        self.source = str(source)
        with config_file(source):
            self._make(config, sheet_schema)

    def _make(self, config, sheet_schema):
        self.config = config
        sheet_path = Path(config["sheet"])
        rows = validate(sheet_path, sheet_schema) if sheet_path.exists() else []
        self.sheet_rows = rows
        self.sheet_missing = None if sheet_path.exists() else sheet_missing(sheet_path)
        # what this study alone makes (its tables, report, sheet merge) lives under its own folder,
        # so two studies in one checkout keep their reports side by side; runs, artifacts and
        # runtimes are keyed by what they are and shared
        self.study = Study(config["study"])
        strays = sorted(set(config["bugs"].get("overrides") or {}) - {r.get("id") for r in rows})
        if rows and strays:  # (a first run's sheet is still empty: mining fills it)
            raise ConfigError(f"bugs.overrides names {', '.join(strays)}, which "
                              f"{config['sheet']} does not hold", field=f"bugs.overrides.{strays[0]}")
        specs = study_bugs(config, rows)
        # accepted sheet rows that cannot run here: said once at the start, the rest goes on
        self.cannot_run = {bug: why for bug, spec in specs.items() if (why := cannot_run(spec, config))}
        # a bug once per workload it names (every name checked, of those that cannot run too)
        specs = {item: spec for item, spec in workloads.items(config, specs, sheet_path, rows).items()
                 if spec["bug"] not in self.cannot_run}
        self.kind = runtime_kind(config["runtime"]["kind"])
        arms = [a for b in specs.values() for a in b["arms"].values()]
        recipe_sha, self.toolchain = "", None  # the toolchain image, where a step uses docker
        if self.kind.needs_toolchain or any(source(a["source"]).built for a in arms):
            # the Docker SDK: only where a build or docker runtime is planned
            from .artifacts.docker import recipe, toolchain_name
            recipe_sha = recipe(config["artifacts"]["docker"])[1]
            self.toolchain = toolchain_name(config["artifacts"]["docker"])
        self.interpreter, target = self.kind.interpreter(config["runtime"], recipe_sha)
        self.runtimes = StudyRuntimes(config, self.kind, self.interpreter, recipe_sha,
                                      self.toolchain_json() if self.kind.needs_toolchain else None)
        self.artifacts = self.runtimes.artifacts  # artifact id -> Artifact, in the runtime of train's model
        for bug, spec in specs.items():
            for arm in ARMS:
                arm_spec = spec["arms"][arm]
                source(arm_spec["source"]).check(bug, arm, arm_spec)
                ident = artifact_id(arm_spec, recipe_sha, target)
                base = {k: v for k, v in arm_spec.items() if k != "fault"}
                if source(arm_spec["source"]).fits_interpreter:
                    base["python"] = self.interpreter  # the wheel must fit the runtime's Python
                self.runtimes.register(ident, base)
                arm_spec["artifact"] = ident
        # each item's arms in the runtimes its workload's model needs
        self.placements = {(item, arm): self.runtimes.place(spec["arms"][arm]["artifact"],
                                                            workloads.train(config, spec["workload"]))
                           for item, spec in specs.items() for arm in ARMS}
        keys, self.experiments = self._experiments(specs)
        self.bugs = {bug: Bug(bug, keys[bug], spec) for bug, spec in specs.items()}  # name -> Bug
        for bug in self.bugs:
            check_seeds(Path(self.bug(bug).seeds), bug, config["train"]["study_seed"], config["train"]["seed_policy"])
        self.reach_artifacts = {bug: self._reach_artifact(bug, recipe_sha, target) for bug in self.bugs}
        self.reach_placements = {bug: self.runtimes.place(ident, self.train(bug))
                                 for bug, ident in self.reach_artifacts.items() if ident}
        # the experiment of every key a job of this study is given: the runs' and checks' (the
        # bugs' keys) and the traces'
        self.trains = {bug.key: self.train(name) for name, bug in self.bugs.items()}
        self.trains.update({self._trace_key(bug): self.train(bug) for bug in self.reach_placements})
        refused = sorted((why, a.ident) for a in self.artifacts.values()
                         if (why := runtime_kind(a.kind).refusal(a.spec["source"])))
        if refused:
            raise ConfigError(f"{refused[0][0]} (artifact {refused[0][1]})",
                              field="runtime.kind")

    def _experiments(self, specs):
        """Each bug's experiment key (``specs``: the bugs' specs), and the experiment of each key
        (``experiment_file``, one file per key). A bug's key names its arms' runtimes and what each
        arm trains on (``arms_identity``): a bug whose arms did not change keeps its runs, one whose
        release or diff changed trains new runs beside them, and a change back finds them again.
        Runs of the layout before, keyed without the arms, are read where they are when every one
        of them was trained on these arms (``records.trained_on``)."""
        keys, experiments, self.runtime_contents = {}, {}, {}
        for bug, spec in specs.items():
            runtime = "+".join(sorted({self.placements[(bug, arm)].runtime for arm in ARMS}))
            arms, train = arms_identity(spec), workloads.train(self.config, spec["workload"])
            found = experiment_file(train, runtime, arms)
            before = experiment_file(train, runtime)
            if not Path(layout.BUG_RUNS.format(bug=bug, key=found["key"])).exists() and trained_on(
                    [layout.BUG_RUNS.format(bug=bug, key=before["key"]),
                     layout.BUG_REPEATS.format(bug=bug, key=before["key"])], arms):
                found = before
            found, self.runtime_contents[bug] = self._in_contents(bug, spec, train, runtime, arms, found)
            keys[bug], experiments[found["key"]] = found["key"], found
        return keys, experiments

    def _in_contents(self, bug, spec, train, runtime, arms, found):
        """The experiment of a bug whose runs ran in a runtime of other content than its arm's
        runtime has now (made again since with other bytes: ``steps.runtime``): its arms named with
        their runtimes' contents, so new runs go beside the old ones (and a runtime made again as it
        was finds them); and the content each arm's runs must run in (the train jobs refuse
        another), "" where none is known yet."""
        made = {arm: self._made_content(self.placements[(bug, arm)]) for arm in ARMS}
        ran = ran_in(layout.BUG_RUNS.format(bug=bug, key=found["key"]))
        if any(made[arm] and ran.get(arm) and made[arm] != ran[arm] for arm in ARMS):
            found = experiment_file(train, runtime, {arm: {**arms[arm], "runtime_content": made[arm]} for arm in ARMS})
            ran = ran_in(layout.BUG_RUNS.format(bug=bug, key=found["key"]))
        return found, {arm: made[arm] or ran.get(arm, "") for arm in ARMS}

    def _made_content(self, artifact):
        """The content of ``artifact``'s runtime as made now (``kinds.content_digest``), or ""
        where it is not made, failed or does not read."""
        path = Path(artifact.runtime_json)
        try:
            record = read_json(path) if path.is_file() else None
        except InputError:
            return ""
        return content_digest(record) if isinstance(record, dict) and record.get("kind") \
            and record.get("status") != "failed" else ""

    def lost_runtimes(self):
        """The runtimes that whole runs of this study ran in whose records are gone (a folder
        deleted by hand), with the bugs of those runs: the workflow would make them again and, a
        missing input being a changed one, train those runs again. ``bugimpact run --bug`` and
        ``retry-failed`` make each again in place first (``recovery``)."""
        lost = {}
        for name in sorted(self.bugs):
            for arm in ARMS:
                artifact = self.artifact_of(name, arm)
                if not Path(artifact.runtime_json).exists() and any(
                        record_status(p) == "ok" for p in record_paths(Path(self.bug(name).runs_folder) / arm)):
                    lost.setdefault(artifact.runtime_json, []).append(name)
        return lost

    def _reach_artifact(self, bug, recipe_sha, target):
        """The release a sheet bug's reach trace runs on (registered as an artifact), or None:
        controls and release-vs-release bugs need no trace, and reach may be off."""
        reach = self.config["reach"]
        if not reach["enabled"] or self.bug(bug).is_control:
            return None
        corrected = self.bug(bug).arm("corrected")
        version = reach["release"]
        if version == "sheet":
            row = self.bug(bug).spec.get("sheet_row", {})
            version = re.sub(r"^v", "", row.get("release", ""))
        release = self.kind.reach_release(corrected, version)
        if release is None:
            return None
        ident = artifact_id(release, recipe_sha, target)
        if source(release["source"]).fits_interpreter:
            release["python"] = self.interpreter
        self.runtimes.register(ident, release)
        return ident

    @property
    def keys(self):
        """Each bug's experiment key."""
        return {name: bug.key for name, bug in self.bugs.items()}

    def bug(self, name):
        """The study's bug ``name`` (``identities.Bug``): its spec, experiment key and paths."""
        return self.bugs[name]

    def studied_workloads(self):
        """The named workloads its bugs are studied with (``workloads.items``), sorted."""
        return sorted({bug.spec["workload"] for bug in self.bugs.values()} - {None})

    def train(self, name):
        """The experiment bug ``name`` trains: ``train``, with its workload's model in place."""
        return workloads.train(self.config, self.bug(name).spec["workload"])

    def artifact_of(self, bug, arm):
        """The artifact an arm of a bug runs, in the runtime it runs in (``identities.Artifact``)."""
        return self.placements[(bug, arm)]

    def placed_artifacts(self):
        """Every artifact of the study in every runtime a job of it runs one in."""
        return {*self.artifacts.values(), *self.placements.values(), *self.reach_placements.values()}

    def placed(self, ident, key):
        """Artifact ``ident`` in the runtime a job of experiment ``key`` (a trace, a check) runs it in."""
        return self.runtimes.of(ident, self.trains[key])


    def override_checks(self, bug):
        """The checks of the override libraries the bug's arms may carry (one-fix arms: a compiled
        fix's kernels), by arm, under the bug's experiment."""
        return {arm: self.artifact_of(bug, arm).check(self.bug(bug).key) for arm in ARMS
                if source(self.artifact_of(bug, arm).spec["source"]).overrides}

    def reach_trace(self, bug):
        """The trace of the bug's workload that its reach verdict reads, or None where it needs none."""
        return self.reach_placements[bug].trace(self._trace_key(bug)) if bug in self.reach_placements else None

    def _trace_key(self, bug):
        return experiment_key(self.train(bug), self.reach_placements[bug].runtime)

    def experiment_keys(self):
        """Every experiment key a path of this study may hold: a path under any other key (typed
        by hand, or left from another config) matches no rule, so no record lies about its run."""
        return sorted(self.trains)

    def experiment_of(self, key):
        """The experiment (the train settings) a job of ``key`` (a run, a trace, a check) trains."""
        return self.trains[key]

    def reach_json(self, bug):
        """The bug's reach verdict, or None when the study judges no reach."""
        return self.bug(bug).reach if self.config["reach"]["enabled"] else None

    def reach_gates(self, bug):
        """Whether a not-reached verdict stops this bug (reach.skip; auto: docker builds, where
        it saves hours). Controls are never stopped."""
        skip = self.config["reach"]["skip"]
        if not self.config["reach"]["enabled"] or self.bug(bug).is_control:
            return False
        if skip == "auto":
            return any(source(a["source"]).built for a in self.bug(bug).spec["arms"].values())
        return bool(skip)

    def reach_gating_jsons(self):
        """The reach verdicts that can stop a bug's builds (those bugs whose reach gates)."""
        return [self.reach_json(bug) for bug in sorted(self.bugs) if self.reach_gates(bug)]

    def reach_stop(self, bug, read=None):
        """The reach verdict that stops this bug before its artifacts ("" when none does).
        ``read(path)``: the verdict written there, None while it is not (default: from disk; the
        workflow's asks the reach checkpoint, which is made first)."""
        if not self.reach_gates(bug):
            return ""
        verdict = (read or _written)(self.reach_json(bug))
        return verdict["verdict"] if verdict and gate(verdict, self.config["train"]["device"]) else ""

    def gated_bugs(self):
        """Bugs that the reach verdicts written so far stop before any artifact."""
        return {bug for bug in self.bugs if self.reach_stop(bug)}

    @property
    def runs(self):
        return self.config["train"]["runs"]

    def early_runs(self):
        """Pairs the early decision looks at: ``runs``, or as many as ``trigger_rate`` needs (the
        rate of seed-dependent triggers a not-triggered verdict must exclude); 0 when off."""
        early = self.config["train"]["early_decision"]
        k = early["runs"]
        if early.get("trigger_rate"):
            k = pairs_for_rate(early["trigger_rate"])
        return k if early["enabled"] and k < self.runs else 0

    def stages(self):
        """Interim sizes (pairs) of the group-sequential design, each below train.runs; [] if off."""
        seq = self.config["train"]["sequential"]
        return [n for n in seq["stages"] if n < self.runs] if seq["enabled"] else []

    def needed(self, bug, read):
        """The records this bug needs and the decisions that gate them, in run order: the early
        decision after its k pairs, then each group-sequential look. Decisions are made from the
        records before them and only ever decide which records are asked for: a finished record
        is never their product, so a decision missing, failed or rewritten retrains nothing.

        ``read(kind, pairs, path)``: the decision (``kind`` "early" or "stage") written at
        ``path``, or None while it is not made (the records it needs are then the last asked
        for); in the workflow it asks the checkpoint, which is made first. Returns (record paths,
        decision paths)."""
        gates = [(n, 1, "stage") for n in self.stages()]
        if self.early_runs():
            gates.append((self.early_runs(), 0, "early"))
        decisions, of = [], self.bug(bug)
        for pairs, _, kind in sorted(gates):
            decisions.append(of.early if kind == "early" else of.stage(pairs))
            decision = read(kind, pairs, decisions[-1])
            if decision is None or stops(decision):
                return of.records(pairs), decisions
        return of.records(self.runs), decisions

    def repeat_records(self, bug):
        """The repeat the early decision needs first: buggy run 0 once more (on CUDA, or always)."""
        early = self.config["train"]["early_decision"]
        needed = early.get("repeat", "cuda") == "always" or self.config["train"]["device"] == "cuda"
        if not (self.early_runs() and needed):
            return []
        return [self.bug(bug).repeat("buggy", 0)]

    def runnable(self, bug):
        """Whether the bug's arms gate, once written, let its runs be made (None: not yet known)."""
        gate = Path(self.bug(bug).arms_gate)
        if not gate.exists():
            return None
        return bool(read_json(gate).get("runnable"))

    def toolchain_json(self):
        """The toolchain image's record (built by its own rule), or None when no step uses docker."""
        return layout.TOOLCHAIN.format(toolchain=self.toolchain) if self.toolchain else None

    def challenges(self):
        """The challenges its experiments train on (train's where it has none), sorted."""
        return sorted({train["challenge"] for train in self.trains.values()} or {self.config["train"]["challenge"]})

    def data_files(self, key):
        """The prepared challenge of experiment ``key``: its .npz and its metadata."""
        challenge = self.experiment_of(key)["challenge"]
        return layout.DATA.format(challenge=challenge), layout.DATA_META.format(challenge=challenge)

    def build_statuses(self):
        return [self.study.build_status(bug, arm) for bug in sorted(self.bugs) for arm in ARMS]

    def bug_targets(self, bug):
        """What one bug needs made, listed from the files on disk: its arms gate, its decisions
        and its missing records as far as the decisions made so far ask (the others are made),
        its statistics and figure, its line; and its seeds archive and experiment file when they
        were lost after the gate was made from them (runs read them; only their rules write them).

        Snakemake (9.27) neither remakes a missing checkpoint output nor rechecks the jobs that
        ask it when their outputs exist, and it does not look for the missing inputs of a job whose
        output exists when checkpoints are in the DAG: so gates, decisions, missing records and
        the statistics are targets themselves (of ``all``, of ``bugimpact run --bug``). A deleted
        record or decision is made again even when the statistics are up to date. Before the arms
        gate is written, the statistics ask for the records through the checkpoint."""
        records, decisions = self.known(bug)
        of = self.bug(bug)
        archives = [of.seeds, of.experiment] if self.runnable(bug) else []
        missing = [p for p in archives + records if not Path(p).exists()]
        return [of.arms_gate] + decisions + missing + list(self.bug_inputs(bug).values()) + \
            [self.study.bug_line(bug)]

    def bug_inputs(self, bug):
        """The inputs of the bug's rule, by name: its statistics and figure (a fixed set: its
        records are the statistics' inputs, and listed ones would change the set as decisions are
        made)."""
        stats, table = self.bug(bug).stats(self.study)
        return {"stats": stats, "table": table, "figure": self.study.bug_figure(bug)}

    def bug_stats(self):
        """Every bug's statistics (the json), in bug order."""
        return [self.bug(bug).stats(self.study)[0] for bug in sorted(self.bugs)]

    def known(self, bug):
        """(records, decisions) this bug needs as far as the decisions on disk ask."""
        return self.needed(bug, lambda kind, pairs, path: _written(path)) if self.runnable(bug) else ([], [])

    def matrix_files(self):
        """The reach matrix's csv, text and figure, where the config names workloads and releases."""
        study, config = self.study, self.config
        made = config["workloads"] and config["reach"]["releases"]
        return [study.reach_matrix, study.reach_matrix_text, study.reach_matrix_figure] if made else []

    def targets(self):
        """Every target of the study (``all``): the reach matrix, each bug's, then the study's
        tables and report."""
        study = self.study
        out = [study.preflight, study.funnel, study.mined_releases, *self.matrix_files()]
        if self.bugs:
            for bug in sorted(self.bugs):
                out += self.bug_targets(bug)
            out += [study.builds_summary, study.pvalues, study.stats_summary, study.report]
        return out


def _written(path):
    """The JSON at ``path``, or None while it is not written (the plan's reader of the decisions
    and verdicts made so far)."""
    return read_json(path) if Path(path).exists() else None


def cannot_run(spec, config):
    """Why an accepted sheet row cannot run in this study, or "": unresolved (no commits and no
    diff where its arms need them), or an artifact the configured runtime cannot run."""
    if "sheet_row" not in spec:  # controls and config fixes: the config's errors stop it at start
        return ""
    arms = spec["arms"].values()
    if any(source(a["source"]).unresolved(a) for a in arms):
        return ("unresolved (no buggy_sha and corrected_sha): set resolve.clone or add the api "
                "resolver, or type both SHAs in the sheet")
    kind = runtime_kind(config["runtime"]["kind"])
    return next((why for why in map(kind.refusal, sorted({a["source"] for a in arms})) if why), "")
