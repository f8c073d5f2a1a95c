"""Writes cases.csv: the inputs that reference.R evaluates in R (reference.csv) and that
tests/test_stats_r.py compares our statistics with. Seeded: rerunning gives the same file.

    python tests/r/make_cases.py && Rscript tests/r/reference.R tests/r/cases.csv tests/r/reference.csv
"""
import csv
from pathlib import Path

import numpy as np


def fmt(values):
    return " ".join(repr(float(v)) for v in values)


def cases(rng):
    out = []
    add = lambda kind, x, y="", **params: out.append(  # noqa: E731
        {"id": len(out), "kind": kind, "x": fmt(x), "y": fmt(y) if len(y) else "",
         "params": " ".join(f"{k}={v}" for k, v in params.items())})
    for _ in range(400):  # Mann-Whitney: n 2..60, unequal n, ties (coarse grids), separation
        m, n = rng.randint(2, 61, size=2)
        shift = rng.choice([0.0, 0.3, 1.0, 5.0])
        grid = rng.choice([0, 1, 2])  # decimals: 0 and 1 make ties likely
        x = np.round(rng.normal(0, 1, m) + shift, grid) if grid < 2 else rng.normal(0, 1, m) + shift
        y = np.round(rng.normal(0, 1, n), grid) if grid < 2 else rng.normal(0, 1, n)
        add("mwu", x, y)
    for _ in range(300):  # Wilcoxon signed-rank on paired metrics, with ties and zeros
        n = rng.randint(2, 61)
        base = rng.uniform(0.8, 0.99, n)
        grid = rng.choice([2, 3, 8])
        x = np.round(base + rng.normal(rng.choice([0, 0.002, 0.01]), 0.005, n), grid)
        y = np.round(base, grid)
        add("wilcoxon", x, y)
    for _ in range(300):  # multiplicity adjustments
        p = rng.uniform(0, 1, rng.randint(1, 40)) ** rng.choice([1, 3, 6])
        add("adjust", p)
    for n in (2, 3, 5, 10, 20, 30, 50, 100):  # minimum detectable effects
        for alpha in (0.05, 0.01, 0.001, 0.05 / 72):
            for kind in ("paired", "two.sample"):
                add("power", [], n=n, alpha=alpha, power=0.8, type=kind)
    for _ in range(100):  # Hodges-Lehmann estimates and their intervals (exact, no ties)
        if rng.rand() < 0.5:
            n = rng.randint(3, 40)
            add("hl_paired", rng.normal(0.3, 1, n))
        else:
            m, n = rng.randint(3, 40, size=2)
            add("hl_shift", rng.normal(0.5, 1, m), rng.normal(0, 1, n))
    return out


if __name__ == "__main__":
    rows = cases(np.random.RandomState(20261122))
    with open(Path(__file__).with_name("cases.csv"), "w", newline="") as handle:
        writer = csv.DictWriter(handle, ["id", "kind", "x", "y", "params"])
        writer.writeheader()
        writer.writerows(rows)
