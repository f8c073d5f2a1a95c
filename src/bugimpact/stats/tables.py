"""Per-bug statistics files, and the study-wide tables: Table IV, verdicts, summary.

``results/<study>/stats/<bug>/<key>.csv`` corrects over that bug's own metrics, so one bug can be (re)computed
alone; ``pvalues.csv`` and ``verdicts.csv`` correct over the study's family and are the
authoritative verdicts. The family is every metric of every bug actually tested: a bug decided
without a test (not triggered, identical runs, incomplete) adds no p = 1 rows that would make the
correction stricter for the others.
"""
import math

import numpy as np

from ..io import read_json, write_csv, write_json
from ..reach.run import summary_line
from .analysis import METRIC_COLUMNS, RANK_EFFICIENCY, analyse_bug, finite
from .effects import adjust, detectable_d, hodges_lehmann
from .exact import counted_record
from .verdicts import decided_without_test, verdict

VERDICTS = ("impact", "diverges", "no evidence of impact", "not triggered", "not triggered on cpu", "not exercised",
            "identical runs", "not reached", "not reached on cpu", "incomplete")
VERDICT_COLUMNS = ("bug", "row", "kind", "label", "verdict", "effect_metric", "effect",
                   "effect_low", "effect_high", "effect_level", "min_adjusted_p", "mde", "mde_alpha",
                   "reason", "scope", "reach", "reach_detail", "contradiction",
                   "primary_test", "pairs", "identical_pairs", "first_divergence_epoch",
                   "n_buggy", "n_corrected", "skipped", "stopped_at_stage", "runs_saved", "failed")


def reach_columns(reach, verdict=""):
    """The reach verdict of a bug and what it rests on, for verdicts.csv: reached without a changed
    bit is explained (what ran where reach said not reached is a ``contradiction``)."""
    if not reach:
        return {"reach": "", "reach_detail": ""}
    line = summary_line(reach)
    detail = line.split(": ", 1)[1] if ": " in line else ""
    if reach.get("scope"):
        detail += f" [{reach['scope']}]"
    if reach.get("verdict") == "reached" and verdict.startswith("not triggered"):
        detail = ("reached, yet no bit changed: the changed code ran without changing a value "
                  "this workload computes (a path for inputs or settings it never has); " + detail)
    return {"reach": reach.get("verdict", ""), "reach_detail": detail}


def contradiction(reach, verdict, checks):
    """Where reach said a fix is not reached while what ran says it was, in words (else ""): an
    override check that counted the workload's calls through the rebuilt code (``verified``), or
    runs that differ. Never a footnote: a column of its own in verdicts.csv, the report's table of
    contradictions, and the end of the workflow's run."""
    if not (reach or {}).get("verdict", "").startswith("not reached"):
        return ""
    said = f"reach said {reach['verdict']}"
    # a check that knows the functions the fix changes holds reach to them: the workload may call
    # other operators of a rebuilt op file (an older record knows only the operators)
    verified = sorted(arm for arm, c in (checks or {}).items() if c.get("outcome") == "verified"
                      and (c.get("changed_calls") or not c.get("changed_functions")))
    if verified:
        check = checks[verified[0]]
        calls = ", ".join(sorted(check.get("changed_calls") or {})[:4] or (check.get("workload_calls") or [])[:4])
        what = "the functions the fix changes" if check.get("changed_calls") else "the rebuilt code"
        return (f"{said}, yet the {verified[0]} arm's override check counted the workload's calls into {what} "
                f"({calls}): a defect of reach's mapping or trace")
    if verdict in ("impact", "no evidence of impact"):
        return f"{said}, yet the runs differ: a defect of reach's mapping or trace"
    return ""


def _tested(family):
    return int(np.sum(~np.isnan(np.asarray(family, float))))


def family_pvalues(items, tags):
    """The primary p of every metric of every tested bug, NaN for bugs decided without a test
    (the NaNs pass through the adjustment untouched)."""
    out = []
    for rows, info in items:
        tested = decided_without_test(info, tags.get(info["bug"], "")) is None
        out += [r["primary_p"] if tested else float("nan") for r in rows]
    return out


