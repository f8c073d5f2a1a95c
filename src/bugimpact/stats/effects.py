"""Effect sizes, bootstrap intervals, minimum detectable effects and multiplicity corrections."""
import numpy as np
from scipy import optimize
from scipy.stats import nct, t as t_dist


def vargha_delaney_a12(x, y):
    """P(X > Y) + P(X = Y) / 2: 0.5 is no effect; Cliff's delta is 2 * A12 - 1."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if not len(x) or not len(y):
        return float("nan")
    greater = (x[:, None] > y[None, :]).sum()
    equal = (x[:, None] == y[None, :]).sum()
    return float((greater + 0.5 * equal) / (len(x) * len(y)))


def median_difference_ci(x, y, paired, resamples=2000, level=0.95, seed=0):
    """median(x) - median(y) with a percentile bootstrap interval (pairs resampled together when
    paired). Seeded, so the same records give the same interval."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if not len(x) or not len(y):
        return float("nan"), float("nan"), float("nan")
    point = float(np.median(x) - np.median(y))
    rng = np.random.RandomState(seed)
    if paired:
        idx = rng.randint(0, len(x), size=(resamples, len(x)))
        stats = np.median(x[idx], axis=1) - np.median(y[idx], axis=1)
    else:
        ix = rng.randint(0, len(x), size=(resamples, len(x)))
        iy = rng.randint(0, len(y), size=(resamples, len(y)))
        stats = np.median(x[ix], axis=1) - np.median(y[iy], axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(stats, [tail, 100 - tail])
    return point, float(low), float(high)


def detectable_d(n1, n2=None, alpha=0.05, power=0.8):
    """Smallest standardised effect a two-sided t-test detects with this power (noncentral t).

    ``n2=None`` means paired: the effect is d_z on the differences of n1 pairs.
    """
    if n2 is None:
        df, scale = n1 - 1, np.sqrt(n1)
    else:
        df, scale = n1 + n2 - 2, np.sqrt(n1 * n2 / (n1 + n2))
    if df < 1:
        return float("nan")
    crit = t_dist.ppf(1 - alpha / 2, df)

    def shortfall(d):
        nc = d * scale
        achieved = nct.sf(crit, df, nc) + nct.cdf(-crit, df, nc)
        return (1.0 if np.isnan(achieved) else achieved) - power  # NaN only far in the tail
    return float(optimize.brentq(shortfall, 1e-6, 20.0))


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
