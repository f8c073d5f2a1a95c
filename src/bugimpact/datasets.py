"""Host side: turn each challenge's official files into a canonical ``.npz`` plus its sha256.

The harness may run where scikit-learn (or anything else) is absent, so every format is decoded
here once. The ``.npz`` is written byte-reproducibly (fixed zip timestamps, stored entries), so the
same source data gives the same hash on every machine.
"""
import gzip
import hashlib
import io
import pickle
import struct
import tarfile
import zipfile
from pathlib import Path

import numpy as np

from .harness.files import file_digest, sha256_file  # noqa: F401 (sha256_file: re-exported)
from .io import InputError, atomic_open

CIFAR10_MD5 = "c58f30108f718f92721af3b95e74349a"
MNIST_FILES = {  # official names and md5 of the gzip files
    "train_images": ("train-images-idx3-ubyte", "f68b3c2dcbeaaa9fbdd348bbdeb94873"),
    "train_labels": ("train-labels-idx1-ubyte", "d53e105ee54ea40749a09fcbcd1e9432"),
    "test_images": ("t10k-images-idx3-ubyte", "9fb629c4189551a2d022fa330f9573f3"),
    "test_labels": ("t10k-labels-idx1-ubyte", "ec29112dd5afa0611ce80d1b7f02629c"),
}


def md5_file(path):
    return file_digest(path, "md5")


def _check_md5(path, expected):
    if expected and md5_file(path) != expected:
        raise InputError(path, f"md5 {md5_file(path)} does not match the official {expected}; "
                               "the file is corrupt or not the official release")


def official_problems(kind, path):
    """What makes ``path`` not the official release of ``kind`` (cifar10: the tarball; mnist: the
    folder of idx files, gzipped as distributed (md5-checked) or unpacked): (problem, fix) pairs."""
    path = Path(path)
    if kind == "cifar10":
        files = {path: CIFAR10_MD5}
    else:
        files = {}
        for stem, md5 in MNIST_FILES.values():
            raw = path / stem
            files.update({raw: None} if raw.exists() and not (path / f"{stem}.gz").exists()
                         else {path / f"{stem}.gz": md5})
    missing = [str(p) for p in files if not p.exists()]
    if missing:
        return [(f"missing {', '.join(missing)}", f"put the official files there (data.{kind} in the config)")]
    wrong = [f"{p} (md5 {md5_file(p)})" for p, md5 in files.items() if md5 and md5_file(p) != md5]
    return [(f"not the official files: {', '.join(wrong)}", "download the official release again")] if wrong else []


def load_digits():
    from sklearn.datasets import load_digits as sk_digits  # scikit-learn: seconds to import, for digits only
    bunch = sk_digits()
    x = bunch.images.astype(np.uint8)[:, None, :, :]  # 0..16 grey levels, 8x8
    return {"x": x, "y": bunch.target.astype(np.int64)}


def at_cifar_shape(arrays, top):
    """Images of another challenge at CIFAR-10's shape (3 x 32 x 32, 0-255): each pixel scaled
    from 0-``top`` to 0-255, repeated to a square block (8x8 grows by 4), and put in each of the
    three channels. A model made for 32x32 colour images then runs on real images and labels, with
    every shape its CIFAR-10 runs have, where CIFAR-10 itself is not at hand."""
    x = arrays["x"]
    factor = 32 // x.shape[-1]
    if x.shape[1] != 1 or x.shape[-2:] != (32 // factor, 32 // factor):
        raise ValueError(f"images of shape {x.shape[1:]}: a grey square that divides 32 is needed")
    scaled = ((x.astype(np.uint32) * 255 + top // 2) // top).astype(np.uint8)
    grown = scaled.repeat(factor, axis=2).repeat(factor, axis=3)
    return {"x": np.ascontiguousarray(grown.repeat(3, axis=1)), "y": arrays["y"]}


def load_cifar10(tarball, md5=CIFAR10_MD5):
    """The official python tarball: data_batch_1..5 and test_batch, pickled dicts."""
    tarball = Path(tarball)
    if not tarball.exists():
        raise InputError(tarball, "CIFAR-10 tarball not found (cifar-10-python.tar.gz; data.cifar10)")
    _check_md5(tarball, md5)
    parts = {}
    with tarfile.open(tarball, "r:gz") as archive:
        for member in archive.getmembers():
            name = Path(member.name).name
            if name.startswith("data_batch_") or name == "test_batch":
                batch = pickle.load(archive.extractfile(member), encoding="bytes")
                parts[name] = (np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32),
                               np.asarray(batch[b"labels"], dtype=np.int64))
    train = [parts[f"data_batch_{i}"] for i in range(1, 6) if f"data_batch_{i}" in parts]
    if len(train) != 5 or "test_batch" not in parts:
        raise InputError(tarball, f"expected data_batch_1..5 and test_batch, found {sorted(parts)}")
    return {"x_train": np.concatenate([p[0] for p in train]),
            "y_train": np.concatenate([p[1] for p in train]),
            "x_test": parts["test_batch"][0], "y_test": parts["test_batch"][1]}


def _read_idx(path, expected_magic):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as handle:
        raw = handle.read()
    magic, count = struct.unpack(">II", raw[:8])
    if magic != expected_magic:
        raise InputError(path, f"idx magic {magic:#010x}, expected {expected_magic:#010x}")
    if magic == 0x803:
        rows, cols = struct.unpack(">II", raw[8:16])
        data = np.frombuffer(raw, dtype=np.uint8, offset=16)
        if data.size != count * rows * cols:
            raise InputError(path, f"truncated: {data.size} bytes for {count}x{rows}x{cols}")
        return data.reshape(count, 1, rows, cols)
    data = np.frombuffer(raw, dtype=np.uint8, offset=8)
    if data.size != count:
        raise InputError(path, f"truncated: {data.size} labels, header says {count}")
    return data.astype(np.int64)


def load_mnist(folder, md5s=None):
    """The four official idx files (gzipped as distributed, or unpacked)."""
    folder = Path(folder)
    md5s = {k: v[1] for k, v in MNIST_FILES.items()} if md5s is None else md5s
    arrays = {}
    for key, (stem, _) in MNIST_FILES.items():
        candidates = [folder / f"{stem}.gz", folder / stem]
        path = next((p for p in candidates if p.exists()), None)
        if path is None:
            raise InputError(folder, f"MNIST file {stem}(.gz) not found (data.mnist)")
        if path.suffix == ".gz":
            _check_md5(path, md5s.get(key))
        arrays[key] = _read_idx(path, 0x803 if key.endswith("images") else 0x801)
    return {"x_train": arrays["train_images"], "y_train": arrays["train_labels"],
            "x_test": arrays["test_images"], "y_test": arrays["test_labels"]}


def content_sha256(arrays):
    digest = hashlib.sha256()
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}:{array.dtype.str}:{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def write_npz(path, arrays):
    """A byte-reproducible ``.npz`` (np.savez stamps the current time into the zip)."""
    with atomic_open(path, "wb") as handle:
        with zipfile.ZipFile(handle, "w", zipfile.ZIP_STORED) as archive:
            for name in sorted(arrays):
                buffer = io.BytesIO()
                np.lib.format.write_array(buffer, np.ascontiguousarray(arrays[name]),
                                          allow_pickle=False)
                info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
                archive.writestr(info, buffer.getvalue())
