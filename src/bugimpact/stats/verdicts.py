"""A verdict per bug, from its runs' statistics (``analysis``) and the adjusted p-values.

Verdicts, each with its reason. All but the last two need no test, and their bugs are not part of the
multiplicity family (``decided_without_test``):
- ``not triggered``: every run pair (same seed, both arms) has identical fingerprints, so the fix
  changed nothing this workload computes on this device, runtime and build, for those seeds; the
  reason and ``scope`` say which. Also the early decision.
- ``not triggered on cpu``: the same, for a bug the sheet tags ``cuda`` that ran on a CPU, where its
  code never ran: nothing was learned about it.
- ``not exercised``: the same, for a compiled fix whose override check found the workload calling
  none of the operators its rebuilt files implement: for this workload the arm was the release, so
  identical runs say nothing of the fix (``overrides.check``);
- ``not reached`` / ``not reached on cpu``: the reach step found that the workload cannot execute
  what the fix changed, and ``reach.skip`` stopped the bug before any build or run;
- ``diverges``: every run of one arm diverged (a loss or parameter that is not finite: a failed
  measurement, no record) where every run of the other finished: the fix decides whether this
  workload trains at all. No metric is measured, so no rank test; Fisher's exact test on the
  divergence counts gives the reason its one-sided p (1 / C(2n, n) for n runs an arm), and the
  bug stays out of the metrics' multiplicity family.
- ``incomplete``: fewer finished runs than required; the failed runs are named with their error.
- ``identical runs``: runs within each arm are bit-identical (e.g. the paper's fixed seed), so rank
  tests are degenerate; the exact difference between the arms is reported instead.
- ``impact``: a metric's adjusted p is below alpha and its Hodges-Lehmann effect exceeds min_effect
  in size (with the default 0, an effect of exactly zero is never an impact).
- ``no evidence of impact``: otherwise, with the effect this design could have detected.
"""
import math

from ..harness.registry import ARMS
from .decisions import excluded_text, scope_text


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
    if bug_info.get("not_exercised"):
        label = "not exercised"
        caveat = f"; {bug_info['not_exercised']}: nothing was learned about the fix{caveat}"
    proved = f" ({scope_text(sc)})" if sc else ""
    if pairs and identical == pairs:
        caveat = f"; {excluded_text(pairs)}{caveat}"
    if skipped and pairs and identical == pairs and not bug_info["failed"]:
        return label, (f"early decision: fingerprints identical in all {pairs} run pairs{proved}; "
                       f"{skipped} runs skipped{caveat}")
    short = {arm: need - n_ok[arm] for arm in ARMS if n_ok[arm] < need}
    diverged = bug_info.get("n_diverged") or {}
    stopped = [arm for arm in ARMS if diverged.get(arm, 0) >= need]
    if len(stopped) == 1 and all(n_ok[arm] >= need and not diverged.get(arm) for arm in ARMS if arm != stopped[0]):
        other = next(arm for arm in ARMS if arm != stopped[0])
        return "diverges", (f"the {stopped[0]} arm diverged in all {diverged[stopped[0]]} runs, the {other} arm "
                            f"finished all {n_ok[other]}: the fix decides whether this workload trains at all "
                            f"(Fisher's exact test on the divergence counts, one-sided: p = "
                            f"{1 / math.comb(2 * need, need):.3g}); {bug_info['failed'][:300]}")
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
    paired = bug_info.get("paired_values") or {}
    if rows and paired and all(list(buggy) == list(corrected) for buggy, corrected in paired.values()):
        # no test can rank differences that are all zero (every p NaN): the runs say it themselves
        first = bug_info.get("first_divergence_epoch")
        since = {"": "", None: "", 0: " (they differ from initialisation)"}.get(first, f" (they differ from epoch {first})")
        return "no evidence of impact", (
            f"every metric ({', '.join(r['metric'] for r in rows)}) equal in all {bug_info['pairs']} run pairs, "
            f"though no pair's runs are identical{since}: the fix changes values this workload computes, not "
            f"its test-set metrics{stage}")
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
