"""The release's own source of a compiled fix's files: each kernel file the fix changes as the
release has it, the headers those files include that the wheel does not ship, and the release's
operator declarations (which say under which dispatch key each operator's kernel is registered).

A rebuilt file must be the release's: the fix's own commit is not (the master file at pr38674's
commit has 124 lines more than 1.5.1's, and breaks grouped Conv3d on it). Three ways in, tried in
this order:

- a clone that has the release's tag: the files at the tag;
- GitHub's files at the tag (``artifacts.onefix.api``);
- an archive shipped beside the fix's diff (``<id>.release.tar.xz``, made by
  ``bin/release-sources`` from a history without release branches). It may be a reconstruction:
  the master commit the release was cut from (found by matching the wheel's headers), plus the
  fix's own diff where the fix came to the release by a cherry-pick. It says so, and so does the
  manifest: only the faithful build's check (the release's training, bit for bit) vouches for it.

A header that no source holds (a third-party submodule's, such as ``nnpack.h``) is compiled as an
empty stand-in and named: a file that needed anything from it fails to compile, loudly.
"""
import io
import json
import re
import subprocess
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from ..framework.tables import GitTree
from ..io import atomic_open

YAMLS = ("aten/src/ATen/native/native_functions.yaml", "tools/autograd/derivatives.yaml")
INCLUDE = re.compile(rb'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
# where an included name lives in the source tree, besides the including file's own folder
INCLUDE_ROOTS = ("aten/src/", "", "torch/csrc/api/include/", "aten/src/ATen/")
TAG = re.compile(r"^v\d+\.\d+\.\d+(?:-?rc\d+)?$")


@dataclass
class ReleaseSource:
    origin: str  # in words: which tag, or which reconstruction
    reconstructed: bool
    files: dict  # source path -> bytes: the files to rebuild, as the release has them
    includes: dict = field(default_factory=dict)  # include name -> bytes: what the wheel lacks
    standins: list = field(default_factory=list)  # include names no source holds
    yamls: dict = field(default_factory=dict)  # YAMLS path -> bytes
    facts: dict = field(default_factory=dict)  # how it was found, for the manifest

    def describe(self):
        return {"origin": self.origin, "reconstructed": self.reconstructed,
                "standins": sorted(self.standins), **self.facts}


def closure(read, paths, shipped):
    """The headers that ``paths`` include (and they in turn) that the wheel does not ship:
    ``read(source path) -> bytes or None`` reads the release's tree, ``shipped`` is the set of
    include names under the wheel's ``torch/include``. Returns (includes, standins)."""
    includes, standins, seen = {}, set(), set()
    todo = [(path, read(path)) for path in paths]
    while todo:
        path, text = todo.pop()
        for name in (m.decode("utf-8", "replace") for m in INCLUDE.findall(text or b"")):
            if name in shipped or name in seen:
                continue
            seen.add(name)
            here = str(Path(path).parent / name)
            found = next(((p, data) for p in (here, *(root + name for root in INCLUDE_ROOTS))
                          if (data := read(p)) is not None), None)
            if found is None:
                if not _system(name):
                    standins.add(name)
                continue
            includes[name] = found[1]
            todo.append(found)
    return includes, sorted(standins)


def _system(name):
    """A header of the C++ library, the system or the compiler's intrinsics (``<vector>``,
    ``<sys/mman.h>``, ``<immintrin.h>``, ``<arm_neon.h>``): the compiler has it, or, for another
    machine's, the code around it is not compiled here."""
    return ("." not in name or name.startswith(("sys/", "linux/", "bits/")) or name in SYSTEM_HEADERS
            or bool(re.match(r"^\w*intrin\.h$", name)))


SYSTEM_HEADERS = {"math.h", "stdlib.h", "string.h", "stdio.h", "stdint.h", "limits.h", "float.h",
                  "assert.h", "errno.h", "unistd.h", "fcntl.h", "pthread.h", "dlfcn.h", "omp.h",
                  "cpuid.h", "stddef.h", "time.h", "signal.h", "execinfo.h", "cxxabi.h", "malloc.h",
                  "inttypes.h", "arm_neon.h", "altivec.h", "spe.h", "vecintrin.h"}


def from_tree(read, tag, paths, shipped, origin):
    """The release's source from a tree at its tag (``read(path) -> bytes or None``)."""
    files = {p: read(p) for p in paths}
    missing = sorted(p for p, data in files.items() if data is None)
    if missing:
        raise LookupError(f"{', '.join(missing)} not at {tag} in {origin}")
    includes, standins = closure(read, paths, shipped)
    yamls = {p: data for p in YAMLS if (data := read(p)) is not None}
    return ReleaseSource(f"{origin} at tag {tag}", False, files, includes, standins, yamls, {"tag": tag})


def clone_reader(clone, tag):
    """A reader of the clone's files at ``tag``, or None when the clone has no such tag."""
    if not TAG.match(tag):
        return None
    commit = subprocess.run(["git", "-C", str(clone), "rev-parse", "--verify", "--quiet",
                             f"refs/tags/{tag}^{{commit}}"], capture_output=True, text=True)
    if commit.returncode != 0:
        return None
    tree = GitTree(clone, commit.stdout.strip())

    def read(path):
        text = tree.read(path)
        return None if text is None else text.encode("utf-8")
    return read


def api_reader(client, repo, tag):
    """A reader of GitHub's files at ``tag`` (the contents API, raw)."""
    def read(path):
        return client.file_at(repo, path, tag)
    return read


ARCHIVE_SUFFIX = ".release.tar.xz"


def archive_of(patch):
    """The release source shipped beside a fix's patch: ``pr38674.diff`` -> the archive
    ``pr38674.release.tar.xz``, or the folder ``pr38674.release/`` of the same members (plain
    files a person can read: the compiled fault control's)."""
    stem = Path(patch).with_name(Path(patch).name[:-len(".diff")])
    folder = stem.with_name(stem.name + ".release")
    return folder if folder.is_dir() else stem.with_name(stem.name + ARCHIVE_SUFFIX)


def write_archive(path, source):
    """Ship a release source (``bin/release-sources``): a reproducible ``.tar.xz`` (sorted, no
    times or owners) holding ``SOURCE.json``, ``files/``, ``include/`` and ``yaml/``."""
    members = {"SOURCE.json": json.dumps(source.describe(), indent=1, sort_keys=True).encode() + b"\n"}
    members.update({f"files/{p}": d for p, d in source.files.items()})
    members.update({f"include/{n}": d for n, d in source.includes.items()})
    members.update({f"yaml/{p}": d for p, d in source.yamls.items()})
    with atomic_open(path, "wb") as handle, tarfile.open(fileobj=handle, mode="w:xz") as tar:
        for name, data in sorted(members.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))


