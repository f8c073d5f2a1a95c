"""Statistics against scipy and hand-computed values; the error rates by simulation; each verdict
from records crafted for it."""
import math
import re
from fractions import Fraction

import numpy as np
import pytest
import scipy.stats as st

from bugimpact.stats.analysis import RANK_EFFICIENCY, analyse_bug
from bugimpact.stats.decisions import early_decision, first_divergence
from bugimpact.stats.effects import (
    _power,
    adjust,
    benjamini_hochberg,
    detectable_d,
    hodges_lehmann,
    holm,
    vargha_delaney_a12,
)
from bugimpact.stats.rank_tests import doubled_midranks, mann_whitney, wilcoxon
from bugimpact.stats.sequential import signed_rank_z
from bugimpact.stats.tables import _apply, family_pvalues
from bugimpact.stats.verdicts import verdict


@pytest.mark.parametrize("m,n,seed", [(3, 4, 0), (5, 5, 1), (8, 12, 2), (20, 20, 3), (49, 49, 4),
                                      (7, 30, 5)])
def test_mann_whitney_exact_equals_scipy(m, n, seed):
    rng = np.random.RandomState(seed)
    x, y = rng.normal(size=m), rng.normal(0.4, size=n)
    ours = mann_whitney(x, y)
    ref = st.mannwhitneyu(x, y, alternative="two-sided", method="exact")
    assert ours.method == "exact"
    assert ours.statistic == ref.statistic
    assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-9)
    assert ours.min_p == pytest.approx(2 / math.comb(m + n, m))


@pytest.mark.parametrize("seed", range(5))
def test_mann_whitney_with_ties_equals_scipy_asymptotic(seed):
    rng = np.random.RandomState(seed)
    x, y = np.round(rng.normal(size=25), 1), np.round(rng.normal(0.3, size=31), 1)
    ours = mann_whitney(x, y)
    ref = st.mannwhitneyu(x, y, alternative="two-sided", method="asymptotic")
    assert ours.method.startswith("asymptotic")
    assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-12)


def test_mann_whitney_by_hand():
    # complete separation of 3 vs 3: one arrangement of C(6,3)=20 in each tail
    assert mann_whitney([1, 2, 3], [4, 5, 6]).p_value == pytest.approx(2 / 20)
    # U1 = 1 for x=[1,3], y=[2]: P(U<=... ) two-sided = 1
    assert mann_whitney([1, 3], [2]).p_value == pytest.approx(1.0)
    # 4 vs 4 separated: 2/70
    assert mann_whitney([1, 2, 3, 4], [5, 6, 7, 8]).p_value == pytest.approx(2 / 70)
    assert mann_whitney([0.9] * 5, [0.9] * 5).method.startswith("degenerate")


@pytest.mark.parametrize("n,seed", [(6, 0), (12, 1), (20, 2), (49, 3)])
def test_wilcoxon_exact_equals_scipy(n, seed):
    rng = np.random.RandomState(seed)
    x = rng.normal(size=n)
    y = x + rng.normal(0.2, size=n)
    ours = wilcoxon(x, y)
    ref = st.wilcoxon(x, y, method="exact")
    assert ours.method == "exact"
    assert ours.statistic == ref.statistic and ours.p_value == pytest.approx(ref.pvalue, rel=1e-9)


def test_wilcoxon_ties_and_zeros_beyond_the_exact_limit_equal_scipy_with_correction():
    rng = np.random.RandomState(7)
    x = np.round(rng.normal(size=70), 1)
    y = np.round(x + rng.normal(0.1, 0.3, size=70), 1)
    ours = wilcoxon(x, y)
    d = np.round(x - y, 12)
    ref = st.wilcoxon(d, method="approx", zero_method="wilcox", correction=True)
    assert ours.method.startswith("asymptotic") and ours.p_value == pytest.approx(ref.pvalue, rel=1e-12)


def _enumerated_p(d):
    """Two-sided p by listing all 2^n sign patterns of the non-zero differences' ranks."""
    d = d[d != 0]
    ranks = st.rankdata(np.abs(d))
    observed = min(ranks[d > 0].sum(), ranks[d < 0].sum())
    n, extreme = len(d), 0
    for mask in range(2 ** n):
        plus = sum(ranks[i] for i in range(n) if mask >> i & 1)
        extreme += min(plus, ranks.sum() - plus) <= observed + 1e-9
    return extreme / 2 ** n


