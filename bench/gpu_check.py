"""`bugimpact check-gpu`'s figures as ratios, for a study's model on this machine's GPU: an epoch's
time over its FLOP floor (target for VGG-X on an H100-class GPU: at most 1.6, an epoch of 3.5 s
over a floor of 2.2 s), and runs per GPU-hour at k runs per GPU over one run per GPU (target for
VGG-X: the best k and the device-resident harness together at least 1.5x the 1-per-GPU rate of the
version before them). Needs a GPU; without one it says so and exits 1.

    python bench/gpu_check.py [--config configs/paper.yaml] [--epochs 1] [--shares 1 2 4 8]
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from bugimpact import gpucheck  # noqa: E402
from bugimpact.config import load_config  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="config.yaml")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--shares", type=int, nargs="+", default=[1, 2, 4, 8])
    args = parser.parse_args()
    try:
        result = gpucheck.check(load_config(args.config), epochs=args.epochs, shares=args.shares)
    except gpucheck.NoGpuHere as exc:
        print(f"bench/gpu_check.py: {exc}")
        return 1
    print(gpucheck.text(result))
    det, floor = result["determinism"], result["floor"]
    print(f"same seed, separate processes, bit-identical = {float(det['identical']):.0f}")
    if floor["floor_s"]:
        print(f"epoch / FLOP floor = {det['epoch_s'] / floor['floor_s']:.2f}")
    base = result["sharing"][0]
    for row in result["sharing"][1:]:
        print(f"runs per GPU-hour, {row['runs_per_gpu']} per GPU / {base['runs_per_gpu']} per GPU = "
              f"{row['runs_per_gpu_hour'] / base['runs_per_gpu_hour']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