def read_archive(path, paths):
    """The release source shipped in ``path``; ``paths``: the files the fix needs, each of which
    the archive must hold."""
    members = {}
    if Path(path).is_dir():
        members = {p.relative_to(path).as_posix(): p.read_bytes() for p in Path(path).rglob("*") if p.is_file()}
    else:
        with tarfile.open(path) as tar:
            for member in tar.getmembers():
                if member.isfile():
                    members[member.name] = tar.extractfile(member).read()
    facts = json.loads(members.pop("SOURCE.json"))
    parts = {head: {name[len(head) + 1:]: data for name, data in members.items()
                    if name.startswith(head + "/")} for head in ("files", "include", "yaml")}
    missing = sorted(set(paths) - set(parts["files"]))
    if missing:
        raise LookupError(f"{path} does not hold {', '.join(missing)}")
    origin = facts.pop("origin")
    return ReleaseSource(f"{origin} (shipped: {Path(path).name})", facts.pop("reconstructed"),
                         parts["files"], parts["include"], facts.pop("standins"), parts["yaml"], facts)


def find(sources, arm, version, paths, shipped):
    """The release's own source of ``paths`` (the kernel files a fix rebuilds and the headers it
    changes) for torch ``version``: the configured clone at its tag, else GitHub's files at the
    tag, else the archive shipped beside the fix's patch. ``shipped``: the include names the
    wheel has. Raises ``LookupError`` saying where it looked."""
    tag, tried = f"v{version}", []
    clone = sources.get("fix_clone")
    if clone:
        read = clone_reader(clone, tag)
        if read is not None:
            return from_tree(read, tag, _with_includers(clone, tag, paths), shipped, f"clone {clone}")
        tried.append(f"clone {clone} has no tag {tag}")
    if sources.get("fix_api"):
        if any(p.endswith(".h") for p in paths):
            tried.append("GitHub's files cannot say which files include a changed header")
        else:
            from ..mine.github import GitHubClient  # PyGithub and requests: only when the API is asked
            client = GitHubClient(base_url=sources["api_url"])
            return from_tree(api_reader(client, sources["repo"], tag), tag, paths, shipped,
                             f"GitHub {sources['repo']}")
    if arm.get("patch"):
        archive = archive_of(arm["patch"])
        if archive.exists():
            return read_archive(archive, [p for p in paths if not p.endswith(".h")])
        tried.append(f"no {archive.name} beside the patch (bin/release-sources ships one)")
    raise LookupError(f"no source of torch {version}'s own {', '.join(paths)}: "
                      f"{'; '.join(tried) or 'no clone, no API, no patch file'}")


def _with_includers(clone, tag, paths):
    """``paths`` and, for a changed kernel header, the native files at ``tag`` that include it."""
    headers = [p.split("aten/src/", 1)[1] for p in paths if p.endswith(".h")]
    if not headers:
        return paths
    listing = subprocess.run(["git", "-C", str(clone), "grep", "-l", "-e", "|".join(headers), "-E",
                              f"refs/tags/{tag}", "--", "aten/src/ATen/native/*.cpp",
                              "aten/src/ATen/native/cpu/*.cpp"], capture_output=True, text=True)
    found = [line.split(":", 1)[1] for line in listing.stdout.splitlines() if ":" in line]
    return sorted(set(paths) | set(found))
