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

Nothing else is touched: a record that is whole stays, and so does everything made from it.
"""
from dataclasses import dataclass
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
REMADE_GATE = "the next run makes it again from its arms' runtimes, and the runs it lets through"
# Snakemake keeps an output whose input was removed: what was made from a stale record, and is
# whole, is kept, and the record is made again when a job needs it
STALE = "made again when a job needs it (what was made from it and is whole is kept)"


@dataclass(frozen=True)
class Finding:
    path: Path
    state: str  # broken, failed, skipped, stale, or refused (a fix a release cannot take)
    why: str
    then: str  # what the next workflow run does once it is removed

    def line(self, done=""):
        """What was done (``done``), or, where nothing was yet, what removing it leads to."""
        then = self.then if done else f"once removed, {self.then}"
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


def of_checks(paths):
    """The broken and failed among these override checks (``overrides.check.read``): made again
    by the next run, from the runtime as it is then (a runtime that failed has its own record)."""
    def failed(check):
        return ("failed", check.get("reason", "")) if check.get("outcome") == "failed" else None
    return _of_made(paths, failed, lambda check: [], REMADE, read=read_check)


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
    """Every finding under the results' folders, of every study."""
    return (of_runs(record_paths(runs) + record_paths(repeats))
            + of_artifacts(sorted(Path(artifacts).glob("*/manifest.json")))
            + of_runtimes(sorted(Path(runtimes).glob("*/*/runtime.json")))
            + of_checks(sorted(Path(checks).glob("*/*.json")))
            + of_gates(sorted(Path(gates).glob("*/*.json"))))


def of_plan(plan, bugs=None):
    """The findings of a study's bugs (``bugs``: these only): their run records and repeats, the
    manifests of their arms' artifacts, those artifacts' runtimes, and the bugs' arms gates."""
    names = sorted(plan.bugs) if bugs is None else list(bugs)
    made = {plan.artifact_of(bug, arm) for bug in names for arm in ARMS}
    made = sorted(made, key=lambda a: a.ident)
    records = [p for bug in names for folder in (plan.bug(bug).runs_folder, plan.bug(bug).repeats_folder)
               for p in record_paths(folder)]
    return (of_runs(records) + of_artifacts([a.manifest for a in made])
            + of_runtimes([a.runtime_json for a in made])
            + of_checks([path for bug in names for path in plan.override_checks(bug).values()])
            + of_gates([plan.bug(bug).arms_gate for bug in names]))


def remove(findings, dry=False):
    """Remove each finding's record, saying each and what the next run does; returns the lines."""
    lines = []
    for finding in findings:
        if not dry:
            Path(finding.path).unlink(missing_ok=True)
        lines.append(finding.line("would remove" if dry else "removed"))
    return lines
