"""From run records to per-metric statistics and a verdict per bug.

Verdicts, each with its reason. All but the last two need no test, and their bugs are not part of the
multiplicity family (``decided_without_test``):
- ``not triggered``: every run pair (same seed, both arms) has identical fingerprints, so the fix
  changed nothing this workload computes on this device, runtime and build, for those seeds; the
  reason and ``scope`` say which. Also the early decision.
- ``not triggered on cpu``: the same, for a bug the sheet tags ``cuda`` that ran on a CPU, where its
  code never ran: nothing was learned about it.
- ``not reached`` / ``not reached on cpu``: the reach step found that the workload cannot execute
  what the fix changed, and ``reach.skip`` stopped the bug before any build or run;
- ``incomplete``: fewer finished runs than required; the failed runs are named with their error.
- ``identical runs``: runs within each arm are bit-identical (e.g. the paper's fixed seed), so rank
  tests are degenerate; the exact difference between the arms is reported instead.
- ``impact``: a metric's adjusted p is below alpha and its Hodges-Lehmann effect exceeds min_effect
  in size (with the default 0, an effect of exactly zero is never an impact).
- ``no evidence of impact``: otherwise, with the effect this design could have detected.
"""
import math
import signal

import numpy as np

from ..harness.registry import ARMS
from .effects import detectable_d, hodges_lehmann, vargha_delaney_a12
from .exact import metric_values
from .rank_tests import is_exact, mann_whitney, wilcoxon

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
FINGERPRINTED = (("init", "parameters at initialisation"),
                 ("epochs", "parameters after every epoch"),
                 ("losses", "every batch's training loss"),
                 ("logits", "test-set log-probabilities"),
                 ("predictions", "test-set predictions"))


def by_arm(records):
    """{arm: {run index: record}} with every status kept."""
    out = {arm: {} for arm in ARMS}
    for rec in records:
        out[rec["spec"]["arm"]][int(rec["spec"]["run"])] = rec
    return out


def fingerprint_sequence(record):
    """(epoch, digest) in the order the run computed them: 0 is initialisation, e the epoch.
    Records from before losses and logits were fingerprinted simply have fewer entries."""
    fp = record["fingerprints"]
    epochs = list(fp["epochs"])
    losses = fp.get("losses") or [None] * len(epochs)
    out = [(0, fp["init"])]
    for e, (loss, params) in enumerate(zip(losses, epochs), start=1):
        out += [(e, loss), (e, params)]
    last = len(epochs)
    return out + [(last, fp.get("logits")), (last, fp["predictions"])]


def first_divergence(a, b):
    """Epoch at which two runs first differ: 0 = at initialisation, e = during epoch e, or None."""
    for (epoch, x), (_, y) in zip(fingerprint_sequence(a), fingerprint_sequence(b)):
        if x != y:
            return epoch
    return None


def fingerprinted(records):
    """What the fingerprints of these records cover, in words."""
    def present(value):
        return bool(value) and (not isinstance(value, list) or None not in value)
    have = set.intersection(*[{k for k, v in r["fingerprints"].items() if present(v)}
                              for r in records])
    return ", ".join(words for key, words in FINGERPRINTED if key in have)


def deterministic_runtime(record):
    env = record.get("environment", {})
    flags = env.get("determinism", {})
    return not record.get("nondeterministic_ops") and flags.get("cudnn_deterministic", False)


def finished_pairs(records, k):
    """The first k (buggy, corrected) run pairs, or None while any of them is missing, failed or
    skipped: a decision on the first k pairs needs all of them."""
    arms = by_arm(records)
    pairs = [(arms["buggy"].get(i), arms["corrected"].get(i)) for i in range(k)]
    if any(a is None or b is None or a["status"] != "ok" or b["status"] != "ok" for a, b in pairs):
        return None
    return pairs


