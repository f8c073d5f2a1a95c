"""Time per epoch of the harness against a bare PyTorch loop: same model, data and seed,
interleaved in one process so machine noise hits both alike. Target: ratio <= 1.05.

    python bench/harness_overhead.py [--model smallcnn] [--epochs 8] [--rounds 5]
"""
import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from bugimpact.challenges import prepare  # noqa: E402
from bugimpact.harness import data, models, run  # noqa: E402


def bare_epochs(npz, seed, model_name, epochs, batch_size, lr, momentum):
    """A plain training loop with per-epoch test accuracy, no fingerprints or records."""
    ds = data.load(npz, None, 0.25)
    torch.manual_seed(seed)
    model = models.build(model_name, ds["x_train"].shape[1], ds["num_classes"], ds["x_train"].shape[2])
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    rng = np.random.RandomState(seed)
    times = []
    for _ in range(epochs):
        start = time.time()
        model.train()
        for xb, yb in data.batches(ds["x_train"], ds["y_train"], batch_size, rng):
            opt.zero_grad()
            loss = F.nll_loss(model(torch.from_numpy(np.ascontiguousarray(xb))), torch.from_numpy(yb))
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            pred = model(torch.from_numpy(ds["x_test"])).argmax(1).numpy()
        float(np.mean(pred == ds["y_test"]))
        times.append(time.time() - start)
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="smallcnn")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        npz = Path(tmp) / "digits.npz"
        meta = prepare("digits", npz, Path(tmp) / "digits.json")
        spec = {"bug": "bench", "arm": "buggy", "run": 0, "seed": 5, "model": args.model,
                "data": str(npz), "data_sha256": meta["sha256"], "epochs": args.epochs,
                "batch_size": 32, "lr": 0.02, "momentum": 0.5, "threads": 1}
        harness, bare = [], []
        for _ in range(args.rounds):
            record = run.train(spec)
            harness += [e["wall_s"] for e in record["epochs"][1:]]  # first epoch: warm-up
            bare += bare_epochs(npz, 5, args.model, args.epochs, 32, 0.02, 0.5)[1:]
    h, b = statistics.median(harness), statistics.median(bare)
    print(f"model {args.model}, {args.epochs} epochs x {args.rounds} rounds, interleaved")
    print(f"median epoch: harness {h * 1000:.1f} ms, bare loop {b * 1000:.1f} ms")
    print(f"ratio harness/bare = {h / b:.3f} (target <= 1.05)")


if __name__ == "__main__":
    main()
