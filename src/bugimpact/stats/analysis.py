"""From run records to per-metric statistics: for each metric, the rank tests (Wilcoxon signed-rank
on paired seeds, Mann-Whitney U otherwise) on exact values, the Hodges-Lehmann effect with its
interval, the effect the design could detect, and the group-sequential look where that design is
on. The verdicts are made from these rows (``verdicts``)."""
import math

import numpy as np

from ..harness.registry import ARMS
from .decisions import by_arm, fingerprint_sequence, first_divergence, scope
from .effects import detectable_d, hodges_lehmann, vargha_delaney_a12
from .exact import metric_values
from .failures import failure_text, grouped
from .rank_tests import is_exact, mann_whitney, wilcoxon
from .sequential import run_design

# Rank tests need sqrt(pi/3) times the t-test's effect under normal noise (asymptotic relative
# efficiency 3/pi), so the detectable effect they report is the t-test's scaled by this factor.
RANK_EFFICIENCY = math.sqrt(3 / math.pi)
METRIC_COLUMNS = (
    "bug", "metric", "n_buggy", "n_corrected",
    "mean_buggy", "mean_corrected", "median_buggy", "median_corrected", "std_buggy",
    "std_corrected", "min_buggy", "min_corrected", "max_buggy", "max_corrected",
    "mwu_u", "mwu_p", "mwu_method", "mwu_min_p", "wilcoxon_stat", "wilcoxon_p", "wilcoxon_method",
    "primary_test", "primary_p", "adjusted_p", "a12", "cliffs_delta", "effect", "effect_low",
    "effect_high", "effect_level", "effect_method", "mde", "mde_d", "mde_alpha", "exact_diff",
    "values_compared",
    "verdict", "reason", "pairs", "identical_pairs", "first_divergence_epoch", "failed", "skipped",
    "seed_policy",
)


def _describe(values):
    if not len(values):
        return dict(mean=math.nan, median=math.nan, std=math.nan, min=math.nan, max=math.nan)
    v = np.asarray(values, float)
    return dict(mean=float(v.mean()), median=float(np.median(v)),
                std=float(v.std(ddof=1)) if len(v) > 1 else math.nan,
                min=float(v.min()), max=float(v.max()))


def sequential_look(sequential, monitored, runs, alpha):
    """Where the group-sequential design stands on the monitored metric of these run pairs, in
    seed order (``monitored``: {arm: {run: value}}; ``sequential``: {design, min_effect,
    futility_power, metric})."""

    def interval(x, y):
        return hodges_lehmann(x, y, paired=True, level=1 - alpha)[1:3]
    return run_design(sequential["design"], [monitored["buggy"][i] for i in runs],
                      [monitored["corrected"][i] for i in runs], sequential.get("min_effect", 0.0),
                      interval, sequential.get("futility_power"))


def interim_look(records, pairs, metrics, sequential, alpha):
    """The look after the first ``pairs`` run pairs, on the runs the final analysis would use
    (``_usable_runs`` over the tested ``metrics``): continue while any of them is not usable (the
    runs are there to be made, or a failed one to be retried), so a look never decides on a run
    the analysis drops."""
    arms, ok, _ = _usable_runs(records, metrics)
    unusable = [_why_unusable(arms[arm].get(i), metrics, f"{arm} run {i}")
                for i in range(pairs) for arm in ARMS if i not in ok[arm]]
    if unusable:
        return {"decision": "continue", "runs": pairs, "reason": "; ".join(unusable)}
    look = sequential_look(sequential, exact_by_run(ok, sequential["metric"]), range(pairs), alpha)
    return dict(look, runs=pairs, metric=sequential["metric"])


def _why_unusable(record, metrics, name):
    if record is None:
        return f"{name} has no record"
    if record["status"] != "ok":
        return f"{name} {'failed' if record['status'] == 'failed' else 'was skipped'}"
    bad = _not_numbers(record, metrics)
    return f"{' and '.join(bad)} {'is' if len(bad) == 1 else 'are'} not a finite number in {name}"


