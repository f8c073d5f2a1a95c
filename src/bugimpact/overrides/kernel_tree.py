"""The tree a one-fix arm's runtime builds its override library from, as the artifact made it
(``arm.prepare``): ``release/`` (the faithful build's files), ``arm/`` (this arm's), ``include/``
(headers the wheel lacks, stand-ins among them) and ``yaml/``; and whether it is still as made."""
import hashlib
from pathlib import Path

from ..harness.files import sha256_file
from ..io import atomic_open
from .release_source import STAND_IN


def write(tree, source, sides):
    """Writes the tree (``arm.prepare``): each side's files, the headers the wheel lacks, the
    generators' lists and the stand-ins; returns each side's file's sha256."""
    digests = {}
    for side, content in sides.items():
        for path, data in content.items():
            with atomic_open(tree / side / path, "wb") as handle:
                handle.write(data)
            digests[f"{side}/{path}"] = hashlib.sha256(data).hexdigest()
    for head, content in (("include", source.includes), ("yaml", source.yamls)):
        for path, data in content.items():
            with atomic_open(tree / head / path, "wb") as handle:
                handle.write(data)
    for name in source.standins:  # named in the manifest: a file that needs one fails to compile
        with atomic_open(tree / "include" / name, "wb") as handle:
            handle.write(STAND_IN)
    return digests


def not_as_made(part):
    """The files of a kernel part's tree (``arm.prepare``) that are not those it was made with, each
    with how: ``gone``, or ``edited since`` (its sha256 is not the manifest's). A tree edited
    since would build an arm that is neither the release nor the fix."""
    tree = Path((part or {}).get("tree") or ".")
    out = []
    for name, digest in sorted(((part or {}).get("sha256") or {}).items()):
        if not (tree / name).is_file():
            out.append((str(tree / name), "gone"))
        elif sha256_file(tree / name) != digest:
            out.append((str(tree / name), "edited since"))
    return out
