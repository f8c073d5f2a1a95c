"""Where a study stands, per bug, from the files on disk: its sheet decision, its arms, its runs
(done, needed, skipped by a decision, failed), its verdict, and the command that makes what it
still needs. Read by ``bugimpact status``, the per-bug target and the end of every workflow run."""
from pathlib import Path

from .io import read_csv, read_json
from .records import record_status
from .recovery import of_plan

COLUMNS = ("bug", "sheet", "arms", "runs", "failed", "verdict", "next")
OWN = " *"  # marks a verdict from the bug's own statistics, newer than the study's table


def command(plan, *words):
    """The ``bugimpact`` command line that does ``words`` for this plan's study (its config named
    where it is not the default one)."""
    config = "" if plan.source in ("config.yaml", "") or "," in plan.source else f" --config {plan.source}"
    return f"bugimpact {' '.join(words)}{config}"


def verdicts(study):
    """The study's verdicts by bug (``study``: ``Plan.study``)."""
    path = Path(study.verdicts)
    return {r["bug"]: r for r in read_csv(path)[1]} if path.exists() else {}


def bug_row(plan, bug, verdicts=None):
    """One bug's state. ``runs``: done/needed (needed: as far as the decisions made so far ask;
    ``+N skipped`` when a decision made runs unneeded)."""
    spec = plan.bug(bug).spec
    decision = spec.get("sheet_row", {}).get("decision") or ("control" if spec["kind"] == "control" else "config")
    gate = Path(plan.bug(bug).arms_gate)
    runnable = plan.runnable(bug)
    if runnable is None:
        arms, needed = "not made yet", []
    elif not runnable:
        arms, needed = read_json(gate).get("reason", "cannot run"), []
    else:
        arms, needed = "ready", plan.known(bug)[0]
    states = [(record_status(p) or "broken") if Path(p).exists() else "missing" for p in needed]
    done = states.count("ok")
    failed = len(states) - done - states.count("missing")
    planned = 2 * plan.runs
    runs = f"{done}/{len(needed) if runnable else planned}"
    if runnable and len(needed) < planned and all(s == "ok" for s in states):
        runs += f" (+{planned - len(needed)} skipped)"
    verdict = (_own_verdict(plan, bug, bug in (verdicts or {}))
               or (verdicts or {}).get(bug, {}).get("verdict", ""))
    # a verdict made before one of its records broke or failed (a check, a runtime) no longer stands
    remake = [f for f in of_plan(plan, [bug]) if f.state != "refused"]
    if verdict and remake:
        verdict = f"{verdict} (stale: {len(remake)} of its records to make again)"
    todo = runnable is None or failed or states.count("missing") or not verdict or remake
    return {"bug": bug, "sheet": decision, "arms": arms, "runs": runs, "failed": failed or "",
            "verdict": verdict or "-", "next": command(plan, "run", "--bug", bug) if todo else ""}


def _own_verdict(plan, bug, table_has_it):
    """The verdict of a bug made alone (``bugimpact run --bug``) after the study's table was
    written: its own statistics, before the correction over the study's bugs, marked. (The table
    is made from every bug's statistics, so an up-to-date table is newer than each of them.)"""
    line, table = Path(plan.study.bug_line(bug)), Path(plan.study.verdicts)
    own = Path(plan.bug(bug).stats(plan.study)[0])
    if not line.exists() or not own.exists() or (
            table_has_it and table.exists() and table.stat().st_mtime >= own.stat().st_mtime):
        return ""
    rows = read_json(own).get("rows") or [{}]
    return rows[0].get("verdict", "") + OWN if rows[0].get("verdict") else ""


def rows(plan):
    known = verdicts(plan.study)
    out = [bug_row(plan, bug, known) for bug in sorted(plan.bugs)]
    return out + [{"bug": bug, "sheet": "accept", "arms": f"not run: {why}", "runs": "-",
                   "failed": "", "verdict": "-", "next": f"edit {plan.config['sheet']} or the config"}
                  for bug, why in sorted(plan.cannot_run.items())]


def table(items, width=60):
    """A fixed-width text table; long cells are cut (the CSVs and the report hold them whole)."""
    cells = [[str(row[c]) if len(str(row[c])) <= width else str(row[c])[:width - 3] + "..."
              for c in COLUMNS] for row in items]
    widths = [max(len(c), *(len(r[i]) for r in cells)) if cells else len(c)
              for i, c in enumerate(COLUMNS)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in cells]
    return "\n".join(lines)


def summary(plan):
    """The table, what the sheet still leaves undecided, and where the report is (last)."""
    items = rows(plan)
    report = plan.study.report
    undecided = sum(1 for r in plan.sheet_rows if not r.get("decision"))
    lines = [table(items, width=80)]
    if any(row["verdict"].endswith(OWN) for row in items):
        lines.append("*: from the bug's own statistics; the study's tables and report (with the "
                     "correction over all its bugs) are remade by the next full run (snakemake, or "
                     "bugimpact run report)")
    stopped = [row for row in items if row["arms"] not in ("ready", "not made yet") and len(row["arms"]) > 80]
    if stopped:  # the table cuts a long reason: its cause is at the end, said whole here
        lines.append("why these cannot run:")
        lines += [f"  {row['bug']}: {row['arms']}" for row in stopped]
    found = [f for f in of_plan(plan) if f.state != "refused"]  # a refusal: the bug's arms say it
    if found:
        lines.append(f"{len(found)} record(s) to make again: a plain `snakemake` keeps them; "
                     f"`{command(plan, 'retry-failed')}` removes them (makes a runtime finished runs ran "
                     f"in again where it is) and the next run makes them again "
                     f"(`{command(plan, 'run', '--bug', 'ID')}`: both, for one bug):")
        lines += [f"  {finding.line()}" for finding in found]
    if plan.sheet_missing and not Path(plan.config["sheet"]).exists():  # (a run may have made it since)
        lines.append(plan.sheet_missing)
    if undecided:
        lines.append(f"{undecided} sheet rows undecided: edit {plan.config['sheet']} (decision: "
                     "accept or reject), then run again")
    lines.append(f"report: {report}" if Path(report).exists() else "report: not written yet")
    return "\n".join(lines)