def _apply(rows, bug_info, alpha, min_effect, adjusted, tags="", family=1, power=0.8):
    """Fill the verdict of one bug from its adjusted p-values. ``family``: the tested p-values the
    correction ran over. The MDE and the effect's interval are restated at alpha / family, the level
    Holm guarantees every one of them (its strictest step): the MDE names an effect the verdict
    would detect, and the intervals hold together over the family (Bonferroni)."""
    level = alpha / max(1, family)
    for row, p in zip(rows, adjusted):
        row["adjusted_p"] = float(p)
        _restate_mde(row, bug_info, level, power)
        _restate_interval(row, bug_info, level)
    label, reason = verdict(bug_info, rows, alpha, min_effect, tags)
    for row in rows:
        row.update({k: bug_info[k] for k in ("pairs", "identical_pairs", "first_divergence_epoch",
                                             "failed", "skipped", "seed_policy")})
        row.update(verdict=label, reason=reason)
    return label, reason


def bug_stats(bug, record_paths, stats_cfg, design, outputs, gates=None):
    """One bug's statistics, written to ``outputs`` (its CSV and its JSON). ``design``: how its
    runs were planned: ``runs`` per arm, ``seed_policy``, and ``sequential`` (the analysis's
    options, or None). ``gates``: what decided its runs, each optional: ``tags`` (its sheet
    tags), ``arms`` (its arms gate, steps.arms: a bug whose arms could not be made has no runs
    and is incomplete for that one reason; a one-fix arm's description joins the scope),
    ``early`` (the early decision: when it stopped the bug, the runs after it were never made)."""
    gates = gates or {}
    tags, arms, early = gates.get("tags", ""), gates.get("arms"), gates.get("early")
    required_runs = design["runs"]
    records = [counted_record(p) for p in record_paths]
    rows, info = analyse_bug(bug, records, stats_cfg["metrics"], required_runs, design["seed_policy"],
                             stats_cfg["alpha"], stats_cfg["power"], design.get("sequential"))
    if early and early.get("decision") == "not_triggered":
        info["skipped"] += 2 * max(0, required_runs - early["runs"])
    if arms:
        info["unavailable"] = arms["reason"] if not arms["runnable"] else ""
        info["gated"] = arms.get("gated", "")
        info["reach"] = arms.get("reach") or {}
        info["override_checks"] = arms.get("override_checks") or {}
        info["not_exercised"] = not_exercised(info["override_checks"])
        described = [f"{arm}: {text}" for arm, text in sorted(arms["arms"].items()) if text]
        if described and info.get("scope"):
            info["scope"]["builds"] = "; ".join(described) + f" ({info['scope']['builds']})"
    family = family_pvalues([(rows, info)], {bug: tags})
    adjusted = adjust(family, "holm")
    _apply(rows, info, stats_cfg["alpha"], stats_cfg["min_effect"], adjusted, tags,
           _tested(family), stats_cfg["power"])
    out_csv, out_json = outputs
    write_csv(out_csv, rows, METRIC_COLUMNS)
    write_json(out_json, {"info": info, "rows": rows})
    return rows


def not_exercised(checks):
    """Why a compiled fix's arms were the release for this workload (their override checks'
    outcome ``not exercised``, none ``verified``), or ""."""
    outcomes = {arm: c.get("outcome") for arm, c in checks.items()}
    if not outcomes or "verified" in outcomes.values() or "not exercised" not in outcomes.values():
        return ""
    arm = next(a for a, o in sorted(outcomes.items()) if o == "not exercised")
    return f"the {arm} arm's override check: {checks[arm].get('reason') or 'not exercised'}"


CHECK_COLUMNS = ("bug", "arm", "outcome", "route", "faithful_identical", "workload_calls", "changed_calls",
                 "canary_entries", "arm_identical", "diverged", "reason", "source")


def check_rows(study, loaded):
    """One row per arm a compiled fix's override check judged: its outcome and figures, and where
    the rebuilt files came from (a tag, a commit, or a reconstruction)."""
    return [{"bug": f"{study}-{item['info']['bug']}", "arm": arm,
             **{k: (", ".join(v) if isinstance(v, list) else
                    "; ".join(f"{b}: {w}" for b, w in v.items()) if isinstance(v, dict) else v)
                for k, v in check.items() if k in CHECK_COLUMNS}}
            for item in loaded for arm, check in sorted((item["info"].get("override_checks") or {}).items())]


