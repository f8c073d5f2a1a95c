"""A group-sequential design: runs are added in stages, and a bug stops as soon as its verdict is
decided, for impact or for futility, with the overall type-I error kept at alpha.

- **Statistic**: at stage k, with n_k seed pairs, the Wilcoxon signed-rank z of the primary metric
  (zeros dropped, tie-corrected, no continuity correction: the canonical joint normal model, whose
  increments are independent with information proportional to n_k).
- **Impact**: |z_k| crosses a two-sided symmetric boundary c_k from a Lan-DeMets alpha-spending
  function, alpha / 2 per side as gsDesign and ldbounds do: O'Brien-Fleming-like
  (``4 - 4 Phi(z_{1-alpha/4} / sqrt(t))`` in all) or Pocock-like (``alpha log(1 + (e - 1) t)``), at
  information fraction t_k = n_k / n_K. The boundaries are
  computed exactly for the joint normal model by numerical integration on a grid (Armitage,
  McPherson and Rowe's recursion), each stage spending what the function allows.
- **Futility** (non-binding: it can only lower the type-I error): the interval of the paired effect
  lies inside +-min_effect, or the conditional power, were the design effect true from now on, is
  below ``FUTILITY_POWER``.
- **p-value**: stagewise ordering: alpha spent before the stage plus the probability, under no
  effect, of reaching the stage and a |z| at least as large. A bug stopped for futility counts as
  p = 1. Holm (or BH) then runs over the tested bugs as in the fixed design.
"""
import math

import numpy as np
from scipy import optimize
from scipy.stats import norm

from .rank_tests import signed_ranks, tie_correction, wilcoxon

SPENDING = ("obrien-fleming", "pocock")
FUTILITY_POWER = 0.2  # the default: 1 point of power for 7 of 50 pairs under no effect (README)
GRID = 601
ESTIMATE_GRID = 201  # the median-unbiased estimate: its probabilities to 1e-9 at a ninth of the cost


def spent(t, alpha, shape):
    """Alpha spent by information fraction t (Lan-DeMets)."""
    if t <= 0:
        return 0.0
    if shape == "obrien-fleming":  # alpha / 2 per side, each side Lan-DeMets' one-sided function
        # 4 * sf, not 4 - 4 * cdf: the latter rounds to 0 at an early look and breaks the design
        return float(4 * norm.sf(norm.isf(alpha / 4) / math.sqrt(min(t, 1.0))))
    if shape == "pocock":
        return float(alpha * math.log(1 + (math.e - 1) * min(t, 1.0)))
    raise ValueError(f"unknown spending shape {shape!r}; use {', '.join(SPENDING)}")


def _grid(bound, size=GRID):
    """Points and Simpson weights over [-bound, bound] (``size`` odd)."""
    points = np.linspace(-bound, bound, size)
    weights = np.ones(size)
    weights[1:-1:2], weights[2:-1:2] = 4, 2
    return points, weights * (points[1] - points[0]) / 3