def analyse_bug(bug, records, metrics, required_runs, seed_policy, alpha=0.05, power=0.8,
                sequential=None):
    """Per-metric rows (verdict fields not yet filled: they need the adjusted p-values).

    ``sequential``: {design, min_effect, futility_power, metric} when the group-sequential design
    is on; its ``metric`` is then the one monitored and tested, the others are reported only."""
    arms, ok, failed = _usable_runs(records, metrics)
    skipped = sum(1 for arm in ARMS for r in arms[arm].values() if r["status"] == "skipped")
    common = sorted(set(ok["buggy"]) & set(ok["corrected"]))
    divergence = [first_divergence(ok["buggy"][i], ok["corrected"][i]) for i in common]
    first_div = min((d for d in divergence if d is not None), default=None)
    within_identical = all(
        len(ok[arm]) >= 2 and len({tuple(fingerprint_sequence(r)) for r in ok[arm].values()}) == 1
        for arm in ARMS)
    paired = seed_policy == "paired" and len(common) >= 2
    exact = {metric: exact_by_run(ok, metric) for metric in metrics}  # what the tests compare
    look = None
    if sequential and paired:
        look = sequential_look(sequential, exact[sequential["metric"]], common, alpha)
        if look and look["decision"] in ("impact", "futility"):
            required_runs = look["pairs"]  # the bug stopped there: the later runs were skipped
            look["runs_saved"] = 2 * (sequential["design"].stages[-1] - look["pairs"])
            look["estimate_shrink"] = _stop_shrink(sequential["design"], look)
    bug_info = {
        "bug": bug, "pairs": len(common), "identical_pairs": sum(1 for d in divergence if d is None),
        "first_divergence_epoch": "" if first_div is None else first_div,
        "failed": "; ".join(failed), "skipped": skipped, "seed_policy": seed_policy,
        "n_ok": {arm: len(ok[arm]) for arm in ARMS}, "within_identical": within_identical,
        "n_diverged": {arm: sum(1 for r in arms[arm].values() if r.get("failure_class") == "diverged")
                       for arm in ARMS},
        "required_runs": required_runs, "values": {}, "scope": scope(ok, common),
        "sequential": look, "paired_values": {},
    }
    rows = []
    for metric in metrics:
        values = {arm: [ok[arm][i]["metrics"][metric] for i in sorted(ok[arm])] for arm in ARMS}
        bug_info["values"][metric] = values
        by_run = exact[metric]
        pairs = ([by_run["buggy"][i] for i in common], [by_run["corrected"][i] for i in common])
        bug_info["paired_values"][metric] = [[float(v) for v in side] for side in pairs]  # seed order
        row = _metric_row(bug, metric, values, [[by_run[arm][i] for i in sorted(ok[arm])] for arm in ARMS],
                          pairs if paired else None, alpha, power)
        if paired and sequential:  # the monitored metric's stagewise p; the others are reported only
            first = metric == sequential["metric"] and look is not None
            row.update(primary_test=(f"group-sequential wilcoxon ({sequential['design'].shape}, "
                                     f"stage {look['stage']} of {look['stages']})") if first
                       else "reported only (sequential design)",
                       primary_p=look["p"] if first else math.nan)
        row["exact_diff"] = (row["mean_buggy"] - row["mean_corrected"]) if within_identical else math.nan
        rows.append(row)
    return rows, bug_info


def _usable_runs(records, metrics):
    """The records by arm, the finished ones whose metrics are all numbers, and why the others
    are not used: a failed run, or a metric that is not a number (a failed measurement, reported
    and never fed to a test)."""
    arms = by_arm(records)
    ok = {arm: {i: r for i, r in arms[arm].items() if r["status"] == "ok"} for arm in ARMS}
    failed = grouped([(arm, i, failure_text(r))
                       for arm in ARMS for i, r in sorted(arms[arm].items()) if r["status"] == "failed"])
    for arm in ARMS:
        for i, r in sorted(ok[arm].items()):
            bad = _not_numbers(r, metrics)
            if bad:
                failed.append(f"{arm} run {i}: {', '.join(bad)} is not a number "
                              f"({r['metrics'].get(bad[0])!r}): a failed measurement")
                del ok[arm][i]
    return arms, ok, failed


