"""Runs a paper-scale study needs: 18 bugs with the paper's 50 runs per arm against the early
decision plus the group-sequential design (looks at 10, 20, 30 and 50 pairs, O'Brien-Fleming, each
bug spending alpha / 18, its share of the study's), simulated side by side on the same draws, with
Holm over the 10 tested bugs for both. The mix: 8 bugs not triggered (the early decision stops them
after 2 pairs), 6 triggered without an effect, 4 with small effects of 0.5, 1, 1.5 and 2 times the
fixed design's MDE at the Bonferroni level alpha / 10. Prints the study-wide familywise error too.

    python bench/sequential_runs.py [--studies 500]
"""
import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from bugimpact.stats.analysis import RANK_EFFICIENCY  # noqa: E402
from bugimpact.stats.effects import adjust, detectable_d  # noqa: E402
from bugimpact.stats.rank_tests import wilcoxon  # noqa: E402
from bugimpact.stats.sequential import design_from_config, run_design  # noqa: E402

NOT_TRIGGERED, NULL = 8, 6
SMALL = (0.5, 1.0, 1.5, 2.0)
MAX_PAIRS, EARLY_PAIRS = 50, 2


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--studies", type=int, default=500)
    args = parser.parse_args()
    bugs = NOT_TRIGGERED + NULL + len(SMALL)
    design = design_from_config({"enabled": True, "stages": [10, 20, 30]}, MAX_PAIRS, 0.05, 0.8, bugs)
    mde = detectable_d(MAX_PAIRS, None, 0.05 / (NULL + len(SMALL)), 0.8) / RANK_EFFICIENCY
    rng = np.random.RandomState(7)
    effects = [0.0] * NULL + [m * mde for m in SMALL]
    runs_fixed = 2 * MAX_PAIRS * (NOT_TRIGGERED + len(effects))
    used, found_fixed, found_seq = [], np.zeros(len(effects)), np.zeros(len(effects))
    fwer_fixed = fwer_seq = 0
    for _ in range(args.studies):
        runs = 2 * EARLY_PAIRS * NOT_TRIGGERED
        p_fixed, p_seq = [], []
        for effect in effects:
            x, y = rng.normal(effect, 1, MAX_PAIRS), np.zeros(MAX_PAIRS)
            result = run_design(design, x, y)
            runs += 2 * result["pairs"]
            p_seq.append(result["p"])
            p_fixed.append(wilcoxon(x, y).p_value)
        called_fixed = adjust(p_fixed, "holm") < 0.05
        called_seq = adjust(p_seq, "holm") < 0.05
        found_fixed += called_fixed
        found_seq += called_seq
        fwer_fixed += bool(called_fixed[:NULL].any())
        fwer_seq += bool(called_seq[:NULL].any())
        used.append(runs)
    used = np.asarray(used)
    print(f"{args.studies} simulated studies of 18 bugs; MDE of the fixed design at alpha / 10: "
          f"{mde:.3f} sd")
    se = np.sqrt(0.05 * 0.95 / args.studies)
    print(f"familywise error (a null bug called impact): fixed {fwer_fixed / args.studies:.3f}, "
          f"sequential {fwer_seq / args.studies:.3f} (Monte Carlo se at 0.05: {se:.3f})")
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