class Design:
    """Boundaries for stage sizes ``stages`` (pairs, increasing; the last is the maximum)."""

    def __init__(self, stages, alpha=0.05, shape="obrien-fleming", power=0.8):
        self.stages, self.alpha, self.shape = [int(n) for n in stages], alpha, shape
        # E[z] at the maximum size under the design effect (the fixed design's MDE at this power)
        self.design_drift = float(norm.ppf(1 - alpha / 2) + norm.ppf(power))
        if sorted(set(self.stages)) != self.stages or self.stages[0] < 1:
            raise ValueError(f"stages must increase: {stages}")
        self.fractions = [n / self.stages[-1] for n in self.stages]
        self.bounds, self._densities = [], []  # c_k on the z scale; sub-densities of S_k
        previous = None  # (points, weights, density) of the score S on the continuation region
        for k, t in enumerate(self.fractions):
            target = spent(t, alpha, shape) - spent(self.fractions[k - 1] if k else 0, alpha, shape)
            if previous is None:
                c = norm.isf(target / 2)  # not ppf(1 - ...): a tiny first-look alpha rounds 1 - x to 1
            else:
                c = optimize.brentq(lambda z, k=k, prev=previous, target=target:
                                    self._exit(k, prev, z) - target, 0.0, 40.0, xtol=1e-10)
            self.bounds.append(float(c))
            bound = c * math.sqrt(t)
            points, weights = _grid(bound)
            if previous is None:
                density = norm.pdf(points, scale=math.sqrt(t))
            else:
                density = self._step(k, previous, points)
            previous = (points, weights, density)
            self._densities.append(previous)

    def _increment_sd(self, k):
        return math.sqrt(self.fractions[k] - self.fractions[k - 1])

    def _step(self, k, previous, points):
        u, w, f = previous
        sd = self._increment_sd(k)
        return (norm.pdf((points[:, None] - u[None, :]) / sd) / sd * (w * f)[None, :]).sum(axis=1)

    def _exit(self, k, previous, z):
        """P(continue to stage k and |Z_k| >= z) under no effect."""
        u, w, f = previous
        b, sd = z * math.sqrt(self.fractions[k]), self._increment_sd(k)
        tail = norm.sf((b - u) / sd) + norm.cdf((-b - u) / sd)
        return float((w * f * tail).sum())

    def stagewise_p(self, k, z):
        """The p-value of stopping at stage k (0-based) with |z| (stagewise ordering)."""
        before = spent(self.fractions[k - 1], self.alpha, self.shape) if k else 0.0
        if k == 0:
            return float(min(1.0, 2 * norm.sf(abs(z))))
        return float(min(1.0, before + self._exit(k, self._densities[k - 1], abs(z))))

    def ordering_probability(self, k, z, theta):
        """P_theta(a result at least as extreme, in stagewise ordering, as stopping upward at stage
        k (0-based) with Z_k = z > 0): an upward stop at an earlier stage, or reaching stage k with
        Z_k >= z. ``theta``: the drift, E[Z] at the maximum size."""
        total, previous, t_before = 0.0, None, 0.0
        for j in range(k + 1):
            t = self.fractions[j]
            b = (self.bounds[j] if j < k else z) * math.sqrt(t)
            step = theta * (t - t_before)
            if previous is None:
                total += float(norm.sf((b - step) / math.sqrt(t)))
            else:
                u, w, f = previous
                sd = math.sqrt(t - t_before)
                total += float((w * f * norm.sf((b - u - step) / sd)).sum())
            if j < k:  # the density of S_j on the continuation region, under the drift
                points, weights = _grid(b, ESTIMATE_GRID)
                if previous is None:
                    density = norm.pdf(points, loc=step, scale=math.sqrt(t))
                else:
                    u, w, f = previous
                    sd = math.sqrt(t - t_before)
                    density = (norm.pdf((points[:, None] - u[None, :] - step) / sd) / sd
                               * (w * f)[None, :]).sum(axis=1)
                previous = (points, weights, density)
            t_before = t
        return total

    def median_unbiased(self, k, z):
        """The drift (E[Z] at the maximum size, signed as z) for which a stop at stage k with this
        z is the median outcome in stagewise ordering: the median-unbiased estimate after a
        group-sequential stop (Jennison and Turnbull, ch. 8)."""
        size = abs(z)
        theta = optimize.brentq(lambda th: self.ordering_probability(k, size, th) - 0.5,
                                -20.0, 40.0, xtol=1e-7)
        return math.copysign(theta, z) if z else 0.0

    def conditional_power(self, k, z):
        """P(crossing the final boundary) if the design effect held from now on, in the direction of
        the current trend (B-value form; the boundaries in between can only stop sooner). Under
        the current trend instead, futility would stop too many bugs that do have the design
        effect: about 8 points of power lost at 10/20/30/50 pairs."""
        t = self.fractions[k]
        if t >= 1:
            return float(abs(z) >= self.bounds[-1])
        b = abs(z) * math.sqrt(t)
        c, rest, drift = self.bounds[-1], math.sqrt(1 - t), self.design_drift * (1 - t)
        return float(norm.sf((c - b - drift) / rest) + norm.cdf((-c - b - drift) / rest))


