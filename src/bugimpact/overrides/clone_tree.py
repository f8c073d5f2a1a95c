"""A commit of a clone as the release's tree (``CloneTree``): the files its build compiles, the
files a reconstruction changed on it, and the headers of the submodules it pins, read from a clone
of each (``artifacts.onefix.submodules``) at the commit the tree pins: the release's build put
their ``include/`` folders on its include path (cpuinfo's ``cpuinfo.h``, FBGEMM's
``fbgemm/Fbgemm.h``)."""
import subprocess
from pathlib import Path

from ..framework.tables import GitTree

# where an included name lives in the source tree, besides the including file's own folder (TH's
# build puts its folder on the include path: THNN.h includes <THGenerateFloatTypes.h>)
INCLUDE_ROOTS = ("aten/src/", "", "torch/csrc/api/include/", "aten/src/ATen/", "aten/src/TH/")


class CloneTree(GitTree):
    """A commit of a clone as the release's tree, with the files the release changed on it (a
    reconstruction's cherry-picked fix) and its submodules' clones (path in the tree -> clone):
    bytes for the build, text for the tables."""

    def __init__(self, clone, commit, changed=None, submodules=None):
        super().__init__(clone, commit)
        self.changed = dict(changed or {})
        self.submodules = dict(submodules or {})

    @property
    def include_roots(self):
        """Where the release's build finds an included name: its own roots, then each submodule's
        ``include/``."""
        return INCLUDE_ROOTS + tuple(f"{path.rstrip('/')}/include/" for path in sorted(self.submodules))

    def read_bytes(self, path):
        if path in self.changed:
            return self.changed[path]
        inside = next((s for s in self.submodules if path.startswith(s.rstrip("/") + "/")), None)
        if inside:
            return self._pinned(inside, path[len(inside.rstrip("/")) + 1:])
        out = subprocess.run(["git", "-C", self.clone, "cat-file", "blob", f"{self.commit}:{path}"], capture_output=True)
        return out.stdout if out.returncode == 0 else None

    def _pinned(self, submodule, path):
        """``path`` of ``submodule`` at the commit this tree pins it to (its gitlink), from its
        clone; None where the tree pins none or the clone lacks that commit."""
        pin = subprocess.run(["git", "-C", self.clone, "ls-tree", self.commit, submodule.rstrip("/")],
                             capture_output=True, text=True).stdout.split()
        if len(pin) < 3 or pin[1] != "commit":
            return None
        out = subprocess.run(["git", "-C", self.submodules[submodule], "cat-file", "blob", f"{pin[2]}:{path}"],
                             capture_output=True)
        return out.stdout if out.returncode == 0 else None

    def read(self, path):
        if path in self.changed:
            return self.changed[path].decode("utf-8", "replace")
        return super().read(path)

    def read_many(self, paths):
        return {**super().read_many([p for p in paths if p not in self.changed]),
                **{p: self.read(p) for p in paths if p in self.changed}}

    def where(self):
        """How the runtime step opens this tree again (``open_tree``)."""
        return {"clone": self.clone, "commit": self.commit, "changed": sorted(self.changed),
                **({"submodules": self.submodules} if self.submodules else {})}


def open_tree(where, clone=None):
    """The release tree a manifest's ``kernels.source.tree`` names (``CloneTree.where``), or
    None; ``clone``: where the clone is now, if it moved. The changed files are the manifest's own."""
    if not where:
        return None
    path = clone or where["clone"]
    if not Path(path, "HEAD").exists() and not Path(path, ".git").exists():
        raise LookupError(f"the release's tree was read from the clone {path}, which is gone")
    return CloneTree(path, where["commit"], submodules=where.get("submodules"))


def clone_commit(clone, ref):
    """The commit ``ref`` names in the clone (a tag, or a sha), or None where the clone lacks it."""
    out = subprocess.run(["git", "-C", str(clone), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
                         capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else None
