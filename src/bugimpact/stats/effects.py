"""Effect sizes, Hodges-Lehmann estimates with their intervals, minimum detectable effects and
multiplicity corrections."""
import bisect
import functools
import math

import numpy as np
from scipy import integrate, optimize
from scipy.stats import chi, nct, norm
from scipy.stats import t as t_dist

from .rank_tests import EXACT_LIMIT, _mwu_counts, as_floats, paired_differences, signed_rank_counts, snap


def vargha_delaney_a12(x, y):
    """P(X > Y) + P(X = Y) / 2: 0.5 is no effect; Cliff's delta is 2 * A12 - 1."""
    x, y = snap(x), snap(y)
    if not x or not y:
        return float("nan")
    ys = sorted(y)
    doubled = sum(bisect.bisect_left(ys, v) + bisect.bisect_right(ys, v) for v in x)  # 2 * (> + =/2)
    return doubled / (2 * len(x) * len(y))


def _lower_quantile(counts, p):
    """R's q-functions on a discrete null given by counts: the smallest q with P(W <= q) >= p."""
    total, running = sum(counts), 0
    for q, c in enumerate(counts):
        running += c
        if running >= p * total:
            return q
    return len(counts) - 1


def hodges_lehmann(x, y, paired, level=0.95):
    """The Hodges-Lehmann estimate of the shift x - y, with its distribution-free interval.

    Paired: the median of the Walsh averages of the differences (the pseudo-median), zeros
    included. Unpaired: the median of all differences x_i - y_j. The interval is a pair of order
    statistics of those, at ranks from the exact null (qsignrank, qwilcox) under 50 pairs or runs,
    else from the normal approximation; where no order statistic reaches the level (tiny n), the
    interval is the whole range. Without ties or zeros and under 50, that is exactly what R's
    ``wilcox.test(conf.int=TRUE)`` returns. With ties, zeros or 50 and more, R returns something
    else: the root of its continuity-corrected normal score (uniroot), not the Walsh median; this
    stays the Hodges-Lehmann estimator and its order-statistic interval. Returns (estimate, low,
    high, achieved level)."""
    alpha = 1 - level
    if paired:
        d = paired_differences(x, y)
        n = len(d)
        if n == 0:
            return (math.nan,) * 4
        diffs = as_floats(snap([(d[i] + d[j]) / 2 for i in range(n) for j in range(i, n)]))
        top = n * (n + 1) // 2
        if n < EXACT_LIMIT:
            counts = signed_rank_counts(range(2, 2 * n + 1, 2))[::2]  # W+ = 0..top
            qu = max(_lower_quantile(counts, alpha / 2), 1)
            achieved = 1 - 2 * sum(counts[:qu]) / 2 ** n
        else:
            qu = max(1, int(math.floor(top / 2 - norm.ppf(1 - alpha / 2)
                                       * math.sqrt(n * (n + 1) * (2 * n + 1) / 24))))
            achieved = level
    else:
        x, y = snap(x), snap(y)
        m, n = len(x), len(y)
        if not m or not n:
            return (math.nan,) * 4
        diffs = as_floats(snap([a - b for a in x for b in y]))
        top = m * n
        if max(m, n) < EXACT_LIMIT:
            counts = _mwu_counts(m, n)
            qu = max(_lower_quantile(counts, alpha / 2), 1)
            achieved = 1 - 2 * sum(counts[:qu]) / math.comb(m + n, m)
        else:
            qu = max(1, int(math.floor(top / 2 - norm.ppf(1 - alpha / 2)
                                       * math.sqrt(m * n * (m + n + 1) / 12))))
            achieved = level
    # qu is at least 1, as in R: where the design cannot reach the level, the interval is the
    # whole range of the differences and the achieved level says how much it covers.
    low, high = diffs[qu - 1], diffs[top - qu]
    return float(np.median(diffs)) + 0.0, float(low), float(high), float(achieved)


def _power(d, df, scale, crit):
    """Two-sided power of a t-test with noncentrality d * scale. Where scipy's noncentral t returns
    NaN (small df, far tails) it is the integral over the chi-distributed denominator
    S = sqrt(V / df), which agrees with it wherever both are defined."""
    nc = d * scale
    value = nct.sf(crit, df, nc) + nct.cdf(-crit, df, nc)
    if np.isfinite(value):
        return float(value)
    root = math.sqrt(df)

    def integrand(s):
        return (norm.cdf(nc - crit * s) + norm.cdf(-nc - crit * s)) * chi.pdf(s * root, df) * root
    value, _ = integrate.quad(integrand, 0, np.inf, epsabs=1e-13, epsrel=1e-11, limit=200)
    return value


@functools.lru_cache(maxsize=1024)
def detectable_d(n1, n2=None, alpha=0.05, power=0.8):
    """Smallest standardised effect a two-sided t-test detects with this power (R's
    ``power.t.test(strict=TRUE)``). ``n2=None`` means paired: d_z on the differences of n1 pairs.
    Remembered: a study restates every bug's MDE at the family's level, mostly with one n."""
    if n2 is None:
        df, scale = n1 - 1, math.sqrt(n1)
    else:
        df, scale = n1 + n2 - 2, math.sqrt(n1 * n2 / (n1 + n2))
    if df < 1:
        return float("nan")
    crit = float(t_dist.ppf(1 - alpha / 2, df))
    high = 1.0
    while _power(high, df, scale, crit) < power:  # widen the bracket: tiny n needs huge effects
        high *= 2
        if high > 1e9:
            return float("inf")
    return float(optimize.brentq(lambda d: _power(d, df, scale, crit) - power, 0.0, high,
                                 xtol=1e-12, rtol=1e-12))


def _skip_nan(adjust_finite):
    """Apply an adjustment to the finite p-values only (a degenerate test has none); NaNs pass."""
    def adjusted(pvalues):
        p = np.asarray(pvalues, float)
        out = np.full(p.shape, np.nan)
        ok = ~np.isnan(p)
        if ok.any():
            out[ok] = np.minimum(adjust_finite(p[ok]), 1.0)
        return out
    adjusted.__doc__ = adjust_finite.__doc__
    return adjusted


@_skip_nan
def holm(q):
    """Holm's step-down adjusted p-values (R's p.adjust(method="holm"))."""
    m = len(q)
    order = np.argsort(q, kind="mergesort")
    result = np.empty(m)
    result[order] = np.maximum.accumulate((m - np.arange(m)) * q[order])
    return result


@_skip_nan
def benjamini_hochberg(q):
    """Benjamini-Hochberg adjusted p-values (R's p.adjust(method="BH"))."""
    m = len(q)
    order = np.argsort(q, kind="mergesort")[::-1]
    result = np.empty(m)
    result[order] = np.minimum.accumulate(q[order] * m / np.arange(m, 0, -1))
    return result


def adjust(pvalues, method):
    return holm(pvalues) if method == "holm" else benjamini_hochberg(pvalues)