@pytest.mark.parametrize("seed", range(8))
def test_wilcoxon_with_ties_and_zeros_is_the_exact_conditional_distribution(seed):
    rng = np.random.RandomState(seed)
    n = rng.randint(4, 13)
    y = np.round(rng.uniform(0.8, 0.95, n), 2)
    x = np.round(y + rng.choice([-0.02, -0.01, 0.0, 0.01, 0.02, 0.03], n), 2)
    ours = wilcoxon(x, y)
    assert ours.p_value == pytest.approx(min(1.0, _enumerated_p(np.round(x - y, 12))), rel=1e-12)


def test_wilcoxon_by_hand():
    # five positive differences: only the all-positive sign pattern (1 of 32) is as extreme
    assert wilcoxon([2, 3, 4, 5, 6], [1, 1, 1, 1, 1]).p_value == pytest.approx(2 / 32)
    assert wilcoxon([1, 2], [1, 2]).method.startswith("degenerate")
    # The case: differences 1, 1, 3, 3, 0, 1. R's default (normal, corrected) gives
    # 0.0533 and the uncorrected normal gave 0.0384, below the design's smallest exact p: 5 non-zero
    # differences, all positive, so exactly 2 of the 32 sign patterns are as extreme.
    result = wilcoxon([1, 1, 3, 3, 0, 1], [0] * 6)
    assert result.p_value == pytest.approx(2 / 32) == result.min_p
    assert result.method == "exact conditional (tied ranks)"


def test_float_rounding_does_not_break_true_ties():
    # 0.82 - 0.81 != 0.83 - 0.82 in floating point, but both are 1 test sample in 100
    assert 0.82 - 0.81 != 0.83 - 0.82
    x, y = [0.82, 0.83, 0.84, 0.85], [0.81, 0.82, 0.83, 0.84]
    tied = wilcoxon(x, y)
    assert tied.p_value == pytest.approx(2 / 16) and tied.method == "exact conditional (tied ranks)"
    assert mann_whitney([0.3 - 0.1], [0.2]).p_value == 1.0  # 0.19999999999999998 ties 0.2
    assert vargha_delaney_a12([0.3 - 0.1], [0.2]) == 0.5
    assert hodges_lehmann(x, y, paired=True)[0] == 0.01


def test_effect_sizes_by_hand():
    assert vargha_delaney_a12([1, 2, 3], [2]) == pytest.approx(0.5)  # (1 + 0.5) / 3
    assert vargha_delaney_a12([3, 4], [1, 2]) == 1.0
    # Walsh averages of 1, 2, 3: 1, 1.5, 2, 2, 2.5, 3 -> median 2; 3 pairs cannot reach 95%: the
    # interval is the whole range, and covers unless all 3 signs agree (1 - 2/8)
    assert hodges_lehmann([1, 2, 3], [0, 0, 0], paired=True) == (2.0, 1.0, 3.0, 0.75)
    # all 2 x 2 differences 1, 2, 2, 3 -> median 2
    assert hodges_lehmann([3, 4], [1, 2], paired=False)[0] == 2.0


def test_holm_and_bh_by_hand_and_against_scipy():
    p = [0.01, 0.02, 0.03, 0.04, 0.05]
    # R: p.adjust(p, "holm") -> 0.05 0.08 0.09 0.09 0.09; p.adjust(p, "BH") -> 0.05 x5
    assert holm(p) == pytest.approx([0.05, 0.08, 0.09, 0.09, 0.09])
    assert benjamini_hochberg(p) == pytest.approx([0.05] * 5)
    q = [0.01, 0.04, 0.02, 0.5, float("nan"), 0.001]
    ok = [v for v in q if not math.isnan(v)]
    assert benjamini_hochberg(q)[~np.isnan(q)] == pytest.approx(st.false_discovery_control(ok))
    assert math.isnan(holm(q)[4])
    assert holm([0.6, 0.7]) == pytest.approx([1.0, 1.0])


def test_detectable_effect_matches_the_methodology():
    assert detectable_d(50, 50) == pytest.approx(0.57, abs=0.01)
    assert detectable_d(50) == pytest.approx(0.41, abs=0.01)
    # Bonferroni over 18 bugs x 4 metrics
    assert detectable_d(50, 50, alpha=0.05 / 72) == pytest.approx(0.87, abs=0.02)


