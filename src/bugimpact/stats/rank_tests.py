"""Two-sided rank tests, written out so every step can be checked against R, scipy and by hand.

Metrics are ratios of counts. Given as exact rationals (``exact``: from the counts a record holds),
they are ranked, tied and differenced exactly. Given as floats (records without counts), they are
snapped to ``RESOLUTION`` first (``snap``), which keeps most ties but not all: snapped values are
rounded again when differenced, so 359/450 - 357/450 and 362/450 - 360/450 can still differ.

Mann-Whitney U: exact null distribution (integer arithmetic) when there are no ties and both samples
are smaller than ``EXACT_LIMIT`` (R's rule); otherwise normal with tie and continuity corrections (R's
``wilcox.test(correct=TRUE)``). Wilcoxon signed-rank: zero differences are dropped (Wilcoxon's
method, R's default), then the p-value is exact while fewer than ``EXACT_LIMIT`` pairs remain: from
the permutation distribution of the signs, conditional on the tied ranks when there are ties (R
switches to the normal approximation there); beyond that, normal with tie and continuity
corrections, as R. Each result states the method used.
"""
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy.stats import norm, rankdata

EXACT_LIMIT = 50
DECIMALS = 12  # RESOLUTION = 1e-12


def snap(values):
    """Values on a 1e-12 grid (adding 0.0 turns -0.0 into 0.0); exact rationals (``exact``: metrics
    from their counts) are kept as they are, so their ties and differences are exact."""
    if is_exact(values):
        return np.asarray(values, dtype=object)
    return np.round(np.asarray(values, float), DECIMALS) + 0.0


def is_exact(values):
    values = list(np.asarray(values, dtype=object).ravel()) if not isinstance(values, list) else values
    return bool(values) and all(isinstance(v, Fraction) for v in values)


def as_floats(values):
    """Sorted floats of (snapped or exact) values: for medians and order statistics."""
    return np.sort(np.asarray([float(v) for v in np.asarray(values, dtype=object).ravel()], float))


@dataclass
class TestResult:
    statistic: float
    p_value: float
    method: str
    min_p: float  # the smallest p this design can give at all


def _mwu_counts(m, n):
    """Number of arrangements giving each U = 0..mn: the Gaussian binomial [m+n, m]_q."""
    poly = [1] + [0] * (m * n)
    for i in range(1, m + 1):
        # multiply by (1 - q^(n+i)) ...
        for k in range(m * n, n + i - 1, -1):
            poly[k] -= poly[k - n - i]
        # ... and divide by (1 - q^i) (exact: the quotient is a polynomial)
        for k in range(i, m * n + 1):
            poly[k] += poly[k - i]
    return poly


def mann_whitney(x, y, exact_limit=EXACT_LIMIT):
    x, y = snap(x), snap(y)
    m, n = len(x), len(y)
    if m == 0 or n == 0:
        return TestResult(float("nan"), float("nan"), "undefined (an arm has no runs)", float("nan"))
    ranks = rankdata(np.concatenate([x, y]))
    u1 = float(ranks[:m].sum() - m * (m + 1) / 2)
    u_big = max(u1, m * n - u1)
    total = math.comb(m + n, m)
    min_p = min(1.0, 2.0 / total)
    _, counts = np.unique(ranks, return_counts=True)
    ties = bool((counts > 1).any())
    if not ties and max(m, n) < exact_limit:
        dist = _mwu_counts(m, n)
        upper = sum(dist[int(u_big):])
        return TestResult(u1, min(1.0, 2.0 * upper / total), "exact", min_p)
    big_n = m + n
    tie_term = float((counts ** 3 - counts).sum()) / (big_n * (big_n - 1))
    sigma = math.sqrt(m * n / 12.0 * ((big_n + 1) - tie_term))
    if sigma == 0:
        return TestResult(u1, 1.0, "degenerate (all values tied)", min_p)
    z = (u_big - m * n / 2.0 - 0.5) / sigma
    method = "asymptotic (normal, tie- and continuity-corrected)"
    return TestResult(u1, min(1.0, 2.0 * float(norm.sf(z))), method, min_p)


def signed_rank_counts(doubled_ranks):
    """Sign assignments giving each doubled W+ (W+ * 2, an integer even with midranks):
    prod over ranks r of (1 + q^(2r)), conditional on the ranks as they are (ties included)."""
    top = int(sum(doubled_ranks))
    poly = [1] + [0] * top
    for r in doubled_ranks:
        r = int(r)
        for k in range(top, r - 1, -1):
            poly[k] += poly[k - r]
    return poly


def paired_differences(x, y):
    """x - y on the snapped grid, zeros kept (callers drop them where the method says so)."""
    return snap(snap(x) - snap(y))


def wilcoxon(x, y, exact_limit=EXACT_LIMIT):
    """Paired differences x - y; pairs with a zero difference are dropped."""
    d = paired_differences(x, y)
    d = d[d != 0]
    n = len(d)
    if n == 0:
        return TestResult(float("nan"), float("nan"), "degenerate (every pair identical)", float("nan"))
    ranks = rankdata(np.abs(d))
    r_plus = float(ranks[d > 0].sum())
    r_minus = float(ranks[d < 0].sum())
    t = min(r_plus, r_minus)
    min_p = min(1.0, 2.0 / 2 ** n)
    _, counts = np.unique(ranks, return_counts=True)
    ties = bool((counts > 1).any())
    if n < exact_limit:
        dist = signed_rank_counts(np.rint(2 * ranks))
        lower = sum(dist[: int(round(2 * t)) + 1])
        method = "exact conditional (tied ranks)" if ties else "exact"
        return TestResult(t, min(1.0, 2.0 * lower / 2 ** n), method, min_p)
    mean = n * (n + 1) / 4.0
    var = n * (n + 1) * (2 * n + 1) / 24.0 - float((counts ** 3 - counts).sum()) / 48.0
    if var <= 0:
        return TestResult(t, 1.0, "degenerate (all differences tied)", min_p)
    z = (t - mean + 0.5) / math.sqrt(var)
    return TestResult(t, min(1.0, 2.0 * float(norm.cdf(z))),
                      "asymptotic (normal, tie- and continuity-corrected)", min_p)
