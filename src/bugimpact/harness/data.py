"""Canonical datasets: a checked ``.npz``, a seeded split, train-split normalisation, seeded order."""
import numpy as np

from .files import sha256_file


class DataError(Exception):
    pass


SPLIT_SEED = 0


def load(path, expected_sha256, test_fraction):
    """Arrays as float32 NCHW plus int64 labels, after the hash check.

    Datasets with an official test split keep it; the others are split once, by a fixed seed, as if
    the split were official: a split drawn per run would add test-set sampling noise (std ~0.007 in
    accuracy on digits) to every run's metric and hide what training does.
    """
    actual = sha256_file(path)
    if expected_sha256 and actual != expected_sha256:
        raise DataError("%s: sha256 %s does not match the expected %s; refusing to train"
                        % (path, actual, expected_sha256))
    with np.load(path) as arrays:
        arrays = {k: arrays[k] for k in arrays.files}
    if "x_test" in arrays:
        x_train, y_train = arrays["x_train"], arrays["y_train"]
        x_test, y_test = arrays["x_test"], arrays["y_test"]
    else:
        order = np.random.RandomState(SPLIT_SEED).permutation(len(arrays["y"]))
        n_test = int(round(len(order) * test_fraction))
        test, train = order[:n_test], order[n_test:]
        x_train, y_train = arrays["x"][train], arrays["y"][train]
        x_test, y_test = arrays["x"][test], arrays["y"][test]
    x_train = x_train.astype(np.float32)
    x_test = x_test.astype(np.float32)
    # Statistics of the training split only (the paper used MNIST's numbers for CIFAR-10).
    mean = x_train.mean(axis=(0, 2, 3), keepdims=True, dtype=np.float64).astype(np.float32)
    std = x_train.std(axis=(0, 2, 3), keepdims=True, dtype=np.float64).astype(np.float32)
    std[std == 0] = 1.0
    return {"x_train": (x_train - mean) / std, "y_train": y_train.astype(np.int64),
            "x_test": (x_test - mean) / std, "y_test": y_test.astype(np.int64),
            "sha256": actual, "num_classes": int(max(y_train.max(), y_test.max()) + 1)}


def batches(x, y, batch_size, rng=None, augment=False):
    """Minibatches in a seeded order that changes every epoch (numpy only: no DataLoader, whose
    ``generator=`` needs torch 1.6)."""
    order = rng.permutation(len(y)) if rng is not None else np.arange(len(y))
    for start in range(0, len(order), batch_size):
        index = order[start:start + batch_size]
        xb = x[index]
        if augment and rng is not None:
            xb = _augment(xb, rng)
        yield xb, y[index]


def _augment(xb, rng):
    """Seeded random crop (zero padding of 1/8 of the side) and horizontal flip."""
    n, _, h, w = xb.shape
    pad = max(1, h // 8)
    padded = np.pad(xb, ((0, 0), (0, 0), (pad, pad), (pad, pad)), mode="constant")
    dy = rng.randint(0, 2 * pad + 1, size=n)
    dx = rng.randint(0, 2 * pad + 1, size=n)
    flip = rng.rand(n) < 0.5
    out = np.empty_like(xb)
    for i in range(n):
        crop = padded[i, :, dy[i]:dy[i] + h, dx[i]:dx[i] + w]
        out[i] = crop[:, :, ::-1] if flip[i] else crop
    return out
