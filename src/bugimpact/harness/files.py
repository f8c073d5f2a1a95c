"""File digests, standard library only: the harness checks its data with them, and the host side
(wheels, datasets, artifacts) uses the same ones without importing numpy."""
import hashlib


def file_digest(path, algorithm="sha256"):
    """Hex digest of a file, read in blocks. The host side uses this one too."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_file(path):
    return file_digest(path, "sha256")