def test_detectable_effect_at_tiny_n_and_alpha():
    # Before: 6.50 for 2 pairs (scipy's noncentral t is NaN there and NaN counted as power 1),
    # and a ValueError at alpha 0.001. R's power.t.test(n=2, type="paired", power=0.8): 11.5499.
    assert detectable_d(2) == pytest.approx(11.54989, rel=1e-6)
    crit = st.t.ppf(1 - 0.05 / 2, 1)
    assert _power(6.50, 1, math.sqrt(2), crit) == pytest.approx(0.53, abs=0.01)
    d = detectable_d(2, 2, alpha=0.001)
    assert math.isfinite(d) and _power(d, 2, 1.0, st.t.ppf(1 - 0.0005, 2)) == pytest.approx(0.8)
    # the Monte Carlo power of the t-test at that effect, as an independent check
    rng = np.random.RandomState(0)
    x = rng.normal(d, 1, size=(200000, 2))
    p = st.ttest_ind(x, rng.normal(0, 1, size=(200000, 2)), axis=1).pvalue
    assert np.mean(p < 0.001) == pytest.approx(0.8, abs=0.005)


@pytest.mark.parametrize("resolution", [None, 1 / 450])
def test_simulated_false_positive_rate_and_power(resolution):
    """Paired runs as the default study makes them: the primary test at alpha 0.05, on continuous
    metrics and on accuracies of a 450-sample test set (ties and zeros)."""
    rng = np.random.RandomState(2024)
    n, sims, alpha, power = 20, 2000, 0.05, 0.8
    design = detectable_d(n, None, alpha, power) / RANK_EFFICIENCY
    quantise = (lambda v: v) if resolution is None else (lambda v: np.round(v / resolution) * resolution)
    null = effect = 0
    for _ in range(sims):
        base = rng.normal(0.98, 0.003, n)
        noise = rng.normal(0, 0.004, n)
        null += wilcoxon(quantise(base + noise), quantise(base)).p_value < alpha
        effect += wilcoxon(quantise(base + noise + design * 0.004), quantise(base)).p_value < alpha
    se = math.sqrt(alpha * (1 - alpha) / sims)
    assert null / sims <= alpha + 3 * se
    assert effect / sims >= power - 3 * math.sqrt(power * (1 - power) / sims)


# Records crafted for each verdict -------------------------------------------------------------

def record(arm, run, acc, fp="x", status="ok", epochs=2, device="cpu"):
    fps = [f"{fp}-e{e}" for e in range(1, epochs + 1)]
    return {"status": status, "spec": {"arm": arm, "run": run},
            "fingerprints": {"init": f"{fp}-init", "epochs": fps, "predictions": f"{fp}-p",
                             "losses": [f"{fp}-l{e}" for e in range(1, epochs + 1)],
                             "logits": f"{fp}-o"},
            "metrics": {"accuracy": acc, "precision": acc, "recall": acc, "f1": acc},
            "nondeterministic_ops": [],
            "environment": {"determinism": {"cudnn_deterministic": True}, "device": device,
                            "torch": "1.5.0", "torch_git_version": "4ff3872a2099993bf7e8c588f7182f3df777205b"},
            "exit_codes": [1], "log_tail": "RuntimeError: CUDA out of memory\n"}


def verdict_of(records, runs, policy="paired", min_effect=0.0, tags=""):
    rows, info = analyse_bug("b", records, ["accuracy", "f1"], runs, policy)
    adjusted = adjust(family_pvalues([(rows, info)], {"b": tags}), "holm")
    label, reason = _apply(rows, info, 0.05, min_effect, adjusted, tags)
    return label, reason, rows, info


def test_not_triggered_proven_without_statistics():
    recs = [record(arm, i, 0.9 + i / 100, fp=f"s{i}") for arm in ("buggy", "corrected") for i in range(6)]
    label, reason, rows, info = verdict_of(recs, 6)
    assert label == "not triggered" and "identical in all 6 run pairs" in reason
    assert info["first_divergence_epoch"] == ""
    # what it proved, and where: device, both builds, seeds, and what was fingerprinted
    assert ("on cpu; buggy torch 1.5.0 (git 4ff3872a20); corrected torch 1.5.0 (git 4ff3872a20); "
            "6 seed pairs; fingerprinted: parameters at initialisation, parameters after every "
            "epoch, every batch's training loss, test-set log-probabilities, test-set "
            "predictions") in reason
    assert all(math.isnan(r["adjusted_p"]) for r in rows)  # not part of the family


def test_a_cuda_bug_on_a_cpu_is_not_called_not_triggered_without_saying_so():
    recs = [record(arm, i, 0.9, fp=f"s{i}") for arm in ("buggy", "corrected") for i in range(3)]
    label, reason, _, _ = verdict_of(recs, 3, tags="cuda;crash")
    assert label == "not triggered on cpu" and "never ran CUDA code" in reason
    gpu = [record(arm, i, 0.9, fp=f"s{i}", device="cuda") for arm in ("buggy", "corrected")
           for i in range(3)]
    assert verdict_of(gpu, 3, tags="cuda")[0] == "not triggered"