def signed_rank_z(x, y):
    """The Wilcoxon signed-rank z (zeros dropped, tie-corrected, no continuity correction)."""
    positive, doubled, ties = signed_ranks(x, y)
    n = len(doubled)
    if n == 0:
        return 0.0
    var = n * (n + 1) * (2 * n + 1) / 24.0 - tie_correction(ties) / 48.0
    if var <= 0:
        return 0.0
    r_plus = sum(r for r, up in zip(doubled, positive) if up) / 2
    return float((r_plus - n * (n + 1) / 4.0) / math.sqrt(var))


def decide(design, k, x, y, effect_interval=None, min_effect=0.0, futility_power=None):
    """The decision at stage k (0-based) from the first n_k pairs: impact, futility or continue."""
    z = signed_rank_z(x, y)
    out = {"stage": k + 1, "stages": len(design.stages), "pairs": design.stages[k], "z": z,
           "bound": design.bounds[k], "p": design.stagewise_p(k, z)}
    last = k == len(design.stages) - 1
    if abs(z) >= design.bounds[k]:
        return dict(out, decision="impact", reason=f"|z| {abs(z):.3f} >= boundary {design.bounds[k]:.3f}")
    if last:
        return dict(out, decision="no_impact", reason=f"|z| {abs(z):.3f} < final boundary "
                                                      f"{design.bounds[k]:.3f}")
    low, high = effect_interval or (-math.inf, math.inf)
    if min_effect > 0 and -min_effect < low and high < min_effect:
        return dict(out, decision="futility", p=1.0,
                    reason=f"the effect's interval [{low:+.4g}, {high:+.4g}] lies inside "
                           f"+-{min_effect:g}")
    power = design.conditional_power(k, z)
    threshold = FUTILITY_POWER if futility_power is None else futility_power
    if power < threshold:
        return dict(out, decision="futility", p=1.0, conditional_power=power,
                    reason=f"conditional power {power:.3f} under the design effect is below "
                           f"{threshold:g}")
    return dict(out, decision="continue", conditional_power=power,
                reason=f"|z| {abs(z):.3f} < boundary {design.bounds[k]:.3f}")


def run_design(design, x, y, min_effect=0.0, effect_interval=None, futility_power=None):
    """Monitor paired values stage by stage: the first stage whose decision is not continue, or
    the stage reached so far (decision ``continue`` when fewer pairs than the next stage exist)."""
    result = None
    for k, n in enumerate(design.stages):
        if len(x) < n:
            break
        interval = effect_interval(x[:n], y[:n]) if effect_interval else None
        result = decide(design, k, x[:n], y[:n], interval, min_effect, futility_power)
        if result["decision"] != "continue":
            return result
    return result


def simulate(design, effect, sims, rng, noise=1.0):
    """Paired studies with a shift of ``effect`` (in sd of the pair differences): the share called
    impact and the mean pairs used, by the sequential design and by the fixed design of its
    maximum size (Wilcoxon at alpha, the workflow's test)."""
    n_max = design.stages[-1]
    hits = fixed_hits = pairs = 0
    for _ in range(sims):
        y = np.zeros(n_max)
        x = rng.normal(effect * noise, noise, n_max)
        result = run_design(design, x, y)
        hits += result["decision"] == "impact"
        pairs += result["pairs"]
        fixed_hits += wilcoxon(x, y).p_value < design.alpha
    return {"rate": hits / sims, "fixed_rate": fixed_hits / sims, "mean_pairs": pairs / sims}


def design_from_config(sequential, runs, alpha, power, family=1):
    """The design of one bug under a config's ``train.sequential`` (None when off): its interim
    sizes, then train.runs as the last stage; it spends ``alpha / family``, the bug's share of the
    study's alpha (``family``: the bugs of the study). A stop for impact then has a stagewise p at
    most alpha / family, which Holm over the tested bugs always rejects: the verdict never
    overturns a stop, and the study-wide familywise error stays at most alpha (Bonferroni)."""
    if not sequential or not sequential.get("enabled"):
        return None
    stages = [n for n in sequential["stages"] if n < runs] + [runs]
    return Design(stages, alpha / max(1, family), sequential.get("spending", "obrien-fleming"), power)
