"""From run records to per-metric statistics and a verdict per bug.

Verdicts, each with its reason:
- ``not triggered``: every run pair (same run index, both arms) has identical fingerprints, so the
  fix changed nothing this workload computes; proven without statistics. Also the early decision.
- ``incomplete``: fewer finished runs than required; the failed runs are named with their error.
- ``identical runs``: runs within each arm are bit-identical (e.g. the paper's fixed seed), so rank
  tests are degenerate; the exact difference between the arms is reported instead.
- ``impact``: a metric's adjusted p is below alpha and its median difference reaches min_effect.
- ``no evidence of impact``: otherwise, with the effect this design could have detected.
"""
import math

import numpy as np

from .effects import detectable_d, median_difference_ci, vargha_delaney_a12
from .rank_tests import mann_whitney, wilcoxon

ARMS = ("buggy", "corrected")
# Rank tests need sqrt(pi/3) times the t-test's effect under normal noise (asymptotic relative
# efficiency 3/pi), so the detectable effect they report is the t-test's scaled by this factor.
RANK_EFFICIENCY = math.sqrt(3 / math.pi)
METRIC_COLUMNS = (
    "bug", "metric", "n_buggy", "n_corrected",
    "mean_buggy", "mean_corrected", "median_buggy", "median_corrected", "std_buggy",
    "std_corrected", "min_buggy", "min_corrected", "max_buggy", "max_corrected",
    "mwu_u", "mwu_p", "mwu_method", "mwu_min_p", "wilcoxon_stat", "wilcoxon_p", "wilcoxon_method",
    "primary_test", "primary_p", "adjusted_p", "a12", "cliffs_delta", "median_diff",
    "median_diff_ci_low", "median_diff_ci_high", "mde", "mde_d", "exact_diff",
    "verdict", "reason", "pairs", "identical_pairs", "first_divergence_epoch", "failed", "skipped",
    "seed_policy",
)


def by_arm(records):
    """{arm: {run index: record}} with every status kept."""
    out = {arm: {} for arm in ARMS}
    for rec in records:
        out[rec["spec"]["arm"]][int(rec["spec"]["run"])] = rec
    return out


def fingerprint_sequence(record):
    fp = record["fingerprints"]
    return [fp["init"]] + list(fp["epochs"]) + [fp["predictions"]]


def first_divergence(a, b):
    """Epoch at which two runs first differ: 0 = at initialisation, e = after epoch e, or None."""
    sa, sb = fingerprint_sequence(a), fingerprint_sequence(b)
    for index, (x, y) in enumerate(zip(sa, sb)):
        if x != y:
            return min(index, len(sa) - 2)
    return None


def deterministic_runtime(record):
    env = record.get("environment", {})
    flags = env.get("determinism", {})
    return not record.get("nondeterministic_ops") and flags.get("cudnn_deterministic", False)


def early_decision(records, k):
    """After the first k paired runs: identical fingerprints run for run on a deterministic runtime
    means the bug is not triggered and the remaining runs can be skipped."""
    arms = by_arm(records)
    pairs = [(arms["buggy"].get(i), arms["corrected"].get(i)) for i in range(k)]
    if any(a is None or b is None or a["status"] != "ok" or b["status"] != "ok" for a, b in pairs):
        return {"decision": "continue", "runs": k, "reason": "a run of the first k did not finish"}
    if not all(deterministic_runtime(r) for pair in pairs for r in pair):
        return {"decision": "continue", "runs": k,
                "reason": "the runtime reported non-deterministic operations"}
    diverged = [first_divergence(a, b) for a, b in pairs]
    if all(d is None for d in diverged):
        return {"decision": "not_triggered", "runs": k,
                "reason": f"fingerprints identical in all {k} run pairs (parameters at every epoch "
                          "and test predictions); remaining runs skipped"}
    return {"decision": "continue", "runs": k,
            "reason": f"arms diverge from epoch {min(d for d in diverged if d is not None)}"}


def _describe(values):
    if not len(values):
        return dict(mean=math.nan, median=math.nan, std=math.nan, min=math.nan, max=math.nan)
    v = np.asarray(values, float)
    return dict(mean=float(v.mean()), median=float(np.median(v)),
                std=float(v.std(ddof=1)) if len(v) > 1 else math.nan,
                min=float(v.min()), max=float(v.max()))