def study_tables(bug_jsons, bugs, study, stats_cfg, funnel_rows, out_pvalues, out_verdicts,
                 out_summary, out_checks=None):
    """Adjust over the tested bugs x metrics, then write Table IV, the verdicts, the summary and
    the override checks of compiled fixes' arms (``out_checks``)."""
    loaded = [read_json(p) for p in bug_jsons]
    tags = {b: spec.get("tags", "") for b, spec in bugs.items()}
    family = family_pvalues([(i["rows"], i["info"]) for i in loaded], tags)
    adjusted = adjust(family, stats_cfg["correction"])
    offset, table, verdicts = 0, [], []
    for item in loaded:
        rows, info = item["rows"], item["info"]
        label, reason = _apply(rows, info, stats_cfg["alpha"], stats_cfg["min_effect"],
                               adjusted[offset:offset + len(rows)], tags.get(info["bug"], ""),
                               _tested(family), stats_cfg["power"])
        offset += len(rows)
        bug = info["bug"]
        name = f"{study}-{bug}"
        entry = {"bug": name}
        for row in rows:
            entry[row["metric"]] = row["mwu_p"]
            entry[f"{row['metric']}_wilcoxon"] = row["wilcoxon_p"]
            entry[f"{row['metric']}_adjusted"] = row["adjusted_p"]
            entry[f"{row['metric']}_a12"] = row["a12"]
        entry.update(verdict=label, n_buggy=rows[0]["n_buggy"] if rows else 0,
                     n_corrected=rows[0]["n_corrected"] if rows else 0)
        table.append(entry)
        finite = [r["adjusted_p"] for r in rows if not math.isnan(r["adjusted_p"])]
        # bugs decided without a test show no effect or MDE: nothing was estimated for them
        tested = label in ("impact", "no evidence of impact")
        lead = _lead_row(rows, label, stats_cfg["alpha"], stats_cfg["min_effect"]) if tested else {}
        sc = info.get("scope") or {}
        verdicts.append({"bug": bug, "row": name, "kind": bugs.get(bug, {}).get("kind", ""),
                         "label": bugs.get(bug, {}).get("label", ""), "verdict": label,
                         "effect_metric": lead.get("metric", ""),
                         **{k: lead.get(k, "") for k in ("effect", "effect_low", "effect_high",
                                                         "effect_level", "mde", "mde_alpha")},
                         "reason": reason, "scope": (f"{sc['device']}; {sc['builds']}; "
                                                     f"{sc['seed_pairs']} seed pairs") if sc else "",
                         **reach_columns(info.get("reach"), label),
                         "contradiction": contradiction(info.get("reach"), label, info.get("override_checks")),
                         "primary_test": rows[0]["primary_test"] if rows else "",
                         "min_adjusted_p": min(finite) if finite else "",
                         "pairs": info["pairs"], "identical_pairs": info["identical_pairs"],
                         "first_divergence_epoch": info["first_divergence_epoch"],
                         "n_buggy": info["n_ok"]["buggy"], "n_corrected": info["n_ok"]["corrected"],
                         "skipped": info["skipped"], "failed": info["failed"],
                         "stopped_at_stage": _stage(info.get("sequential")),
                         "runs_saved": (info.get("sequential") or {}).get("runs_saved", "")})
    metrics = stats_cfg["metrics"]
    columns = ["bug"] + list(metrics) + [f"{m}_{s}" for s in ("wilcoxon", "adjusted", "a12")
                                         for m in metrics] + ["verdict", "n_buggy", "n_corrected"]
    write_csv(out_pvalues, table, columns)
    write_csv(out_verdicts, verdicts, VERDICT_COLUMNS)
    summary = [{"section": "funnel", "name": r["stage"], "count": r["count"]} for r in funnel_rows]
    counts = {v: 0 for v in VERDICTS}
    for v in verdicts:
        counts[v["verdict"]] += 1
    summary += [{"section": "verdict", "name": k, "count": c} for k, c in counts.items()]
    summary.append({"section": "runs", "name": "skipped_by_early_decision",
                    "count": sum(v["skipped"] for v in verdicts)})
    summary.append({"section": "runs", "name": "saved_by_sequential_design",
                    "count": sum(v["runs_saved"] or 0 for v in verdicts)})
    summary.append({"section": "runs", "name": "failed",
                    "count": sum(len(v["failed"].split("; ")) for v in verdicts if v["failed"])})
    # what failed, bug by bug: the terminal prints these rows at the end of the workflow
    summary += [{"section": "failed", "name": f"{v['bug']}: {v['failed'][:300]}",
                 "count": len(v["failed"].split("; "))} for v in verdicts if v["failed"]]
    summary += [{"section": "contradiction", "name": f"{v['bug']}: {v['contradiction']}", "count": 1}
                for v in verdicts if v["contradiction"]]
    write_csv(out_summary, summary, ("section", "name", "count"))
    if out_checks:
        write_csv(out_checks, check_rows(study, loaded), CHECK_COLUMNS)
    return table, verdicts, summary