def test_a_difference_only_in_the_loss_or_logits_is_a_divergence():
    a = record("buggy", 0, 0.9, fp="a")
    b = dict(a, fingerprints=dict(a["fingerprints"], losses=["a-l1", "other"]))
    assert first_divergence(a, b) == 2
    c = dict(a, fingerprints=dict(a["fingerprints"], logits="other"))
    assert first_divergence(a, c) == 2
    old = dict(a, fingerprints={k: v for k, v in a["fingerprints"].items()
                                if k not in ("losses", "logits")})
    assert first_divergence(old, old) is None  # records from before: fewer fingerprints

def test_impact_and_first_divergence():
    rng = np.random.RandomState(0)
    recs = []
    for i in range(12):
        base = 0.9 + rng.normal(0, 0.005)
        recs.append(record("buggy", i, base - 0.03, fp=f"b{i}"))
        recs.append(record("corrected", i, base, fp=f"c{i}"))
    label, reason, rows, info = verdict_of(recs, 12)
    assert label == "impact" and "accuracy" in reason
    assert info["first_divergence_epoch"] == 0
    assert rows[0]["primary_test"] == "wilcoxon signed-rank"
    assert rows[0]["effect"] == pytest.approx(-0.03, abs=1e-9)
    assert rows[0]["effect_low"] <= -0.03 <= rows[0]["effect_high"]
    assert "accuracy -0.03 [-0.03, -0.03] (95.8% interval), p_adj" in reason and "MDE" in reason
    # the same data with an effect threshold above the effect is no impact
    label, reason, _, _ = verdict_of(recs, 12, min_effect=0.05)
    assert label == "no evidence of impact" and "no effect beyond min_effect 0.05" in reason


def test_a_zero_effect_is_never_an_impact():
    """Before: with min_effect 0, abs(median difference) >= 0 always held, and a significant test
    with an arm-median difference of exactly 0 was called impact without naming an effect."""
    recs = []
    for i in range(20):  # 11 pairs unchanged, 9 pairs up by one test sample in 100
        up = 0.01 if i < 9 else 0.0
        recs += [record("buggy", i, 0.9 + i / 1000 + up, fp=f"b{i}"),
                 record("corrected", i, 0.9 + i / 1000, fp=f"c{i}")]
    rows, info = analyse_bug("b", recs, ["accuracy"], 20, "paired")
    assert rows[0]["primary_p"] == pytest.approx(2 / 2 ** 9)
    # Walsh averages: 66 of 0, 99 of 0.005, 45 of 0.01 -> the pseudo-median is 0.005
    assert rows[0]["effect"] == 0.005
    label, reason = _apply(rows, info, 0.05, 0.0, adjust([rows[0]["primary_p"]], "holm"))
    assert label == "impact" and reason.startswith("accuracy +0.005 [")
    rows[0]["effect"] = 0.0  # a significant test whose effect estimate is exactly zero
    assert verdict(info, rows, 0.05, 0.0)[0] == "no evidence of impact"


def test_runs_that_differ_with_every_metric_equal_in_every_pair_say_so_not_p_nan():
    """Seen on torch 1.3.0 (pr21672, log_softmax's numerics): every run pair's fingerprints differed,
    every metric was equal in every pair, and the verdict read "smallest adjusted p nan"."""
    recs = [record(arm, i, 0.9 + i / 100, fp=f"{arm}{i}") for arm in ("buggy", "corrected") for i in range(4)]
    for rec in recs:  # the same initialisation in both arms, as a paired study has
        rec["fingerprints"]["init"] = f"init{rec['spec']['run']}"
    label, reason, rows, info = verdict_of(recs, 4)
    assert all(math.isnan(r["adjusted_p"]) for r in rows)
    assert label == "no evidence of impact" and "nan" not in reason, reason
    assert reason.startswith("every metric (accuracy, f1) equal in all 4 run pairs, though no pair's runs are "
                             "identical (they differ from epoch 1)"), reason


