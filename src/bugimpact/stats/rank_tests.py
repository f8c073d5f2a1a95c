"""Two-sided rank tests, written out so every step can be checked against scipy and by hand.

Mann-Whitney U: exact null distribution (counted exactly with integer arithmetic) when there are no
ties and both samples are at most ``EXACT_LIMIT``; otherwise the normal approximation with tie and
continuity corrections (scipy's ``method="asymptotic"``). Wilcoxon signed-rank: zero differences
dropped (``zero_method="wilcox"``), exact without ties up to 50 pairs, else normal without
continuity correction (scipy's defaults). Each result states the method used.
"""
import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm, rankdata

EXACT_LIMIT = 50


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
    x, y = np.asarray(x, float), np.asarray(y, float)
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
    if not ties and max(m, n) <= exact_limit:
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


def _signed_rank_counts(n):
    """Number of sign assignments giving each W+ = 0..n(n+1)/2: prod (1 + q^i)."""
    top = n * (n + 1) // 2
    poly = [1] + [0] * top
    for i in range(1, n + 1):
        for k in range(top, i - 1, -1):
            poly[k] += poly[k - i]
    return poly


def wilcoxon(x, y, exact_limit=EXACT_LIMIT):
    """Paired differences x - y; pairs with a zero difference are dropped."""
    d = np.asarray(x, float) - np.asarray(y, float)
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
    if not (counts > 1).any() and n <= exact_limit:
        dist = _signed_rank_counts(n)
        lower = sum(dist[: int(t) + 1])
        return TestResult(t, min(1.0, 2.0 * lower / 2 ** n), "exact", min_p)
    mean = n * (n + 1) / 4.0
    var = n * (n + 1) * (2 * n + 1) / 24.0 - float((counts ** 3 - counts).sum()) / 48.0
    if var <= 0:
        return TestResult(t, 1.0, "degenerate (all differences tied)", min_p)
    z = (t - mean) / math.sqrt(var)
    return TestResult(t, min(1.0, 2.0 * float(norm.sf(abs(z)))), "asymptotic (normal, tie-corrected)",
                      min_p)