def analyse_bug(bug, records, metrics, required_runs, seed_policy, alpha=0.05, power=0.8,
                bootstrap=2000):
    """Per-metric rows (verdict fields not yet filled: they need the adjusted p-values)."""
    arms = by_arm(records)
    ok = {arm: {i: r for i, r in arms[arm].items() if r["status"] == "ok"} for arm in ARMS}
    failed = [f"{arm} run {i}: exit {r.get('exit_codes')}: {_last_line(r.get('log_tail', ''))}"
              for arm in ARMS for i, r in sorted(arms[arm].items()) if r["status"] == "failed"]
    for arm in ARMS:  # a NaN metric is a failed measurement: reported, never fed to a test
        for i, r in sorted(ok[arm].items()):
            bad = [m for m in metrics if not _finite(r["metrics"].get(m))]
            if bad:
                failed.append(f"{arm} run {i}: {', '.join(bad)} is not a number "
                              f"({r['metrics'].get(bad[0])!r}): a failed measurement")
                del ok[arm][i]
    skipped = sum(1 for arm in ARMS for r in arms[arm].values() if r["status"] == "skipped")
    common = sorted(set(ok["buggy"]) & set(ok["corrected"]))
    divergence = [first_divergence(ok["buggy"][i], ok["corrected"][i]) for i in common]
    identical_pairs = sum(1 for d in divergence if d is None)
    first_div = min((d for d in divergence if d is not None), default=None)
    within_identical = all(
        len(ok[arm]) >= 2 and len({tuple(fingerprint_sequence(r)) for r in ok[arm].values()}) == 1
        for arm in ARMS)
    paired = seed_policy == "paired" and len(common) >= 2
    bug_info = {
        "bug": bug, "pairs": len(common), "identical_pairs": identical_pairs,
        "first_divergence_epoch": "" if first_div is None else first_div,
        "failed": "; ".join(failed), "skipped": skipped, "seed_policy": seed_policy,
        "n_ok": {arm: len(ok[arm]) for arm in ARMS}, "within_identical": within_identical,
        "required_runs": required_runs, "values": {},
    }
    rows = []
    for metric in metrics:
        values = {arm: [ok[arm][i]["metrics"][metric] for i in sorted(ok[arm])] for arm in ARMS}
        bug_info["values"][metric] = values
        row = {"bug": bug, "metric": metric,
               "n_buggy": len(values["buggy"]), "n_corrected": len(values["corrected"])}
        for arm in ARMS:
            for stat, value in _describe(values[arm]).items():
                row[f"{stat}_{arm}"] = value
        mwu = mann_whitney(values["buggy"], values["corrected"])
        row.update(mwu_u=mwu.statistic, mwu_p=mwu.p_value, mwu_method=mwu.method, mwu_min_p=mwu.min_p)
        pb = [ok["buggy"][i]["metrics"][metric] for i in common]
        pc = [ok["corrected"][i]["metrics"][metric] for i in common]
        if paired:
            wil = wilcoxon(pb, pc)
            row.update(wilcoxon_stat=wil.statistic, wilcoxon_p=wil.p_value,
                       wilcoxon_method=wil.method, primary_test="wilcoxon signed-rank",
                       primary_p=wil.p_value)
        else:
            row.update(wilcoxon_stat=math.nan, wilcoxon_p=math.nan,
                       wilcoxon_method="not paired", primary_test="mann-whitney u",
                       primary_p=mwu.p_value)
        a12 = vargha_delaney_a12(values["buggy"], values["corrected"])
        row.update(a12=a12, cliffs_delta=2 * a12 - 1)
        if paired:
            point, low, high = median_difference_ci(pb, pc, True, bootstrap)
            spread = float(np.std(np.subtract(pb, pc), ddof=1))
            d = detectable_d(len(common), None, alpha, power) / RANK_EFFICIENCY
        else:
            point, low, high = median_difference_ci(values["buggy"], values["corrected"], False,
                                                    bootstrap)
            n1, n2 = len(values["buggy"]), len(values["corrected"])
            pooled = math.sqrt(((n1 - 1) * row["std_buggy"] ** 2 + (n2 - 1) * row["std_corrected"] ** 2)
                               / (n1 + n2 - 2)) if n1 > 1 and n2 > 1 else math.nan
            spread = pooled
            d = detectable_d(n1, n2, alpha, power) / RANK_EFFICIENCY if n1 > 1 and n2 > 1 else math.nan
        row.update(median_diff=point, median_diff_ci_low=low, median_diff_ci_high=high,
                   mde_d=d, mde=d * spread if not math.isnan(spread) else math.nan)
        row["exact_diff"] = (row["mean_buggy"] - row["mean_corrected"]) if within_identical else math.nan
        rows.append(row)
    return rows, bug_info


def _finite(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _last_line(text):
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


def verdict(bug_info, rows, alpha, min_effect):
    """The verdict and its reason, given rows whose ``adjusted_p`` is filled."""
    n_ok, need = bug_info["n_ok"], bug_info["required_runs"]
    skipped = bug_info["skipped"]
    pairs, identical = bug_info["pairs"], bug_info["identical_pairs"]
    if skipped and pairs and identical == pairs and not bug_info["failed"]:
        return "not triggered", (f"early decision: fingerprints identical in all {pairs} run pairs; "
                                 f"{skipped} runs skipped")
    short = {arm: need - n_ok[arm] for arm in ARMS if n_ok[arm] < need}
    if short:
        missing = ", ".join(f"{arm} {n_ok[arm]}/{need}" for arm in short)
        why = bug_info["failed"] or "records missing (not yet run)"
        return "incomplete", f"finished runs {missing}; {why}"
    if pairs and identical == pairs:
        return "not triggered", (f"fingerprints identical in all {pairs} run pairs: the fix changes "
                                 "nothing this workload computes")
    if bug_info["within_identical"]:
        diffs = ", ".join(f"{r['metric']} {r['exact_diff']:+.6g}" for r in rows)
        return "identical runs", f"runs within each arm are bit-identical; exact difference {diffs}"
    hits = [r for r in rows if not math.isnan(r["adjusted_p"]) and r["adjusted_p"] < alpha
            and abs(r["median_diff"]) >= min_effect]
    if hits:
        text = ", ".join(f"{r['metric']} p_adj={r['adjusted_p']:.3g} median diff "
                         f"{r['median_diff']:+.4g}" for r in hits)
        return "impact", text
    best = min(rows, key=lambda r: r["adjusted_p"] if not math.isnan(r["adjusted_p"]) else 2)
    return "no evidence of impact", (
        f"smallest adjusted p {best['adjusted_p']:.3g} ({best['metric']}); this design detects "
        f"about {best['mde']:.3g} ({best['mde_d']:.2f} sd) with the configured power")