def test_min_effect_gates_the_paired_effect_not_the_medians_of_the_arms():
    """The issue's case: 20 pairs, 14 up and none down, p = 2/2^14; the arms' medians differ by
    less than the paired shift, so a gate on them said no evidence."""
    recs = []
    for i in range(20):
        base = 0.95 + (i % 10) * 0.003
        up = 0.002 if i < 14 else 0.0
        recs += [record("buggy", i, base + up, fp=f"b{i}"), record("corrected", i, base, fp=f"c{i}")]
    rows, info = analyse_bug("b", recs, ["accuracy"], 20, "paired")
    assert rows[0]["median_buggy"] - rows[0]["median_corrected"] == pytest.approx(0.001)
    assert rows[0]["primary_p"] == pytest.approx(2 / 2 ** 14)
    # Walsh averages: 21 of 0, 84 of 0.001, 105 of 0.002 -> pseudo-median 0.0015
    assert rows[0]["effect"] == pytest.approx(0.0015)
    p_adj = adjust([rows[0]["primary_p"]], "holm")
    assert _apply(rows, info, 0.05, 0.0012, p_adj)[0] == "impact"  # the arms' 0.001 fell short
    assert _apply(rows, info, 0.05, 0.0015, p_adj)[0] == "no evidence of impact"


def test_the_family_is_the_bugs_actually_tested():
    """Before: under seed_policy fixed every not-triggered bug added p = 1 rows to Holm's family."""
    rng = np.random.RandomState(5)
    tested = [record(arm, i, 0.9 + rng.normal(0, 0.01) - (0.02 if arm == "buggy" else 0),
                     fp=f"{arm}{i}") for arm in ("buggy", "corrected") for i in range(8)]
    quiet = [record(arm, i, 0.9, fp="same") for arm in ("buggy", "corrected") for i in range(8)]
    alone = analyse_bug("t", tested, ["accuracy", "f1"], 8, "fixed")
    items = [alone] + [analyse_bug(f"q{k}", quiet, ["accuracy", "f1"], 8, "fixed") for k in range(5)]
    family = family_pvalues(items, {})
    assert sum(not math.isnan(p) for p in family) == 2
    assert list(adjust(family, "holm")[:2]) == list(adjust([r["primary_p"] for r in alone[0]], "holm"))

def test_no_evidence_reports_detectable_effect():
    rng = np.random.RandomState(1)
    recs = [record(arm, i, 0.9 + rng.normal(0, 0.01), fp=f"{arm}{i}")
            for arm in ("buggy", "corrected") for i in range(10)]
    label, reason, rows, _ = verdict_of(recs, 10)
    assert label == "no evidence of impact" and "this design detects about" in reason
    assert rows[0]["mde"] > 0


def test_identical_runs_reports_exact_difference():
    recs = [record("buggy", i, 0.91, fp="B") for i in range(5)] + \
           [record("corrected", i, 0.90, fp="C") for i in range(5)]
    label, reason, rows, _ = verdict_of(recs, 5, policy="fixed")
    assert label == "identical runs" and "accuracy +0.01" in reason
    assert rows[0]["exact_diff"] == pytest.approx(0.01)
    assert rows[0]["mwu_method"].startswith("asymptotic")  # all ties within arms


def test_incomplete_names_failed_runs():
    recs = [record(arm, i, 0.9, fp=f"{arm}{i}") for arm in ("buggy", "corrected") for i in range(4)]
    recs[-1] = record("corrected", 3, 0.9, status="failed")
    label, reason, _, _ = verdict_of(recs, 4)
    assert label == "incomplete"
    assert "corrected 3/4" in reason and "CUDA out of memory" in reason


def test_an_arm_whose_every_run_diverged_where_the_others_finished_diverges_with_fishers_p():
    """pr32062 on 1.5.0 with generalized-mean pooling: every buggy run's loss is NaN at step 2 (its
    exponent gradient at a zero base), every corrected run trains. No metric exists to rank, so the
    verdict is the divergence itself, with Fisher's exact one-sided p on the counts."""
    def diverged(i):
        return dict(record("buggy", i, 0.0, status="failed"), failure_class="diverged",
                    log_tail="[pr32062 buggy run %d] diverged: loss nan at epoch 1, step 2\n" % i)
    recs = [diverged(i) for i in range(4)] + [record("corrected", i, 0.9, fp=f"c{i}") for i in range(4)]
    label, reason, _, info = verdict_of(recs, 4)
    assert label == "diverges" and info["n_diverged"] == {"buggy": 4, "corrected": 0}
    assert "the buggy arm diverged in all 4 runs, the corrected arm finished all 4" in reason
    assert f"p = {1 / 70:.3g}" in reason and "loss nan at epoch 1, step 2" in reason
    assert math.isnan(family_pvalues([analyse_bug("b", recs, ["accuracy"], 4, "paired")], {"b": ""})[0])
    # some runs only, or both arms: the runs are missing, not a verdict
    assert verdict_of(recs[:3] + [record("buggy", 3, 0.9, fp="b3")] + recs[4:], 4)[0] == "incomplete"
    assert verdict_of(recs[:4] + [dict(r, spec={"arm": "corrected", "run": r["spec"]["run"]}) for r in recs[:4]],
                      4)[0] == "incomplete"


