"""The challenges (a study's data) by name: what each is read from, whether it has an official test
split, its shapes, and the raw file it owns. Kept apart from ``datasets`` (which reads the files,
with numpy) so that a run's process, which asks whether its challenge has a split (the experiment
key), imports no numpy."""
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from .io import write_json
from .plugins import Registry


@dataclass(frozen=True)
class Challenge:
    """A challenge's data: ``load(raw)`` returns the arrays, uint8 images N x C x H x W and int64
    labels, and where they came from. With an official split the arrays are ``x_train``,
    ``y_train``, ``x_test``, ``y_test``; without, ``x`` and ``y``, which ``train.test_fraction``
    splits (and which the experiment key then holds). ``shape`` (C, H, W), ``top`` (the largest
    pixel value) and ``sizes`` (train and test images) make random data in its shapes where the
    real data is not at hand (a reach trace, ``check-gpu``).

    ``raw``: the default path of the file (or folder) it is read from, set by ``data.<name>`` in
    the config (None: nothing, as scikit-learn's digits; ``about`` says what it is); it is an
    input of the data rule, so an edit remakes the challenge's data and the runs on it.
    ``check(raw)`` says what is wrong with it (preflight), as a list of (problem, what to do)."""
    load: Callable
    official_split: bool
    shape: tuple
    top: int
    sizes: tuple
    raw: Optional[str] = None
    check: Optional[Callable] = None
    about: str = ""  # what its raw file is (the config's documentation)


def raw_file(name, data_cfg):
    """Challenge ``name``'s raw file under the config's ``data`` (None when it reads none)."""
    default = named_challenge(name).raw
    return None if default is None else data_cfg.get(name, default)


def problems(name, data_cfg):
    """What keeps challenge ``name``'s raw file from being read: (problem, what to do) pairs."""
    path, check = raw_file(name, data_cfg), named_challenge(name).check
    if path is None:
        return []
    if not Path(path).exists():
        return [(f"missing {path}", f"put it there (data.{name} in the config)")]
    return check(Path(path)) if check else []


def _digits(raw):
    from .datasets import load_digits  # numpy: a run's process asks the registry, never for data
    return load_digits(), "sklearn.datasets.load_digits"


def _digits32(raw):
    from .datasets import at_cifar_shape, load_digits  # numpy: a run's process asks the registry, never for data
    return at_cifar_shape(load_digits(), 16), "sklearn.datasets.load_digits at 3x32x32"


def _cifar10(raw):
    from .datasets import load_cifar10  # numpy: a run's process asks the registry, never for data
    return load_cifar10(raw), str(raw)


def _mnist(raw):
    from .datasets import load_mnist  # numpy: a run's process asks the registry, never for data
    return load_mnist(raw), str(raw)


def _official(kind):
    def check(path):
        from .datasets import official_problems  # numpy: a run's process asks the registry, never for data
        return official_problems(kind, path)
    return check


CHALLENGES = Registry("challenge", "train.challenge", {  # digits' 1797 images split 75/25, as the harness splits them
    "digits": Challenge(_digits, False, (1, 8, 8), 16, (1347, 450)),
    # the same images at CIFAR-10's shape: VGG-X and AlexNet runs on real data, offline
    "digits32": Challenge(_digits32, False, (3, 32, 32), 255, (1347, 450)),
    "cifar10": Challenge(_cifar10, True, (3, 32, 32), 255, (50000, 10000),
                         "data/raw/cifar-10-python.tar.gz", _official("cifar10"),
                         "the official cifar-10-python.tar.gz (md5-checked)"),
    "mnist": Challenge(_mnist, True, (1, 28, 28), 255, (60000, 10000), "data/raw/mnist",
                       _official("mnist"), "a folder of the four official idx files, gzipped or not (md5-checked)")})
register_challenge = CHALLENGES.add  # (name, Challenge): a plugin's (``bugimpact.plugins``)
challenges = CHALLENGES.every  # name -> Challenge, the plugins' included
named_challenge = CHALLENGES.named


def prepare(challenge, out_npz, out_meta, data_cfg=None):
    """Read a challenge's data (from its raw file under ``data_cfg``, the config's ``data``; its
    default without one) into
    the .npz the harness loads, and its metadata: where it came from, its sha256 and its shapes."""
    # numpy: a run's process asks the registry, never for data
    from .datasets import content_sha256, sha256_file, write_npz
    arrays, source = named_challenge(challenge).load(raw_file(challenge, data_cfg or {}))
    write_npz(out_npz, arrays)
    meta = {"challenge": challenge, "source": source, "sha256": sha256_file(out_npz),
            "content_sha256": content_sha256(arrays),
            "shapes": {k: list(v.shape) for k, v in sorted(arrays.items())}}
    write_json(out_meta, meta)
    return meta
