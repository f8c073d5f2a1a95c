"""The kernel part of a one-fix arm (a compiled fix of kind ``op``, ``compiled``), made with the
artifact: the release's own source of the files the fix rebuilds, and the fix placed on them the
way ``onefix.direction_of`` finds it goes."""
import hashlib
import zipfile
from pathlib import Path

from ..framework import patch
from ..io import atomic_open
from . import release_files
from .onefix import Refused, direction_of


def prepare(kernels, sources, arm, wheel, version, folder):
    """The kernel part of a one-fix arm: the release's own source of the files the fix rebuilds
    (``release_files.find``), the fix placed on them the one way it goes, and the tree the
    runtime builds the override from (``kernels.build``): ``release/`` (the faithful build's
    files), ``arm/`` (this arm's), ``include/`` (headers the wheel lacks) and ``yaml/``.

    Returns ``(fix_in_release, apply, part)``: ``part`` is None where this arm is the release as
    shipped (nothing to build), else the manifest's ``kernels``. Refuses (``onefix.Refused``)
    where no release source is at hand or the fix does not place on it."""

    with zipfile.ZipFile(wheel) as archive:
        shipped = {n[len("torch/include/"):] for n in archive.namelist() if n.startswith("torch/include/")}
    try:
        source = release_files.find(sources, arm, version, kernels.built, shipped)
    except LookupError as exc:
        raise Refused(str(exc)) from None
    release = dict(source.files)
    diffs = [fd for fd in patch.parse(kernels.diff) if fd.name in kernels.built]
    direction, placed, placement = direction_of(diffs, {**{p: None for fd in diffs for p in (fd.path, fd.old_path) if p},
                                                        **release})
    fix_in_release = direction == "reverse"
    apply = None if arm["arm"] == ("corrected" if fix_in_release else "buggy") else direction
    tree = (Path(folder) / "kernels").resolve()
    sides = {"release": release, "arm": {**release, **(placed if apply else {})}}
    digests = {}
    for side, files in sides.items():
        for path, data in files.items():
            with atomic_open(tree / side / path, "wb") as handle:
                handle.write(data)
            digests[f"{side}/{path}"] = hashlib.sha256(data).hexdigest()
    for head, files in (("include", source.includes), ("yaml", source.yamls)):
        for path, data in files.items():
            with atomic_open(tree / head / path, "wb") as handle:
                handle.write(data)
    for name in source.standins:  # named in the manifest: a file that needs one fails to compile
        with atomic_open(tree / "include" / name, "wb") as handle:
            handle.write(b"/* bugimpact: a stand-in; no source of the release holds this header */\n")
    part = {"kind": kernels.kind, "changed": kernels.built, "cuda_left_out": kernels.files.get("cuda", []),
            "rebuild": sorted(p for p in release if not p.endswith(".h")), "tree": str(tree),
            "source": source.describe(), "placement": placement, "sha256": digests,
            "diff_sha256": hashlib.sha256(kernels.diff.encode()).hexdigest()}
    return fix_in_release, apply, part if apply else None
