"""What a user recovers from with the commands the README names: every record under the results
that is broken, failed or stale, with what the next run does once it is removed.

``bugimpact retry-failed`` removes them all, ``bugimpact run --bug`` those of one bug, and
``bugimpact status`` (printed at the end of every run) names them. A record is

- broken: it does not read as what it is (cut short, edited by hand, another harness version);
- failed: a run, artifact, runtime or override check that could not be made or did not hold,
  recorded as a result; refused: a fix that a release cannot take (made again, it is refused
  again unless this package changed);
- stale: a made artifact or runtime whose record names a file that is gone for good (a cached
  download that has gone is not: the runtime that installs it fetches it again, the same bytes).

An arms gate that stopped a bug for a failed arm is removed with the failures: Snakemake keeps
an output whose inputs were removed, so a gate left in place would stop the bug for ever.

A runtime that finished runs ran in is never removed: made again by the workflow, it would train
them again (a missing input is a changed one). It is made again in place instead, now, with the
settings it was made with (its record's, or the study's), and so is one whose record is gone
(``Plan.lost_runtimes``); made again with the same content, nothing made from it changes.

Nothing else is touched: a record that is whole stays, and so does everything made from it.
"""
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import layout
from .artifacts.kinds import kind
from .artifacts.source_kinds import source
from .harness.registry import ARMS
from .io import ConfigError, InputError, read_json
from .overrides.check import read as read_check
from .records import record_paths, record_status, why_broken
from .stats.failures import failure_text

RETRAINED = "the next run trains it again"
REMADE = "the next run makes it again"
IN_PLACE = "finished runs ran in it: made again where it is, never removed"
REMADE_GATE = "the next run makes it again from its arms' runtimes, and the runs it lets through"
# Snakemake keeps an output whose input was removed: what was made from a stale record, and is
# whole, is kept, and the record is made again when a job needs it
STALE = "made again when a job needs it (what was made from it and is whole is kept)"


@dataclass(frozen=True)
class Finding:
    path: Path
    state: str  # broken, failed, skipped, stale, gone, or refused (a fix a release cannot take)
    why: str
    then: str  # what the next workflow run does once it is removed
    # a runtime that finished runs ran in: made again in place with these settings, never removed
    settings: dict = field(default=None, compare=False, repr=False)

    def line(self, done=""):
        """What was done (``done``), or, where nothing was yet, what removing it leads to."""
        then = self.then if done or self.settings is not None else f"once removed, {self.then}"
        return f"{done + ' ' if done else ''}{self.path}: {self.state} ({self.why}); {then}"


def of_runs(paths):
    """The broken, failed and skipped (an earlier version's record of a run a decision made
    unneeded) among these run records."""
    out = []
    for path in paths:
        status = record_status(path)
        if status == "failed":
            out.append(Finding(path, "failed", failure_text(read_json(path)), RETRAINED))
        elif status == "skipped":
            out.append(Finding(path, "skipped", "an earlier version's record of an unneeded run",
                               RETRAINED))
        elif why := why_broken(path):
            out.append(Finding(path, "broken", why, RETRAINED))
    return out


def of_artifacts(paths):
    """The broken, failed, refused and stale among these artifact manifests."""
    return _of_made(paths, _failed(lambda m: f"{m.get('failure_class', '?')}: {m.get('error', '')}"),
                    lambda m: source(m["source"]).lost(m), REMADE)


def of_runtimes(paths):
    """The broken, failed and stale among these runtime records."""
    return _of_made(paths, _failed(lambda r: r.get("reason", "")), lambda r: kind(r["kind"]).lost(r),
                    REMADE)


def of_checks(paths, runtimes=layout.RUNTIMES):
    """The broken and failed among these override checks (``overrides.check.read``, each held to
    its artifact's runtime under ``runtimes``): made again by the next run, from the runtime as it
    is then (a runtime that failed has its own record)."""
    def failed(check):
        return ("failed", check.get("reason", "")) if check.get("outcome") == "failed" else None

    def read(path):
        return read_check(path, _runtime_of(path, runtimes))
    return _of_made(paths, failed, lambda check: [], REMADE, read=read)


