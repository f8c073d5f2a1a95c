"""Error rates of the verdict itself, by simulation: how often a bug with no effect is called
"impact" (false-positive rate, target <= alpha), and how often one at the design's MDE is (power,
target >= the configured 0.8), through the same analyse_bug + Holm path the workflow runs, with the
four metrics of a run correlated as real ones are and accuracy quantised to a 450-sample test set.

    python bench/stats_simulation.py [--sims 2000]
"""
import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from bugimpact.stats.analysis import RANK_EFFICIENCY, analyse_bug  # noqa: E402
from bugimpact.stats.effects import adjust, detectable_d  # noqa: E402
from bugimpact.stats.tables import _apply, family_pvalues  # noqa: E402

METRICS = ["accuracy", "precision", "recall", "f1"]


def records(rng, n, shift, sd, resolution):
    """n seed pairs; each run's four metrics share most of their noise."""
    out = []
    for i in range(n):
        seed_effect = rng.normal(0, sd * 0.6)
        for arm, delta in (("buggy", shift), ("corrected", 0.0)):
            common = 0.985 + seed_effect + rng.normal(0, sd * 0.8) + delta
            values = {m: common + rng.normal(0, sd * 0.2) for m in METRICS}
            values["accuracy"] = round(common / resolution) * resolution
            out.append({"status": "ok", "spec": {"arm": arm, "run": i}, "metrics": values,
                        "fingerprints": {"init": f"{arm}{i}", "epochs": [], "predictions": "p"}})
    return out


def rate(rng, sims, n, shift, sd, resolution, policy, alpha):
    hits = 0
    for _ in range(sims):
        rows, info = analyse_bug("b", records(rng, n, shift, sd, resolution), METRICS, n, policy,
                                 alpha)
        label, _ = _apply(rows, info, alpha, 0.0, adjust(family_pvalues([(rows, info)], {}), "holm"))
        hits += label == "impact"
    return hits / sims


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sims", type=int, default=2000)
    args = parser.parse_args()
    rng = np.random.RandomState(2026)
    alpha, sd = 0.05, 0.004
    se = math.sqrt(alpha * (1 - alpha) / args.sims)
    print(f"{args.sims} simulated bugs per row; alpha {alpha}; 3 SE = {3 * se:.4f}")
    print("design   n    MDE(acc)  FPR     power at MDE")
    for policy in ("paired", "unpaired"):
        for n in (10, 20, 50):
            paired = policy == "paired"
            d = detectable_d(n, None if paired else n, alpha / 4, 0.8) / RANK_EFFICIENCY
            # the spread the test sees: differences of pairs, or the arms' own spread
            spread = sd * math.sqrt(2 * (0.8 ** 2 + 0.2 ** 2)) if paired else sd
            mde = d * spread
            fpr = rate(rng, args.sims, n, 0.0, sd, 1 / 450, "paired" if paired else "fixed", alpha)
            power = rate(rng, args.sims, n, -mde, sd, 1 / 450, "paired" if paired else "fixed", alpha)
            print(f"{policy:8} {n:3} {mde:8.4f}  {fpr:.4f}  {power:.4f}")


if __name__ == "__main__":
    main()