def test_early_decision():
    same = [record(arm, i, 0.9, fp=f"s{i}") for arm in ("buggy", "corrected") for i in range(2)]
    assert early_decision(same, 2)["decision"] == "not_triggered"
    skipped = same + [{"status": "skipped", "spec": {"arm": arm, "run": i}}
                      for arm in ("buggy", "corrected") for i in range(2, 10)]
    label, reason, _, _ = verdict_of(skipped, 10)
    assert label == "not triggered" and "16 runs skipped" in reason
    diff = [record("buggy", 0, 0.9, fp="a"), record("corrected", 0, 0.9, fp="b")]
    assert early_decision(diff, 1)["decision"] == "continue"
    noisy = [dict(r, nondeterministic_ops=["adaptive_avg_pool2d_backward_cuda"]) for r in same]
    assert early_decision(noisy, 2)["decision"] == "continue"
    assert early_decision(same[:2], 2)["decision"] == "continue"  # a run missing


def test_early_decision_needs_a_measured_repeat_where_one_is_asked_for():
    """On CUDA before torch 1.8 nothing reports a non-deterministic kernel: identical pairs could be
    luck, so the decision waits for buggy run 0 run twice and bit-identical."""
    same = [record(arm, i, 0.9, fp=f"s{i}", device="cuda") for arm in ("buggy", "corrected")
            for i in range(2)]
    again = record("buggy", 0, 0.9, fp="s0", device="cuda")
    decision = early_decision(same, 2, [again])
    assert decision["decision"] == "not_triggered" and decision["repeat"] == "identical"
    assert "a repeat of the same arm and seed was bit-identical" in decision["reason"]
    drift = dict(again, fingerprints=dict(again["fingerprints"], epochs=["s0-e1", "atomics"]))
    decision = early_decision(same, 2, [drift])
    assert decision["decision"] == "continue" and decision["repeat"] == "differs"
    assert "run twice differs from epoch 2" in decision["reason"]
    failed = record("buggy", 0, 0.9, status="failed")
    assert early_decision(same, 2, [failed])["decision"] == "continue"


def test_first_divergence_epochs():
    a = record("buggy", 0, 0.9, fp="a", epochs=3)
    b = dict(a, fingerprints=dict(a["fingerprints"], epochs=["a-e1", "z", "z"]))
    assert first_divergence(a, a) is None and first_divergence(a, b) == 2


def test_a_nan_metric_is_a_failed_measurement_never_a_tie():
    rng = np.random.RandomState(3)
    recs = [record(arm, i, 0.9 + rng.normal(0, 0.01), fp=f"{arm}{i}")
            for arm in ("buggy", "corrected") for i in range(10)]
    recs[3]["metrics"]["accuracy"] = float("nan")
    label, reason, rows, info = verdict_of(recs, 10)
    assert label == "incomplete" and "buggy 9/10" in reason
    assert "accuracy is not a number (nan): a failed measurement" in info["failed"]
    assert rows[0]["n_buggy"] == 9 and not math.isnan(rows[0]["mwu_p"]) and rows[0]["mwu_p"] < 1
    for r in recs:
        r["metrics"]["f1"] = float("nan")
    label, _, rows, info = verdict_of(recs, 10)
    assert label == "incomplete" and rows[1]["n_buggy"] == rows[1]["n_corrected"] == 0
    assert info["failed"].count("f1 is not a number") == 20


