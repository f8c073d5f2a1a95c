"""Dataset preparation from files written here in the official CIFAR-10 and MNIST formats."""
import gzip
import hashlib
import io
import pickle
import struct
import tarfile

import numpy as np
import pytest

from bugimpact.challenges import prepare
from bugimpact.datasets import content_sha256, load_cifar10, load_mnist, md5_file, sha256_file, write_npz
from bugimpact.io import InputError


def make_cifar(path, per_batch=6):
    rng = np.random.RandomState(0)
    with tarfile.open(path, "w:gz") as archive:
        for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
            batch = {b"data": rng.randint(0, 256, (per_batch, 3072)).astype(np.uint8),
                     b"labels": list(rng.randint(0, 10, per_batch)), b"batch_label": name.encode()}
            raw = pickle.dumps(batch, protocol=2)
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(raw)
            archive.addfile(info, io.BytesIO(raw))
    return path


def idx_images(images):
    n, rows, cols = images.shape
    return struct.pack(">IIII", 0x803, n, rows, cols) + images.astype(np.uint8).tobytes()


def idx_labels(labels):
    return struct.pack(">II", 0x801, len(labels)) + np.asarray(labels, np.uint8).tobytes()


def make_mnist(folder, n=7):
    rng = np.random.RandomState(1)
    files = {"train-images-idx3-ubyte": idx_images(rng.randint(0, 256, (n, 28, 28))),
             "train-labels-idx1-ubyte": idx_labels(rng.randint(0, 10, n)),
             "t10k-images-idx3-ubyte": idx_images(rng.randint(0, 256, (3, 28, 28))),
             "t10k-labels-idx1-ubyte": idx_labels(rng.randint(0, 10, 3))}
    md5s = {}
    for (name, raw), key in zip(files.items(), ["train_images", "train_labels", "test_images",
                                                 "test_labels"]):
        path = folder / f"{name}.gz"
        path.write_bytes(gzip.compress(raw, mtime=0))
        md5s[key] = md5_file(path)
    return md5s


def test_cifar10_official_layout_and_md5(tmp_path):
    tarball = make_cifar(tmp_path / "cifar-10-python.tar.gz")
    arrays = load_cifar10(tarball, md5=md5_file(tarball))
    assert arrays["x_train"].shape == (30, 3, 32, 32) and arrays["x_test"].shape == (6, 3, 32, 32)
    assert arrays["y_train"].dtype == np.int64
    with pytest.raises(InputError, match="does not match the official c58f3010"):
        load_cifar10(tarball)  # the official md5 refuses our small file
    with pytest.raises(InputError, match="not found"):
        load_cifar10(tmp_path / "missing.tar.gz")


def test_mnist_idx_files_and_md5(tmp_path):
    md5s = make_mnist(tmp_path)
    arrays = load_mnist(tmp_path, md5s)
    assert arrays["x_train"].shape == (7, 1, 28, 28) and arrays["y_test"].shape == (3,)
    with pytest.raises(InputError, match="md5"):
        load_mnist(tmp_path)  # official checksums
    (tmp_path / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(
        struct.pack(">II", 0x801, 5) + b"\x01\x02", mtime=0))
    md5s["test_labels"] = None
    with pytest.raises(InputError, match="truncated"):
        load_mnist(tmp_path, md5s)


def test_npz_is_byte_reproducible_and_hashed(tmp_path):
    arrays = {"x": np.arange(12, dtype=np.uint8).reshape(3, 1, 2, 2), "y": np.array([0, 1, 2])}
    write_npz(tmp_path / "a.npz", arrays)
    write_npz(tmp_path / "b.npz", arrays)
    assert sha256_file(tmp_path / "a.npz") == sha256_file(tmp_path / "b.npz")
    with np.load(tmp_path / "a.npz") as back:
        assert (back["x"] == arrays["x"]).all()
    assert content_sha256(arrays) != content_sha256({**arrays, "y": np.array([0, 1, 1])})


def test_prepare_digits_metadata(tmp_path):
    meta = prepare("digits", tmp_path / "d.npz", tmp_path / "d.json")
    assert meta["shapes"] == {"x": [1797, 1, 8, 8], "y": [1797]}
    assert meta["sha256"] == hashlib.sha256((tmp_path / "d.npz").read_bytes()).hexdigest()


def test_prepared_cifar_trains_in_the_harness(tmp_path):
    """The canonical file a host prepares is what the harness loads (normalised by train stats)."""
    from bugimpact.harness import data
    tarball = make_cifar(tmp_path / "c.tar.gz")
    import bugimpact.datasets as ds
    arrays = ds.load_cifar10(tarball, md5=md5_file(tarball))
    write_npz(tmp_path / "c.npz", arrays)
    loaded = data.load(tmp_path / "c.npz", sha256_file(tmp_path / "c.npz"), test_fraction=0.25)
    assert loaded["x_train"].shape == (30, 3, 32, 32) and loaded["x_test"].shape == (6, 3, 32, 32)
    assert np.allclose(loaded["x_train"].mean(axis=(0, 2, 3)), 0, atol=1e-5)
    assert np.allclose(loaded["x_train"].std(axis=(0, 2, 3)), 1, atol=1e-4)


def test_digits32_is_digits_at_cifar_shape(tmp_path):
    """Each digit pixel, scaled from 0-16 to 0-255, fills a 4x4 block of each of three channels;
    the labels are digits' own."""
    meta = prepare("digits32", tmp_path / "d.npz", tmp_path / "d.json")
    assert meta["shapes"] == {"x": [1797, 3, 32, 32], "y": [1797]}
    from sklearn.datasets import load_digits as sk_digits
    digits = sk_digits()
    with np.load(tmp_path / "d.npz") as back:
        x, y = back["x"], back["y"]
    assert x.dtype == np.uint8 and (y == digits.target).all()
    assert x.max() == 255 and x.min() == 0
    assert (x[:, 0] == x[:, 1]).all() and (x[:, 0] == x[:, 2]).all()
    expected = np.round(digits.images * 255 / 16).astype(np.uint8)
    assert (x[:, 0, ::4, ::4] == expected).all() and (x[:, 0, 3::4, 3::4] == expected).all()
