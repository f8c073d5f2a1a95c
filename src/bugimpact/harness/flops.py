"""What one epoch of a run costs in floating-point operations, and how fast this device does FP32
matrix products: the floor an epoch's time is measured against (``bugimpact check-gpu``).

Usage: ``python -m bugimpact.harness.flops`` with a run spec on standard input; prints one JSON
line. Runs inside the runtime under study (standard library, numpy and torch; Python 3.6 syntax).
FLOPs are counted by ``torch.utils.flop_counter`` (torch 2.1 and later; before, ``flops`` is
null and says why): one training step (forward and backward) and one evaluation batch, scaled to
the epoch's images. The rate is measured, not looked up: FP32 products of 4096 x 4096 matrices
with TF32 off, the arithmetic the harness's runs do by default (1024 x 1024 on a CPU).
"""
import json
import sys
import time

import torch
import torch.nn.functional as F

from . import data, determinism, models


def _counted(work):
    try:
        from torch.utils.flop_counter import FlopCounterMode  # torch 2.1+ only: feature-detected
    except ImportError:  # before torch 2.1
        return None
    counter = FlopCounterMode(display=False)
    with counter:
        work()
    return int(counter.get_total_flops())


def epoch_flops(spec):
    """FLOPs of one epoch of ``spec``'s training and evaluation, or None before torch 2.1."""
    dataset = data.load(spec["data"], spec.get("data_sha256"), spec.get("test_fraction", 0.25))
    device = torch.device(spec.get("device", "cpu"))
    x_train = dataset["x_train"]
    model = models.of_spec(spec, x_train, dataset["num_classes"]).to(device)
    batch = min(int(spec.get("batch_size", 64)), len(x_train))
    xb = torch.from_numpy(x_train[:batch]).to(device)
    yb = torch.from_numpy(dataset["y_train"][:batch]).to(device)

    def step():
        model.train()
        F.nll_loss(model(xb), yb).backward()
    per_train_image = _counted(step)
    if per_train_image is None:
        return None
    model.eval()
    test = torch.from_numpy(dataset["x_test"][:batch]).to(device)
    with torch.no_grad():
        per_test_image = _counted(lambda: model(test)) / float(len(test))
    return {"train": per_train_image / float(batch) * len(x_train),
            "test": per_test_image * len(dataset["x_test"]),
            "train_images": len(x_train), "test_images": len(dataset["x_test"])}


def matmul_rate(device, seconds=2.0):
    """FP32 matrix-product FLOP/s on ``device`` (TF32 off), the best of repeated timings (a GPU
    needs large products to approach its peak; a CPU thread would take seconds for one)."""
    size = 4096 if device.type == "cuda" else 1024
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=generator).to(device)
    b = torch.randn(size, size, generator=generator).to(device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    torch.mm(a, b)
    sync()
    best, deadline = None, time.time() + seconds
    while time.time() < deadline:
        start = time.time()
        for _ in range(5):
            torch.mm(a, b)
        sync()
        took = (time.time() - start) / 5
        best = took if best is None else min(best, took)
    return 2.0 * size ** 3 / best


def main():
    spec = json.load(sys.stdin)
    flags = determinism.configure(spec.get("threads", 1), spec.get("device", "cpu"), False)
    device = torch.device(spec.get("device", "cpu"))
    flops = epoch_flops(spec)
    result = {"flops": flops, "matmul_flops_per_s": matmul_rate(device),
              "torch": torch.__version__, "threads": flags["threads"],
              "device_name": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu"}
    if flops is None:
        result["why"] = "torch %s has no torch.utils.flop_counter (2.1 and later)" % torch.__version__
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
