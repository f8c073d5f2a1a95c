"""The challenges (a study's data) by name: what each is read from, whether it has an official test
split, and its shapes. Kept apart from ``datasets`` (which reads the files, with numpy) so that a
run's process, which asks whether its challenge has a split (the experiment key), imports no numpy."""
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Challenge:
    """A challenge's data: ``load(files)`` returns the arrays, uint8 images N x C x H x W and
    int64 labels, and where they came from (``files``: the config's data paths, ``data.cifar10``
    and ``data.mnist``). With an official split the arrays are ``x_train``, ``y_train``,
    ``x_test``, ``y_test``; without, ``x`` and ``y``, which ``train.test_fraction`` splits (and
    which the experiment key then holds). ``shape`` (C, H, W), ``top`` (the largest pixel value)
    and ``sizes`` (train and test images) make random data in its shapes where the real data is
    not at hand (a reach trace, ``check-gpu``)."""
    load: Callable
    official_split: bool
    shape: tuple
    top: int
    sizes: tuple


def _digits(files):
    from .datasets import load_digits
    return load_digits(), "sklearn.datasets.load_digits"


def _cifar10(files):
    from .datasets import load_cifar10
    return load_cifar10(files["cifar10"]), str(files["cifar10"])


def _mnist(files):
    from .datasets import load_mnist
    return load_mnist(files["mnist"]), str(files["mnist"])


CHALLENGES = {  # digits' 1797 images split 75/25, as the harness splits them
    "digits": Challenge(_digits, False, (1, 8, 8), 16, (1347, 450)),
    "cifar10": Challenge(_cifar10, True, (3, 32, 32), 255, (50000, 10000)),
    "mnist": Challenge(_mnist, True, (1, 28, 28), 255, (60000, 10000))}


def register_challenge(name, challenge):
    """Add a ``Challenge`` (a plugin's: ``bugimpact.plugins``)."""
    from .plugins import register
    return register(CHALLENGES, name, challenge, "challenge")


def challenges():
    """Every challenge, the plugins' included: name -> Challenge."""
    from .plugins import every
    return every(CHALLENGES)


def named_challenge(name):
    from .plugins import lookup
    try:
        return lookup(CHALLENGES, name)
    except KeyError:
        raise ValueError(f"unknown challenge {name!r}; known: {', '.join(CHALLENGES)}") from None


def prepare(challenge, out_npz, out_meta, cifar10=None, mnist=None):
    """Read a challenge's data (``cifar10``, ``mnist``: the config's paths) into the .npz the
    harness loads, and its metadata: where it came from, its sha256 and its shapes."""
    from .datasets import content_sha256, sha256_file, write_npz
    from .io import write_json
    arrays, source = named_challenge(challenge).load({"cifar10": cifar10, "mnist": mnist})
    write_npz(out_npz, arrays)
    meta = {"challenge": challenge, "source": source, "sha256": sha256_file(out_npz),
            "content_sha256": content_sha256(arrays),
            "shapes": {k: list(v.shape) for k, v in sorted(arrays.items())}}
    write_json(out_meta, meta)
    return meta
