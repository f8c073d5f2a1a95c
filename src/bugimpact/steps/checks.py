"""Checks around the steps: preflight before builds, and what failed, at the end."""
import logging
import os
from pathlib import Path

from .. import preflight as checks
from ..io import InputError, read_csv, write_text

log = logging.getLogger("bugimpact")


def preflight(config, out=None, nvidia_smi=None, builds_only=False):
    """Everything checkable in seconds before builds start; raises when a check fails, after
    logging the table. The workflow's builds wait for this job, which fails only for the checks
    that concern builds (``builds_only``): the other failures are recorded by their own steps.
    A bug that the reach verdicts written so far stop needs no build (the workflow's preflight
    waits for those that can stop one)."""
    from ..config import SHEET_SCHEMA  # jsonschema and yaml: every step job imports this module
    from ..plan import Plan  # jsonschema and yaml: every step job imports this module
    plan = Plan(config, SHEET_SCHEMA)
    results = checks.run(config, plan, Path(nvidia_smi).read_text() if nvidia_smi else None,
                         gated=plan.gated_bugs())
    text = checks.table(results)
    log.info("preflight:\n%s", text)
    bad = checks.failed(results, builds_only)
    if bad:
        raise InputError("preflight", f"{len(bad)} check(s) failed, so no build starts:\n"
                         f"{checks.table(bad)}")
    if out:
        write_text(out, text)
    return results


def failures_at_end(summary_csv, builds_csv):
    """Lines for the terminal when the workflow ends: every artifact that could not be made and
    every bug with failed runs; empty when nothing failed."""
    lines = []
    if Path(builds_csv).exists():
        lines += [f"  artifact for {r['bug']} ({r['arm']}): {r['failure_class']}: "
                  f"{(r['log_tail'] or '').strip().splitlines()[-1][:200] if r['log_tail'] else ''}"
                  for r in read_csv(builds_csv)[1] if r["status"] == "failed"]
    rows = read_csv(summary_csv)[1] if Path(summary_csv).exists() else []
    lines += [f"  {r['name']}" for r in rows if r["section"] == "failed"]
    contradicted = [f"  {r['name']}" for r in rows if r["section"] == "contradiction"]
    return ((["bugimpact: these failed (recorded; their bugs are incomplete, the rest of the study "
              "is written):"] + lines) if lines else []) + (
        ["bugimpact: reach contradicted by what ran (a defect of reach, never a footnote; verdicts.csv, "
         "column contradiction):"] + contradicted if contradicted else [])


def unmade_targets(asked, touch, rule_names, default_targets, exists=os.path.exists):
    """The targets of a run Snakemake ended as done that are not there: it can drop jobs when it
    updates its DAG after a checkpoint and then end with success (a run of this workflow ended
    "15 of 15 steps (100%) done", 32 jobs short, the preflight among them: snakemake#823's kind).
    ``asked``: the run's DAG settings (Snakemake's ``workflow.dag_settings``): its targets (none:
    the default rule's, ``default_targets``; the rule ``all`` stands for those too, other rule
    names are not checked). A run told to make less (--until, --omit-from, --batch,
    --allowed-rules, a cluster job's --target-jobs, --touch) is not checked."""
    if (asked.until or asked.omit_from or asked.batch or asked.allowed_rules or asked.target_jobs
            or touch):
        return []
    files = [t for t in asked.targets if t not in rule_names]
    if not asked.targets or "all" in asked.targets:
        files += list(default_targets)
    return [f for f in dict.fromkeys(files) if not exists(f)]
