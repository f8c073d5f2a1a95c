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
from scipy.stats import norm

EXACT_LIMIT = 50
DECIMALS = 12  # RESOLUTION = 1e-12


def snap(values):
    """The values as a list, on a 1e-12 grid (adding 0.0 turns -0.0 into 0.0); exact rationals
    (``exact``: metrics from their counts) are kept as they are, so their ties and differences are
    exact. Everything after this works on Python lists: numpy's ufuncs have no loop for Fractions
    (an object array's ``rint`` or ``abs`` depends on what the NumPy and SciPy of the day return)."""
    values = list(values.ravel()) if isinstance(values, np.ndarray) else list(values)
    if is_exact(values):
        return values
    return (np.round(np.asarray(values, float), DECIMALS) + 0.0).tolist()


def is_exact(values):
    values = list(values.ravel()) if isinstance(values, np.ndarray) else list(values)
    return bool(values) and all(isinstance(v, Fraction) for v in values)


def as_floats(values):
    """Sorted floats of (snapped or exact) values: for medians and order statistics."""
    return np.sort(np.asarray([float(v) for v in values], float))


def doubled_midranks(values):
    """Each value's rank among ``values`` times two (ties get their mean rank, so twice it is an
    integer), and the sizes of the tie groups: exact for any totally ordered values."""
    order = sorted(range(len(values)), key=values.__getitem__)
    doubled, ties = [0] * len(values), []
    first = 0
    while first < len(order):
        last = first
        while last + 1 < len(order) and values[order[last + 1]] == values[order[first]]:
            last += 1
        for position in order[first:last + 1]:
            doubled[position] = first + last + 2  # ranks first+1 .. last+1, twice their mean
        ties.append(last - first + 1)
        first = last + 1
    return doubled, ties


def tie_correction(ties):
    """The sum of t^3 - t over the tie groups (0 without ties)."""
    return sum(t ** 3 - t for t in ties)


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
    doubled, ties = doubled_midranks(x + y)
    u1 = sum(doubled[:m]) / 2 - m * (m + 1) / 2
    u_big = max(u1, m * n - u1)
    total = math.comb(m + n, m)
    min_p = min(1.0, 2.0 / total)
    if max(ties) == 1 and max(m, n) < exact_limit:
        dist = _mwu_counts(m, n)
        upper = sum(dist[int(u_big):])
        return TestResult(u1, min(1.0, 2.0 * upper / total), "exact", min_p)
    big_n = m + n
    tie_term = tie_correction(ties) / (big_n * (big_n - 1))
    sigma = math.sqrt(m * n / 12.0 * ((big_n + 1) - tie_term))
    if sigma == 0:
        return TestResult(u1, 1.0, "degenerate (all values tied)", min_p)
    z = (u_big - m * n / 2.0 - 0.5) / sigma
    method = "asymptotic (normal, tie- and continuity-corrected)"
    return TestResult(u1, min(1.0, 2.0 * float(norm.sf(z))), method, min_p)


def signed_rank_counts(doubled_ranks):
    """Sign assignments giving each doubled W+ (W+ * 2, an integer even with midranks):
    prod over ranks r of (1 + q^(2r)), conditional on the ranks as they are (ties included)."""
    top = sum(doubled_ranks)
    poly = [1] + [0] * top
    for r in doubled_ranks:
        for k in range(top, r - 1, -1):
            poly[k] += poly[k - r]
    return poly


def paired_differences(x, y):
    """x - y on the snapped grid, zeros kept (callers drop them where the method says so)."""
    return snap([a - b for a, b in zip(snap(x), snap(y))])


def signed_ranks(x, y):
    """The nonzero paired differences' signs and the doubled midranks of their sizes (pairs with
    a zero difference dropped: Wilcoxon's method), and the tie groups of those ranks."""
    d = [v for v in paired_differences(x, y) if v != 0]
    doubled, ties = doubled_midranks([abs(v) for v in d])
    return [v > 0 for v in d], doubled, ties


def wilcoxon(x, y, exact_limit=EXACT_LIMIT):
    """Paired differences x - y; pairs with a zero difference are dropped."""
    positive, doubled, ties = signed_ranks(x, y)
    n = len(doubled)
    if n == 0:
        return TestResult(float("nan"), float("nan"), "degenerate (every pair identical)", float("nan"))
    doubled_plus = sum(r for r, up in zip(doubled, positive) if up)
    doubled_t = min(doubled_plus, sum(doubled) - doubled_plus)
    t = doubled_t / 2
    min_p = min(1.0, 2.0 / 2 ** n)
    if n < exact_limit:
        lower = sum(signed_rank_counts(doubled)[: doubled_t + 1])
        method = "exact conditional (tied ranks)" if max(ties) > 1 else "exact"
        return TestResult(t, min(1.0, 2.0 * lower / 2 ** n), method, min_p)
    mean = n * (n + 1) / 4.0
    var = n * (n + 1) * (2 * n + 1) / 24.0 - tie_correction(ties) / 48.0
    if var <= 0:
        return TestResult(t, 1.0, "degenerate (all differences tied)", min_p)
    z = (t - mean + 0.5) / math.sqrt(var)
    return TestResult(t, min(1.0, 2.0 * float(norm.cdf(z))),
                      "asymptotic (normal, tie- and continuity-corrected)", min_p)