def test_the_mde_is_stated_at_the_level_the_verdict_uses(tmp_path):
    """Two tested bugs, one metric: Holm's strictest step is alpha / 2, so the verdict's MDE is
    the one at 0.025 (R: power.t.test(n=10, sig.level=0.025, power=0.8, type="paired",
    strict=TRUE, tol=1e-12)$delta = 1.13885407079913 sd of the differences, 0.996001371455107 at
    0.05, each over the rank efficiency)."""
    from bugimpact.io import read_csv
    from bugimpact.io import write_json as write_record
    from bugimpact.stats.tables import bug_stats, study_tables
    rng = np.random.RandomState(4)
    cfg = {"metrics": ["accuracy"], "alpha": 0.05, "power": 0.8, "min_effect": 0.0, "correction": "holm"}
    jsons = []
    for bug in ("b1", "b2"):
        paths = []
        for i in range(10):
            base = 0.9 + rng.normal(0, 0.003)
            for arm, value in (("buggy", base + rng.normal(0, 0.002)), ("corrected", base)):
                path = tmp_path / bug / arm / f"{i}.json"
                write_record(path, dict(record(arm, i, round(value * 450) / 450, fp=f"{bug}{arm}{i}"),
                                        record_schema=1))
                paths.append(path)
        bug_stats(bug, paths, cfg, {"runs": 10, "seed_policy": "paired"},
                  (tmp_path / f"{bug}.csv", tmp_path / f"{bug}.json"))
        jsons.append(tmp_path / f"{bug}.json")
    study_tables(jsons, {"b1": {}, "b2": {}}, "s", cfg, [], tmp_path / "p.csv", tmp_path / "v.csv",
                 tmp_path / "sum.csv")
    for row in read_csv(tmp_path / "v.csv")[1]:
        assert row["verdict"] == "no evidence of impact"
        assert float(row["mde_alpha"]) == pytest.approx(0.025)
        per_bug = read_csv(tmp_path / f"{row['bug']}.csv")[1][0]  # alone, its family is itself
        assert float(per_bug["mde_alpha"]) == pytest.approx(0.05)
        ratio = float(row["mde"]) / float(per_bug["mde"])
        assert ratio == pytest.approx(1.13885407079913 / 0.996001371455107, rel=1e-9)
        assert "at alpha 0.025 with the configured power" in row["reason"]
        assert re.search(r"accuracy [-+][0-9.e-]+ \[[^]]+\] \(\d+\.\d% interval\)", row["reason"])


def test_not_triggered_states_the_trigger_rate_it_excludes():
    from bugimpact.stats.decisions import excluded_rate, pairs_for_rate
    assert excluded_rate(2) == pytest.approx(1 - math.sqrt(0.05))  # 77.6%: what 2 pairs exclude
    assert pairs_for_rate(0.3) == 9 and 0.7 ** 9 <= 0.05 < 0.7 ** 8
    assert pairs_for_rate(excluded_rate(20)) == 20
    # a trigger that fires in 30% of runs (seed-dependent): missed by 2 pairs about half the time,
    # by the 9 that trigger_rate 0.3 asks for at most 5% of the time
    rng = np.random.RandomState(8)
    fires = rng.random_sample((20000, 9)) < 0.3
    assert (~fires[:, :2]).all(axis=1).mean() == pytest.approx(0.49, abs=0.015)
    assert (~fires).all(axis=1).mean() <= 0.05
    recs = [record(arm, i, 0.9, fp=f"s{i}") for arm in ("buggy", "corrected") for i in range(6)]
    label, reason, _, _ = verdict_of(recs, 6)
    assert label == "not triggered"
    assert "a trigger firing in at least 39% of runs would have shown with 95% confidence" in reason


def test_the_early_decision_looks_at_as_many_pairs_as_the_trigger_rate_needs(tmp_path):
    from conftest import config_with

    from bugimpact.config import SHEET_SCHEMA
    from bugimpact.plan import Plan
    assert Plan(config_with(), SHEET_SCHEMA).early_runs() == 2
    plan = Plan(config_with(**{"train.early_decision": {"enabled": True, "runs": 2,
                                                        "trigger_rate": 0.3}}), SHEET_SCHEMA)
    assert plan.early_runs() == 9


def test_a_records_metrics_are_the_correctly_rounded_exact_values_of_its_counts():
    from bugimpact.harness.metrics import confusion_counts, recorded_metrics
    from bugimpact.stats.exact import exact_metrics
    rng = np.random.RandomState(6)
    for _ in range(50):
        y = rng.randint(0, 10, 450)
        pred = np.where(rng.random_sample(450) < 0.8, y, rng.randint(0, 10, 450))
        counts = confusion_counts(y, pred)
        exact = exact_metrics(counts)
        assert recorded_metrics(counts) == {metric: float(value) for metric, value in exact.items()}
        assert exact["accuracy"] == Fraction(int(np.sum(y == pred)), 450)
    counts = confusion_counts([0, 0, 1, 2], [0, 1, 1, 1])  # class 2 never predicted
    assert counts == {"labels": [0, 1, 2], "matrix": [[1, 1, 0], [0, 1, 0], [0, 1, 0]]}
    assert exact_metrics(counts)["precision"] == (1 + Fraction(1, 3) + 0) / 3


