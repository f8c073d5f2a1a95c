"""Runs a paper-scale study needs: 18 bugs with the paper's 50 runs per arm against the early
decision plus the group-sequential design (looks at 10, 20, 30 and 50 pairs, O'Brien-Fleming),
simulated side by side on the same draws. The mix: 8 bugs not triggered (the early decision stops
them after 2 pairs), 6 triggered without an effect, 4 with small effects of 0.5, 1, 1.5 and 2 times
the fixed design's MDE.

    python bench/sequential_runs.py [--studies 500]
"""
import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from bugimpact.stats.analysis import RANK_EFFICIENCY  # noqa: E402
from bugimpact.stats.effects import detectable_d  # noqa: E402
from bugimpact.stats.rank_tests import wilcoxon  # noqa: E402
from bugimpact.stats.sequential import Design, run_design  # noqa: E402

NOT_TRIGGERED, NULL = 8, 6
SMALL = (0.5, 1.0, 1.5, 2.0)
MAX_PAIRS, EARLY_PAIRS = 50, 2


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--studies", type=int, default=500)
    args = parser.parse_args()
    design = Design([10, 20, 30, MAX_PAIRS], 0.05, "obrien-fleming")
    mde = detectable_d(MAX_PAIRS, None, 0.05, 0.8) / RANK_EFFICIENCY
    rng = np.random.RandomState(7)
    effects = [0.0] * NULL + [m * mde for m in SMALL]
    runs_fixed = 2 * MAX_PAIRS * (NOT_TRIGGERED + len(effects))
    used, found_fixed, found_seq = [], np.zeros(len(effects)), np.zeros(len(effects))
    for _ in range(args.studies):
        runs = 2 * EARLY_PAIRS * NOT_TRIGGERED
        for b, effect in enumerate(effects):
            x, y = rng.normal(effect, 1, MAX_PAIRS), np.zeros(MAX_PAIRS)
            result = run_design(design, x, y)
            runs += 2 * result["pairs"]
            found_seq[b] += result["decision"] == "impact"
            found_fixed[b] += wilcoxon(x, y).p_value < 0.05
        used.append(runs)
    used = np.asarray(used)
    print(f"{args.studies} simulated studies of 18 bugs; MDE of the fixed design: {mde:.3f} sd")
    early_only = runs_fixed - 2 * (MAX_PAIRS - EARLY_PAIRS) * NOT_TRIGGERED
    print(f"runs, fixed 50 per arm:              {runs_fixed}")
    print(f"runs, early decision alone:          {early_only}")
    print(f"runs, early decision + sequential:   mean {used.mean():.0f}, 5-95% "
          f"{np.percentile(used, 5):.0f}-{np.percentile(used, 95):.0f}  "
          f"({used.mean() / runs_fixed:.1%} of fixed, {used.mean() / early_only:.1%} of the early "
          "decision alone)")
    print("bug effect (x MDE)   impact rate fixed   impact rate sequential")
    for b, effect in enumerate(effects):
        label = "0 (no effect)" if effect == 0 else f"{effect / mde:.1f}"
        print(f"{label:20} {found_fixed[b] / args.studies:17.3f} {found_seq[b] / args.studies:22.3f}")


if __name__ == "__main__":
    main()