def _not_numbers(record, metrics):
    """The metrics of a finished record that are not finite numbers (failed measurements)."""
    return [m for m in metrics if not finite(record["metrics"].get(m))]


def _metric_row(bug, metric, values, exact, pairs, alpha, power):
    """One metric's tests and effect. ``values``: each arm's metrics (floats, for the description);
    ``exact``: the same runs as the tests compare them; ``pairs``: (buggy, corrected) by seed when
    the runs are paired, else None. The effect is the one the primary test is about: the paired
    shift for paired seeds, with the MDE at ``alpha`` and ``power``."""
    row = {"bug": bug, "metric": metric, "n_buggy": len(values["buggy"]),
           "n_corrected": len(values["corrected"])}
    for arm in ARMS:
        for stat, value in _describe(values[arm]).items():
            row[f"{stat}_{arm}"] = value
    xb, xc = exact
    mwu = mann_whitney(xb, xc)
    row.update(mwu_u=mwu.statistic, mwu_p=mwu.p_value, mwu_method=mwu.method, mwu_min_p=mwu.min_p)
    row["values_compared"] = "exact counts" if is_exact((pairs[0] + pairs[1]) if pairs and pairs[0]
                                                        else xb + xc) else "floats"
    a12 = vargha_delaney_a12(xb, xc)
    row.update(a12=a12, cliffs_delta=2 * a12 - 1)
    if pairs:
        pb, pc = pairs
        wil = wilcoxon(pb, pc)
        row.update(wilcoxon_stat=wil.statistic, wilcoxon_p=wil.p_value, wilcoxon_method=wil.method,
                   primary_test="wilcoxon signed-rank", primary_p=wil.p_value)
        effect = hodges_lehmann(pb, pc, paired=True, level=1 - alpha)
        spread = float(np.std(np.subtract(np.asarray(pb, float), np.asarray(pc, float)), ddof=1))
        d = detectable_d(len(pb), None, alpha, power) / RANK_EFFICIENCY
    else:
        row.update(wilcoxon_stat=math.nan, wilcoxon_p=math.nan, wilcoxon_method="not paired",
                   primary_test="mann-whitney u", primary_p=mwu.p_value)
        effect = hodges_lehmann(xb, xc, paired=False, level=1 - alpha)
        n1, n2 = len(values["buggy"]), len(values["corrected"])
        enough = n1 > 1 and n2 > 1
        spread = math.sqrt(((n1 - 1) * row["std_buggy"] ** 2 + (n2 - 1) * row["std_corrected"] ** 2)
                           / (n1 + n2 - 2)) if enough else math.nan
        d = detectable_d(n1, n2, alpha, power) / RANK_EFFICIENCY if enough else math.nan
    row.update(effect=effect[0], effect_low=effect[1], effect_high=effect[2], effect_level=effect[3],
               effect_method="Hodges-Lehmann " + ("paired shift" if pairs else "shift"),
               mde_d=d, mde=d * spread if not math.isnan(spread) else math.nan, mde_alpha=alpha)
    return row


def _stop_shrink(design, look):
    """How much a stop's naive estimate shrinks to the median-unbiased one (stagewise ordering):
    theta_hat * sqrt(t_k) / z_k, the ratio of the two drifts on the z scale, applied to the
    Hodges-Lehmann shift (1 where z is 0)."""
    k, z = look["stage"] - 1, look["z"]
    if not z:
        return 1.0
    return design.median_unbiased(k, z) * math.sqrt(design.fractions[k]) / z


def exact_by_run(ok, metric):
    """{arm: {run: value}} of one metric: exact Fractions from the records' counts where every
    record has them (``exact.metric_values``), else the recorded floats."""
    keys = [(arm, i) for arm in ARMS for i in sorted(ok[arm])]
    values = metric_values([ok[arm][i] for arm, i in keys], metric)
    out = {arm: {} for arm in ARMS}
    for (arm, i), value in zip(keys, values):
        out[arm][i] = value
    return out


def finite(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