def early_decision(records, k, repeats=None):
    """After the first k paired runs: identical fingerprints run for run on a deterministic runtime
    means the bug is not triggered and the remaining runs can be skipped.

    ``repeats`` (required on CUDA, given as a list): runs made a second time with the same arm and
    seed. Before torch 1.8 nothing reports a non-deterministic kernel, so a flag proves nothing;
    only a measured, bit-identical repeat does."""
    pairs = finished_pairs(records, k)
    if pairs is None:
        return {"decision": "continue", "runs": k, "reason": "a run of the first k did not finish"}
    arms = by_arm(records)
    if not all(deterministic_runtime(r) for pair in pairs for r in pair):
        return {"decision": "continue", "runs": k,
                "reason": "the runtime reported non-deterministic operations"}
    if repeats is not None:
        for again in repeats:
            spec = again.get("spec", {})
            first = arms.get(spec.get("arm"), {}).get(int(spec.get("run", -1)))
            if again.get("status") != "ok" or first is None:
                return {"decision": "continue", "runs": k, "reason": "the repeat run did not finish"}
            if first_divergence(first, again) is not None:
                return {"decision": "continue", "runs": k, "repeat": "differs",
                        "reason": f"{spec['arm']} run {spec['run']} run twice differs from epoch "
                                  f"{first_divergence(first, again)}: this runtime is not "
                                  "deterministic, so identical fingerprints could be luck"}
    diverged = [first_divergence(a, b) for a, b in pairs]
    if all(d is None for d in diverged):
        checked = "; a repeat of the same arm and seed was bit-identical" if repeats else ""
        return {"decision": "not_triggered", "runs": k, "repeat": "identical" if repeats else "",
                "reason": f"fingerprints identical in all {k} run pairs ("
                          f"{fingerprinted([r for pair in pairs for r in pair])}){checked}; "
                          "remaining runs skipped"}
    return {"decision": "continue", "runs": k,
            "reason": f"arms diverge from epoch {min(d for d in diverged if d is not None)}"}


def scope(ok, common):
    """What identical fingerprints proved: on which device, builds and seeds, and over what."""
    records = [ok[arm][i] for arm in ARMS for i in common]
    envs = [r.get("environment", {}) for r in records]
    devices = sorted({str(e.get("device_name") or e.get("device") or "unknown") for e in envs})
    builds = []
    for arm in ARMS:
        seen = sorted({f"{e.get('torch', '?')} (git {str(e.get('torch_git_version') or '?')[:10]})"
                       for e in (ok[arm][i].get("environment", {}) for i in common)})
        builds.append(f"{arm} torch {', '.join(seen)}")
    return {"device": ", ".join(devices), "builds": "; ".join(builds), "seed_pairs": len(common),
            "fingerprinted": fingerprinted(records) if records else "",
            "cpu_only": all((e.get("device") or "cpu") == "cpu" for e in envs)}