def _runtime_of(check, runtimes):
    """The runtime record a check (``results/checks/<key>/<artifact>.json``) is of: its artifact's
    one runtime under ``runtimes`` (None where there is not exactly one, or it does not read: the
    check's own ``runtime`` is then read, where it names one)."""
    found = sorted(Path(runtimes).glob(f"*/{Path(check).stem}/runtime.json"))
    try:
        return read_json(found[0]) if len(found) == 1 else None
    except InputError:
        return None


def of_gates(paths):
    """The arms gates that stopped a bug for an arm that failed: made again from the arms'
    runtimes by the next run (a gate that reach stopped is a verdict, not a failure)."""
    def stopped(gate):
        if gate.get("runnable") is False and not gate.get("gated"):
            return "refused" if gate.get("refused") else "failed", gate.get("reason", "")
        return None
    return _of_made(paths, stopped, lambda gate: [], REMADE_GATE)


def _failed(reason):
    """A record's failure: (refused or failed, ``reason(record)``), or None where it did not fail."""
    def failure(record):
        if record.get("status") != "failed":
            return None
        refused = "refused" in (record.get("failure_class"),  # a manifest's, a runtime's
                                (record.get("artifact") or {}).get("failure_class"))
        return "refused" if refused else "failed", reason(record)
    return failure


def _of_made(paths, failure, lost, then, read=read_json):
    """Findings among records of what the workflow makes (``failure(record)``: its state and why,
    or None; ``lost(record)``: the files it names that are gone for good; ``then``: what the next
    run does once a failed or broken one is removed; ``read``: the record's reader, which raises
    ``InputError`` for one that does not read as what it is)."""
    out = []
    for path in map(Path, paths):
        if not path.exists():
            continue
        try:
            record = read(path)
            if not isinstance(record, dict):
                raise InputError(path, f"a {type(record).__name__}, not a record")
            failed = failure(record)
            gone = [] if failed else lost(record)
        # a source or kind that no plugin loaded here registers: the record may be whole
        except ConfigError as exc:
            raise InputError(path, f"{exc.message}: load the plugin that registers it (the study's "
                             "config names its plugins) and ask again; the record is kept",
                             field=exc.field) from None
        except InputError as exc:
            out.append(Finding(path, "broken", _short(str(exc).split(": ", 1)[-1]), then))
            continue
        except KeyError as exc:  # a field every such record has, and this one lacks
            out.append(Finding(path, "broken", f"no {exc} field", then))
            continue
        if failed:
            out.append(Finding(path, failed[0], _short(failed[1]), then))
        elif gone:
            out.append(Finding(path, "stale", f"{', '.join(gone)} gone", STALE))
    return out


def _short(text, width=300):
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[:width - 3] + "..."


def under(runs=layout.RUNS, repeats=layout.REPEATS, artifacts=layout.ARTIFACTS,
          runtimes=layout.RUNTIMES, gates=layout.ARMS_GATES, checks=layout.CHECKS):
    """Every finding under the results' folders, of every study (a runtime whose artifact finished
    runs ran on is made again in place, with the settings its record keeps, where it keeps them)."""
    records = record_paths(runs) + record_paths(repeats)
    ran_on = {_artifact_of(p) for p in records if record_status(p) == "ok"}
    found = of_runtimes(sorted(Path(runtimes).glob("*/*/runtime.json")))
    return (of_runs(records) + of_artifacts(sorted(Path(artifacts).glob("*/manifest.json")))
            + [in_place(f, _kept_settings(f.path)) if f.path.parent.name in ran_on else f for f in found]
            + of_checks(sorted(Path(checks).glob("*/*.json")), runtimes)
            + of_gates(sorted(Path(gates).glob("*/*.json"))))