def _counted(arm, run, correct, fp):
    """A record whose accuracy is correct/450, with the counts the harness records."""
    matrix = [[correct, 450 - correct], [0, 0]]
    rec = record(arm, run, correct / 450, fp=fp)
    rec["counts"] = {"labels": [0, 1], "matrix": matrix}
    return rec


def test_ties_on_the_metrics_own_grid_are_exact_from_the_counts():
    """359/450 - 357/450 and 362/450 - 360/450 are one difference. From the counts the test sees
    it so (coin's exact test on the counts gives 0.1396484375); from the floats, snapped to 1e-12
    and differenced, they are two, and the p is another."""
    b = [359, 362, 400, 380, 371, 365, 390, 377, 369, 402, 381, 377]
    c = [357, 360, 398, 383, 371, 362, 388, 380, 366, 399, 378, 375]
    counted = [_counted("buggy", i, v, f"b{i}") for i, v in enumerate(b)] + \
        [_counted("corrected", i, v, f"c{i}") for i, v in enumerate(c)]
    rows, _ = analyse_bug("b", counted, ["accuracy"], 12, "paired")
    assert rows[0]["values_compared"] == "exact counts"
    assert rows[0]["wilcoxon_p"] == 0.1396484375
    floats = [dict(r, counts=None) for r in counted]
    rows, _ = analyse_bug("b", floats, ["accuracy"], 12, "paired")
    assert rows[0]["values_compared"] == "floats" and rows[0]["wilcoxon_p"] == 0.123046875


def test_exact_rationals_go_through_every_rank_function_as_their_floats_do():
    """Every function that ranks, differences or orders metrics takes exact Fractions (the metrics
    from their counts) with any NumPy and SciPy: none hands them to a numpy ufunc, whose object
    loops changed under SciPy 1.18 (rankdata returned objects, np.rint had no loop for them). On
    values whose floats keep every tie the two give the same answers; the ranks equal scipy's."""
    rng = np.random.RandomState(7)
    for size in (9, 30, 60):  # exact and normal-approximation branches
        b = [Fraction(int(k), 64) for k in rng.randint(40, 60, size)]
        c = [Fraction(int(k), 64) for k in rng.randint(38, 58, size)]
        fb, fc = [float(v) for v in b], [float(v) for v in c]  # k/64: exact in binary, same ties
        for exact, approx in ((wilcoxon(b, c), wilcoxon(fb, fc)), (mann_whitney(b, c), mann_whitney(fb, fc))):
            assert (exact.statistic, exact.p_value, exact.method) == (approx.statistic, approx.p_value,
                                                                      approx.method)
        assert vargha_delaney_a12(b, c) == vargha_delaney_a12(fb, fc)
        for paired in (True, False):
            assert hodges_lehmann(b, c, paired) == hodges_lehmann(fb, fc, paired)
        assert signed_rank_z(b, c) == signed_rank_z(fb, fc)
        doubled, ties = doubled_midranks(b + c)
        assert [r / 2 for r in doubled] == list(st.rankdata(fb + fc))
        assert sorted(ties) == sorted(np.unique(fb + fc, return_counts=True)[1].tolist())


def test_hodges_lehmann_is_the_walsh_median_with_ties_and_zeros_too():
    """Where R's wilcox.test(conf.int=TRUE) switches to the root of its normal score (ties, zeros,
    50+ pairs), the estimate here stays the median of the Walsh averages, as documented."""
    d = np.array([0.0, 0.0, 1.0, 1.0, 2.0, 2.0, 2.0, 3.0, -1.0])
    walsh = [(d[i] + d[j]) / 2 for i in range(len(d)) for j in range(i, len(d))]
    estimate, low, high, level = hodges_lehmann(d, np.zeros(len(d)), paired=True)
    assert estimate == np.median(walsh) and low <= estimate <= high


def test_runs_that_failed_alike_are_named_once():
    recs = [record("buggy", i, 0.9, status="failed") for i in range(6)] + \
        [record("corrected", i, 0.9, fp=f"c{i}") for i in range(6)]
    recs[4] = dict(recs[4], log_tail="Killed\n")
    _, reason, _, info = verdict_of(recs, 6)
    assert info["failed"] == ("buggy runs 0-3, 5: exit [1]: RuntimeError: CUDA out of memory; "
                              "buggy run 4: exit [1]: Killed")
    assert reason.count("CUDA out of memory") == 1
