"""Statistics against scipy and hand-computed values; the error rates by simulation; each verdict
from records crafted for it."""
import math

import numpy as np
import pytest
import scipy.stats as st

from bugimpact.stats.analysis import RANK_EFFICIENCY, analyse_bug, early_decision, first_divergence
from bugimpact.stats.effects import (benjamini_hochberg, detectable_d, holm, median_difference_ci,
                                     vargha_delaney_a12)
from bugimpact.stats.rank_tests import mann_whitney, wilcoxon
from bugimpact.stats.tables import _apply
from bugimpact.stats.effects import adjust


@pytest.mark.parametrize("m,n,seed", [(3, 4, 0), (5, 5, 1), (8, 12, 2), (20, 20, 3), (50, 50, 4),
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


@pytest.mark.parametrize("n,seed", [(6, 0), (12, 1), (20, 2), (50, 3)])
def test_wilcoxon_exact_equals_scipy(n, seed):
    rng = np.random.RandomState(seed)
    x = rng.normal(size=n)
    y = x + rng.normal(0.2, size=n)
    ours = wilcoxon(x, y)
    ref = st.wilcoxon(x, y, method="exact")
    assert ours.method == "exact"
    assert ours.statistic == ref.statistic and ours.p_value == pytest.approx(ref.pvalue, rel=1e-9)


def test_wilcoxon_ties_and_zeros_equal_scipy_approx():
    rng = np.random.RandomState(7)
    x = np.round(rng.normal(size=40), 1)
    y = np.round(x + rng.normal(0.1, 0.3, size=40), 1)
    ours = wilcoxon(x, y)
    ref = st.wilcoxon(x, y, method="approx", zero_method="wilcox", correction=False)
    assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-12)


def test_wilcoxon_by_hand():
    # five positive differences: only the all-positive sign pattern (1 of 32) is as extreme
    assert wilcoxon([2, 3, 4, 5, 6], [1, 1, 1, 1, 1]).p_value == pytest.approx(2 / 32)
    assert wilcoxon([1, 2], [1, 2]).method.startswith("degenerate")


def test_effect_sizes_by_hand():
    assert vargha_delaney_a12([1, 2, 3], [2]) == pytest.approx(0.5)  # (1 + 0.5) / 3
    assert vargha_delaney_a12([3, 4], [1, 2]) == 1.0
    point, low, high = median_difference_ci([1, 2, 3, 4, 5], [0, 0, 0, 0, 0], paired=True)
    assert point == 3 and low <= 3 <= high


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


def test_simulated_false_positive_rate_and_power():
    """Paired runs as the default study makes them: the primary test at alpha 0.05."""
    rng = np.random.RandomState(2024)
    n, sims, alpha, power = 30, 1500, 0.05, 0.8
    design = detectable_d(n, None, alpha, power) / RANK_EFFICIENCY
    null = effect = 0
    for _ in range(sims):
        base = rng.normal(0.9, 0.01, n)
        noise = rng.normal(0, 0.01, n)
        null += wilcoxon(base + noise, base).p_value < alpha
        effect += wilcoxon(base + noise + design * 0.01, base).p_value < alpha
    se = math.sqrt(alpha * (1 - alpha) / sims)
    assert null / sims <= alpha + 3 * se
    assert effect / sims >= power - 3 * math.sqrt(power * (1 - power) / sims)


# Records crafted for each verdict -------------------------------------------------------------

def record(arm, run, acc, fp="x", status="ok", epochs=2):
    fps = [f"{fp}-e{e}" for e in range(1, epochs + 1)]
    return {"status": status, "spec": {"arm": arm, "run": run},
            "fingerprints": {"init": f"{fp}-init", "epochs": fps, "predictions": f"{fp}-p"},
            "metrics": {"accuracy": acc, "precision": acc, "recall": acc, "f1": acc},
            "nondeterministic_ops": [], "environment": {"determinism": {"cudnn_deterministic": True}},
            "exit_codes": [1], "log_tail": "RuntimeError: CUDA out of memory\n"}


def verdict_of(records, runs, policy="paired", min_effect=0.0):
    rows, info = analyse_bug("b", records, ["accuracy", "f1"], runs, policy)
    label, reason = _apply(rows, info, 0.05, min_effect, adjust([r["primary_p"] for r in rows], "holm"))
    return label, reason, rows, info


def test_not_triggered_proven_without_statistics():
    recs = [record(arm, i, 0.9 + i / 100, fp=f"s{i}") for arm in ("buggy", "corrected") for i in range(6)]
    label, reason, _, info = verdict_of(recs, 6)
    assert label == "not triggered" and "identical in all 6 run pairs" in reason
    assert info["first_divergence_epoch"] == ""


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
    assert rows[0]["median_diff"] == pytest.approx(-0.03, abs=1e-9)
    # the same data with an effect threshold above the effect is no impact
    assert verdict_of(recs, 12, min_effect=0.05)[0] == "no evidence of impact"


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
