"""The group-sequential design: boundaries against published values, its p-values, and its error
rates, power and expected runs by simulation (2,000 studies per setting)."""
import math

import numpy as np
import pytest
from scipy.stats import norm

from bugimpact.stats.analysis import RANK_EFFICIENCY, analyse_bug
from bugimpact.stats.effects import detectable_d
from bugimpact.stats.sequential import Design, decide, signed_rank_z, simulate, spent
from bugimpact.stats.tables import _apply, family_pvalues
from bugimpact.stats.effects import adjust

from test_stats import record

SIMS = 2000


@pytest.mark.parametrize("shape,published", [
    # ldbounds / gsDesign: 5 equally spaced looks, two-sided alpha 0.05, alpha/2 per side
    ("obrien-fleming", [4.8769, 3.3569, 2.6803, 2.2898, 2.0310]),
    ("pocock", [2.4380, 2.4268, 2.4101, 2.3966, 2.3859]),
])
def test_boundaries_equal_published_values(shape, published):
    design = Design([1, 2, 3, 4, 5], 0.05, shape)
    assert design.bounds == pytest.approx(published, abs=2e-4)


def test_spending_and_stagewise_p():
    design = Design([10, 20, 30, 50], 0.05, "obrien-fleming")
    assert spent(1.0, 0.05, "obrien-fleming") == pytest.approx(0.05)
    assert spent(1.0, 0.05, "pocock") == pytest.approx(0.05)
    # at each boundary the stagewise p is exactly the alpha spent so far
    for k, c in enumerate(design.bounds):
        assert design.stagewise_p(k, c) == pytest.approx(spent(design.fractions[k], 0.05,
                                                               "obrien-fleming"), rel=1e-6)
    assert design.stagewise_p(0, 1.0) == pytest.approx(2 * norm.sf(1.0))


def test_signed_rank_z_by_hand():
    # 4 positive differences, ranks 1..4: (10 - 5) / sqrt(4 * 5 * 9 / 24)
    assert signed_rank_z([1, 2, 3, 4], [0, 0, 0, 0]) == pytest.approx(5 / math.sqrt(7.5))
    assert signed_rank_z([1, 1], [1, 1]) == 0.0


def test_decisions():
    design = Design([6, 12], 0.05, "pocock")
    up = decide(design, 0, np.arange(1, 7) * 1.0, np.zeros(6))
    assert up["decision"] == "impact" and up["z"] > design.bounds[0]
    flat = decide(design, 0, [1, -1, 2, -2, 3, -3.5], np.zeros(6), min_effect=0.0, futility_power=0.5)
    assert flat["decision"] == "futility" and flat["p"] == 1.0
    inside = decide(design, 0, [1, -1, 2, -2, 3, -3.5], np.zeros(6), (-0.01, 0.02), min_effect=0.05,
                    futility_power=0.0)
    assert inside["decision"] == "futility" and "inside +-0.05" in inside["reason"]


@pytest.mark.parametrize("shape", ["obrien-fleming", "pocock"])
def test_false_positive_rate_is_at_most_alpha(shape):
    design = Design([10, 20, 30, 50], 0.05, shape)
    result = simulate(design, 0.0, SIMS, np.random.RandomState(11))
    se = math.sqrt(0.05 * 0.95 / SIMS)
    assert result["rate"] <= 0.05 + 3 * se
    assert result["mean_pairs"] < 50  # futility stops some


def test_power_at_the_design_effect_matches_the_fixed_design():
    design = Design([10, 20, 30, 50], 0.05, "obrien-fleming")
    effect = detectable_d(50, None, 0.05, 0.8) / RANK_EFFICIENCY
    result = simulate(design, effect, SIMS, np.random.RandomState(12))
    se = math.sqrt(0.8 * 0.2 / SIMS)
    assert abs(result["rate"] - result["fixed_rate"]) <= 3 * se
    assert result["mean_pairs"] < 47  # expected pairs per bug, of at most 50
    big = simulate(design, 2 * effect, 500, np.random.RandomState(13))
    assert big["rate"] > 0.99 and big["mean_pairs"] < 32  # a clear effect stops early


def test_a_bug_stopped_for_impact_needs_only_its_stage():
    design = Design([6, 12], 0.05, "pocock")
    recs = []
    for i in range(12):
        if i < 6:
            recs += [record("buggy", i, 0.95 - 0.01 * (i + 1), fp=f"b{i}"),
                     record("corrected", i, 0.95, fp=f"c{i}")]
        else:
            recs += [{"status": "skipped", "spec": {"arm": arm, "run": i}} for arm in ("buggy", "corrected")]
    options = {"design": design, "min_effect": 0.0, "futility_power": 0.2}
    rows, info = analyse_bug("b", recs, ["accuracy", "f1"], 12, "paired", sequential=options)
    assert info["sequential"]["decision"] == "impact" and info["sequential"]["runs_saved"] == 12
    assert rows[0]["primary_test"] == "group-sequential wilcoxon (pocock, stage 1 of 2)"
    assert math.isnan(rows[1]["primary_p"])  # f1 is reported only
    label, reason = _apply(rows, info, 0.05, 0.0, adjust(family_pvalues([(rows, info)], {}), "holm"))
    assert label == "impact" and "stage 1 of 2 (6 pairs): impact" in reason and "12 runs saved" in reason


@pytest.mark.parametrize("stages, alpha", [([2, 10, 20, 30, 50], 0.05), ([20, 40, 60, 80, 100], 0.01),
                                           ([2, 4], 0.05)])
def test_obrien_fleming_with_an_early_first_look_has_finite_boundaries(stages, alpha):
    """Spending computed as 4 - 4 * Phi(x) rounded to 0 at such first looks and the design crashed;
    4 * sf(x) keeps the tiny alpha, and the first boundary is then its two-sided normal quantile."""
    design = Design(stages, alpha, "obrien-fleming")
    t = stages[0] / stages[-1]
    first = norm.isf(2 * norm.sf(norm.isf(alpha / 4) / math.sqrt(t)))  # by hand: Lan-DeMets OF
    assert design.bounds[0] == pytest.approx(first, rel=1e-9) and math.isfinite(design.bounds[0])
    assert design.bounds == sorted(design.bounds, reverse=True) and all(b > 1.9 for b in design.bounds)
    assert spent(t, alpha, "obrien-fleming") > 0