def scope_text(sc):
    return (f"on {sc['device']}; {sc['builds']}; {sc['seed_pairs']} seed pairs; fingerprinted: "
            f"{sc['fingerprinted']}")


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
    from .sequential import run_design

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
    failed = _grouped([(arm, i, failure_text(r))
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


def _grouped(failures):
    """``(arm, run, why)`` as one line per distinct reason: runs that failed alike are named
    together ("buggy runs 0-19, corrected runs 0-19: exit ..."), not repeated."""
    by_reason = {}
    for arm, run, why in failures:
        by_reason.setdefault(why, {}).setdefault(arm, []).append(run)
    lines = []
    for why, arms in by_reason.items():
        named = []
        for arm, runs in arms.items():
            spans, start = [], runs[0]
            for prev, cur in zip(runs, runs[1:] + [None]):
                if cur is None or cur != prev + 1:  # a span ends
                    spans.append(f"{start}" if start == prev else f"{start}-{prev}")
                    start = cur
            named.append(f"{arm} run{'s' if len(runs) > 1 else ''} {', '.join(spans)}")
        lines.append(f"{', '.join(named)}: {why}")
    return lines


def failure_text(record):
    """Why a run failed, in words: the exit (a signal by its name) and the harness's last line
    (the launcher's own bookkeeping lines say nothing of the failure)."""
    codes = record.get("exit_codes")
    code = codes[-1] if isinstance(codes, list) and codes else codes
    how = f"exit {codes}"
    if isinstance(code, int) and code < 0:
        try:
            how = f"killed by {signal.Signals(-code).name} (exit {code})"
        except ValueError:
            pass
    if record.get("failure_class") == "diverged":
        how = "diverged"
    return f"{how}: {_last_line(record.get('log_tail', ''))}"


def _last_line(text):
    lines = [line for line in (text or "").strip().splitlines()
             if line.strip() and not line.startswith(("attempt ", "device "))]
    return lines[-1][:300] if lines else "no output from the harness"


TRIGGER_CONFIDENCE = 0.95


def excluded_rate(pairs, confidence=TRIGGER_CONFIDENCE):
    """The smallest per-run trigger rate that ``pairs`` identical pairs exclude: a trigger firing
    independently in a share x of buggy runs leaves all of them identical with probability
    (1 - x) ** pairs."""
    return 1 - (1 - confidence) ** (1 / pairs)


def pairs_for_rate(rate, confidence=TRIGGER_CONFIDENCE):
    """Identical pairs needed before ``not triggered`` excludes a trigger firing in ``rate`` of runs."""
    return math.ceil(math.log(1 - confidence) / math.log(1 - rate) - 1e-12)


def excluded_text(pairs):
    return (f"a trigger firing in at least {excluded_rate(pairs):.0%} of runs would have shown "
            f"with {TRIGGER_CONFIDENCE:.0%} confidence (rarer, seed-dependent triggers are not "
            f"excluded: set train.early_decision.trigger_rate)")


def _tagged_cuda(tags):
    return "cuda" in {t.strip().lower() for t in str(tags or "").replace(",", ";").split(";")}


def decided_without_test(bug_info, tags=""):
    """The verdict when no p-value can decide it, else None (the bug is then tested, and only
    tested bugs form the multiplicity family)."""
    if bug_info.get("gated"):  # reach found the fix not reached: nothing was built or run
        return bug_info["gated"], bug_info["unavailable"]
    if bug_info.get("unavailable"):  # its arms could not be made: no run was scheduled
        return "incomplete", bug_info["unavailable"]
    n_ok, need = bug_info["n_ok"], bug_info["required_runs"]
    skipped = bug_info["skipped"]
    pairs, identical = bug_info["pairs"], bug_info["identical_pairs"]
    sc = bug_info.get("scope") or {}
    label = "not triggered"
    caveat = ""
    if sc.get("cpu_only") and _tagged_cuda(tags):
        label = "not triggered on cpu"
        caveat = ("; the sheet tags this bug cuda and these runs never ran CUDA code, so nothing "
                  "was learned about it: run it on a GPU")
    proved = f" ({scope_text(sc)})" if sc else ""
    if pairs and identical == pairs:
        caveat = f"; {excluded_text(pairs)}{caveat}"
    if skipped and pairs and identical == pairs and not bug_info["failed"]:
        return label, (f"early decision: fingerprints identical in all {pairs} run pairs{proved}; "
                       f"{skipped} runs skipped{caveat}")
    short = {arm: need - n_ok[arm] for arm in ARMS if n_ok[arm] < need}
    if short:
        missing = ", ".join(f"{arm} {n_ok[arm]}/{need}" for arm in short)
        why = bug_info["failed"] or "records missing (not yet run)"
        return "incomplete", f"finished runs {missing}; {why}"
    if pairs and identical == pairs:
        return label, (f"fingerprints identical in all {pairs} run pairs{proved}: the fix changes "
                       f"nothing this workload computes there{caveat}")
    if bug_info["within_identical"]:
        return "identical runs", "runs within each arm are bit-identical"
    return None


def effect_text(row):
    level = row.get("effect_level")
    stated = f" ({level:.1%} interval)" if isinstance(level, float) and math.isfinite(level) else ""
    return (f"{row['metric']} {row['effect']:+.4g} [{row['effect_low']:+.4g}, "
            f"{row['effect_high']:+.4g}]{stated}")


def verdict(bug_info, rows, alpha, min_effect, tags=""):
    """The verdict and its reason, given rows whose ``adjusted_p`` is filled (NaN for bugs decided
    without a test)."""
    decided = decided_without_test(bug_info, tags)
    if decided and decided[0] == "identical runs":
        diffs = ", ".join(f"{r['metric']} {r['exact_diff']:+.6g}" for r in rows)
        return decided[0], f"{decided[1]}; exact difference {diffs}"
    if decided:
        return decided
    look = bug_info.get("sequential")
    stage = ""
    if look:
        stage = (f"; stage {look['stage']} of {look['stages']} ({look['pairs']} pairs): "
                 f"{look['decision'].replace('_', ' ')}, {look['reason']}")
        if look.get("runs_saved"):
            stage += (f"; {look['runs_saved']} runs saved (the effect is the stop's median-unbiased "
                      f"estimate, its interval the stage's repeated confidence interval)")
    significant = [r for r in rows if not math.isnan(r["adjusted_p"]) and r["adjusted_p"] < alpha]
    hits = [r for r in significant if abs(r["effect"]) > min_effect]
    if hits:
        text = "; ".join(f"{effect_text(r)}, p_adj {r['adjusted_p']:.3g}, MDE {r['mde']:.3g}"
                         for r in hits)
        return "impact", text + stage
    best = min(rows, key=lambda r: r["adjusted_p"] if not math.isnan(r["adjusted_p"]) else 2)
    below = ""
    if significant:
        below = (f"; p_adj below alpha for {', '.join(r['metric'] for r in significant)}, but no "
                 f"effect beyond min_effect {min_effect:g}")
    return "no evidence of impact", (
        f"smallest adjusted p {best['adjusted_p']:.3g} ({effect_text(best)}){below}; this design "
        f"detects about {best['mde']:.3g} ({best['mde_d']:.2f} sd) at alpha "
        f"{best.get('mde_alpha', alpha):.3g} with the configured power{stage}")