def _artifact_of(record):
    try:
        return read_json(record)["spec"]["artifact"]
    except (InputError, KeyError, TypeError):
        return None


def _kept_settings(runtime_json):
    """The settings a runtime's record keeps (``made_with``), or None (unreadable, or made before
    records kept them)."""
    try:
        return read_json(runtime_json).get("made_with")
    except (InputError, AttributeError):
        return None


def of_plan(plan, bugs=None):
    """The findings of a study's bugs (``bugs``: these only): their run records and repeats, the
    manifests of their arms' artifacts, those artifacts' runtimes (one that finished runs ran in
    made again in place, with the study's settings, where it is not whole or gone), and the bugs'
    arms gates."""
    names = sorted(plan.bugs) if bugs is None else list(bugs)
    made = {plan.artifact_of(bug, arm) for bug in names for arm in ARMS}
    made = sorted(made, key=lambda a: a.ident)
    records = [p for bug in names for folder in (plan.bug(bug).runs_folder, plan.bug(bug).repeats_folder)
               for p in record_paths(folder)]
    used = {plan.artifact_of(bug, arm).runtime_json for bug in names for arm in ARMS
            if any(record_status(p) == "ok" for p in record_paths(Path(plan.bug(bug).runs_folder) / arm))}
    settings = {a.runtime_json: {**plan.runtimes.settings(a.ident, a.runtime), "kind": a.kind, "artifact_manifest": a.manifest,
                                 "artifact_spec": a.spec} for a in made if a.runtime_json in used}
    lost = [Finding(Path(path), "gone", f"finished runs of {', '.join(bugs_of)} ran in it", IN_PLACE)
            for path, bugs_of in plan.lost_runtimes().items() if set(bugs_of) & set(names)]
    return (of_runs(records) + of_artifacts([a.manifest for a in made])
            + [in_place(f, settings.get(str(f.path))) for f in lost + of_runtimes([a.runtime_json for a in made])]
            + of_checks([path for bug in names for path in plan.override_checks(bug).values()])
            + of_gates([plan.bug(bug).arms_gate for bug in names]))


def in_place(finding, settings):
    """A runtime's finding, made again in place with ``settings`` where finished runs ran in it
    (``settings`` not None), else removed as any other."""
    return finding if settings is None else replace(finding, then=IN_PLACE, settings=settings)


def remove(findings, dry=False):
    """Remove each finding's record (a runtime that finished runs ran in: make it again in place,
    ``steps.runtime.made_again``), saying each and what the next run does; returns the lines."""
    lines = []
    for finding in findings:
        if finding.settings is None:
            if not dry:
                Path(finding.path).unlink(missing_ok=True)
            lines.append(finding.line("would remove" if dry else "removed"))
            continue
        if not dry:
            try:
                _made_again(finding)
            except (RuntimeError, InputError) as exc:
                lines.append(f"not made again {finding.path}: {exc}")
                continue
        lines.append(finding.line("would make again" if dry else "made again"))
    return lines


def _made_again(finding):
    """A runtime finding's runtime made again in place; its artifact first where its manifest is
    gone too (removed here as stale, or by hand), unless a docker build makes it (hours: the
    workflow's)."""
    from .steps import artifact  # the steps (an artifact's download, the override's build, the
    from .steps.runtime import made_again  # installers): only when a runtime is made again
    settings = dict(finding.settings)
    spec, manifest = settings.pop("artifact_spec", None), settings["artifact_manifest"]
    if not Path(manifest).exists():
        if spec is None or source(spec["source"]).built:
            raise RuntimeError(f"its artifact {manifest} is gone too, and a docker build makes it: "
                               "`snakemake --until docker_build` first")
        artifact(settings["sources"], spec, manifest)
    made_again(finding.path, settings, f"{finding.state}: {finding.why}")