def _restate_mde(row, bug_info, level, power):
    """The row's MDE at ``level`` (its spread unchanged), and that level, in ``mde_alpha``."""
    if row.get("mde_alpha") == level or not finite(row.get("mde_d")):
        row["mde_alpha"] = level
        return
    paired = row.get("wilcoxon_method", "not paired") != "not paired"
    d = (detectable_d(bug_info["pairs"], None, level, power) if paired
         else detectable_d(row["n_buggy"], row["n_corrected"], level, power)) / RANK_EFFICIENCY
    spread = row["mde"] / row["mde_d"] if row["mde_d"] else math.nan
    row.update(mde_d=d, mde=d * spread, mde_alpha=level)


def _restate_interval(row, bug_info, level):
    """The Hodges-Lehmann interval at 1 - ``level``, on the values the row was computed from. After
    a group-sequential stop, the monitored metric's estimate and interval are those of the stopping
    look (Jennison and Turnbull): the Hodges-Lehmann shift of the first n_k pairs scaled to the
    median-unbiased drift of stagewise ordering (the naive one exaggerates after an early stop),
    and the repeated confidence interval, at the nominal level of that look's boundary,
    1 - 2 * sf(c_k), which covers with at least 1 - alpha / family whenever the design stopped."""
    from scipy.stats import norm  # scipy.stats: 0.2 s to import, only to restate an interval
    metric = row["metric"]
    pairs = None
    if row.get("wilcoxon_method", "not paired") != "not paired":
        pairs = (bug_info.get("paired_values") or {}).get(metric)
    look = bug_info.get("sequential")
    if pairs and look and look["decision"] in ("impact", "futility") \
            and row["primary_test"].startswith("group-sequential"):
        n, nominal = look["pairs"], 2 * float(norm.sf(look["bound"]))
        estimate = hodges_lehmann(pairs[0][:n], pairs[1][:n], True, 1 - nominal)
        shrunk = estimate[0] * look.get("estimate_shrink", 1.0)
        estimate = (shrunk, *estimate[1:])
        how = (f"median-unbiased (stagewise ordering) estimate and repeated confidence interval "
               f"of stage {look['stage']}")
    elif pairs:
        estimate = hodges_lehmann(pairs[0], pairs[1], True, 1 - level)
        how = "simultaneous over the family (Bonferroni)"
    elif (bug_info.get("values") or {}).get(metric):
        values = bug_info["values"][metric]
        estimate = hodges_lehmann(values["buggy"], values["corrected"], False, 1 - level)
        how = "simultaneous over the family (Bonferroni)"
    else:
        return
    if any(math.isnan(v) for v in estimate):
        return
    row.update(effect=estimate[0], effect_low=estimate[1], effect_high=estimate[2],
               effect_level=estimate[3],
               effect_method=f"{row['effect_method'].split(';')[0]}; {how}")


def _stage(look):
    if not look:
        return ""
    return f"{look['stage']} of {look['stages']} ({look['pairs']} pairs, {look['decision']})"


def _lead_row(rows, label, alpha, min_effect):
    """The metric a one-line summary shows: an impact's first significant metric in the configured
    order (accuracy first by default), else the first configured metric."""
    if label == "impact":
        return next(r for r in rows if not math.isnan(r["adjusted_p"]) and r["adjusted_p"] < alpha
                    and abs(r["effect"]) > min_effect)
    return rows[0]


def std_values(bug_jsons):
    """Per-experiment standard deviations (the paper's Fig. 3), by metric."""
    out = {}
    for path in bug_jsons:
        for row in read_json(path)["rows"]:
            for arm in ("buggy", "corrected"):
                value = row[f"std_{arm}"]
                if value is not None and not (isinstance(value, float) and np.isnan(value)):
                    out.setdefault(row["metric"], []).append(value)
    return out
