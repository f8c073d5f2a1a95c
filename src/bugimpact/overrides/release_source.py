"""The release's own source of a compiled fix's files: each kernel file the fix changes as the
release has it, the headers those files include that the wheel does not ship, the release's
operator declarations (which say under which dispatch key each operator's kernel is registered),
and, where a clone gives it, the release's whole tree (for the files that call a changed helper,
and for the functions a rebuilt file needs that the release does not export).

A rebuilt file must be the release's: the fix's own commit is not (the master file at pr38674's
commit has 124 lines more than 1.5.1's, and breaks grouped Conv3d on it). The ways in, tried in
this order (``find``):

- a clone that holds the release's own commit (the wheel's ``torch/version.py`` names it: a full
  clone of the framework has its release branches) or its tag: the files there;
- GitHub's files at the tag (``artifacts.onefix.api``);
- an archive shipped beside the fix's diff (``<id>.release.tar.xz``, made by
  ``bin/release-sources``);
- a clone of the history the release was cut from, without its tag (a mirror of master): the
  release is reconstructed (``reconstruct``), once per release and clone, and the record is shared
  by every fix of that release.

A reconstruction says it is one, and so does every manifest made from it: only the faithful
build's check (the release's training, bit for bit) vouches for it. A submodule's header comes
from a clone of the submodule where one is given (``clone_tree``); a header that no source holds
(a third-party submodule's, such as ``nnpack.h``) is compiled as an empty stand-in and named: a
file that needed anything from it fails to compile, loudly.
"""
import hashlib
import io
import json
import re
import subprocess
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from ..failures import CorruptFile, reading
from ..framework import preprocessor
from ..framework.apply import NotPlaced
from ..framework.paths import part_of
from ..harness.files import sha256_file
from ..io import atomic_open
from . import generated_headers, parts, reconstruct
from .archives import archive_of, serves
from .clone_tree import INCLUDE_ROOTS, CloneTree, clone_commit

# what says how the release registers its operators (``registration``); the last is torch 1.4's only
YAMLS = ("aten/src/ATen/native/native_functions.yaml", "tools/autograd/derivatives.yaml",
         "tools/autograd/gen_variable_type.py")
STAND_IN = b"/* bugimpact: a stand-in; no source of the release holds this header */\n"  # closure's standins
TAG = re.compile(r"^v\d+\.\d+\.\d+(?:-?rc\d+)?$")
GIT_VERSION = re.compile(r"""^git_version\s*=\s*['"]([0-9a-f]{40})['"]""", re.M)
WAYS_IN = ("a clone holding the release's tag or commit, or the master history it was cut from "
           "(artifacts.onefix.clone, or resolve.clone); GitHub's files at the tag "
           "(artifacts.onefix.api: true); or an archive beside the fix's patch "
           "(bin/release-sources GIT_DIR --sheet SHEET writes one)")


@dataclass
class ReleaseSource:
    origin: str  # in words: which tag, commit or reconstruction
    reconstructed: bool
    files: dict  # source path -> bytes: the files to rebuild, as the release has them
    includes: dict = field(default_factory=dict)  # include name -> bytes: what the wheel lacks
    standins: list = field(default_factory=list)  # include names no source holds
    yamls: dict = field(default_factory=dict)  # YAMLS path -> bytes
    facts: dict = field(default_factory=dict)  # how it was found, for the manifest
    tree: object = None  # the release's whole tree (``framework.tables`` reader), where a clone gives it

    def describe(self):
        return {"origin": self.origin, "reconstructed": self.reconstructed,
                "standins": sorted(self.standins), **self.facts}

    @property
    def read_from(self):
        """Where its files were read, in words: the archive's path, or the clone and commit."""
        return self.facts.get("archive") or self.origin


@dataclass(frozen=True)
class Release:
    """The release wheel a fix is isolated on: its version, file and sha256, the headers it ships
    (include name -> bytes) and the commit it was built from (``torch/version.py``, where it says)."""
    version: str
    wheel: str
    sha256: str
    headers: dict
    commit: str

    @property
    def identity(self):
        """What a release source made for this release names it by (``serves``): its version, its
        wheel's sha256, and a digest of the headers the wheel ships (the same release's wheel for
        another Python ships the same headers)."""
        digest = hashlib.sha256()
        for name in sorted(self.headers):
            digest.update(name.encode() + b"\0" + hashlib.sha256(self.headers[name]).digest())
        return {"release": self.version, "wheel_sha256": self.sha256, "wheel_headers_sha256": digest.hexdigest()}

    @classmethod
    def of_wheel(cls, wheel, version):
        with reading(wheel), zipfile.ZipFile(wheel) as archive:
            names = archive.namelist()
            headers = {n[len("torch/include/"):]: archive.read(n) for n in names
                       if n.startswith("torch/include/") and not n.endswith("/")}
            stamp = archive.read("torch/version.py").decode("utf-8", "replace") if "torch/version.py" in names else ""
        commit = GIT_VERSION.search(stamp)
        return cls(version, str(wheel), sha256_file(wheel), headers, commit.group(1) if commit else "")


def include_name(path):
    """The name a source file is included by (``aten/src/ATen/native/X.h`` -> ``ATen/native/X.h``)."""
    return path[len("aten/src/"):] if path.startswith("aten/src/") else path


def closure(read, paths, shipped, roots=INCLUDE_ROOTS):
    """The headers that ``paths`` include, and the headers those include in turn, that the wheel
    does not ship. ``read(source path) -> bytes or None`` reads the release's tree, each name
    looked for under ``roots`` (a ``CloneTree``'s ``include_roots``: its submodules' too); ``shipped``
    maps each include name the wheel has to its bytes (a set: the names alone): a shipped header
    is followed too, through its own text, since it may include one the wheel lacks. Returns
    (includes, standins)."""
    texts = shipped if isinstance(shipped, dict) else {}
    includes, standins, seen = {}, set(), set()
    todo = [(include_name(path), read(path), False) for path in paths]
    while todo:
        name_of, text, in_wheel = todo.pop()
        for name in preprocessor.included(text):
            here = str(Path(name_of).parent / name)
            if name in seen or here in seen:
                continue
            if name in shipped or here in shipped:
                found = name if name in shipped else here
                seen.add(found)
                if texts:
                    todo.append((found, texts[found], True))
                continue
            seen.add(name)
            found = next(((p, data) for p in (here, *(root + name for root in roots))
                          if (data := read(p)) is not None), None)
            if found is None:
                # what the wheel's own headers include and no source holds is another platform's
                # or an optional library's, behind a condition the release's build did not meet
                if not preprocessor.system_header(name) and not in_wheel:
                    standins.add(name)
                continue
            includes[name] = found[1]
            todo.append((include_name(found[0]), found[1], in_wheel))
    return includes, sorted(standins)


class NotShipped(LookupError):
    """The release's tree (``tree``, a ``GitTree`` where a clone has it) lacks ``paths``."""

    def __init__(self, message, paths, tree):
        super().__init__(message)
        self.paths, self.tree = paths, tree


def from_tree(read, where, paths, shipped, origin, reconstructed=False, facts=None, tree=None):
    """The release's source from a reader of its tree (``read(path) -> bytes or None``)."""
    files = {p: read(p) for p in paths}
    missing = sorted(p for p, data in files.items() if data is None)
    if missing:
        raise NotShipped(f"{tree.absent(missing) if tree else ', '.join(missing)} not at {where} in {origin}: "
                         "the release does not ship it", missing, tree)
    includes, standins = closure(read, paths, shipped, tree.include_roots if tree else INCLUDE_ROOTS)
    yamls = {p: data for p in YAMLS if (data := read(p)) is not None}
    return ReleaseSource(origin if reconstructed else f"{origin} at {where}", reconstructed, files,
                         includes, standins, yamls, facts or {}, tree)


def api_reader(client, repo, tag):
    """A reader of GitHub's files at ``tag`` (the contents API, raw)."""
    def read(path):
        return client.file_at(repo, path, tag)
    return read


def write_archive(path, source):
    """Ship a release source (``bin/release-sources``): a reproducible ``.tar.xz`` (sorted, no
    times or owners) holding ``SOURCE.json``, ``files/``, ``include/`` and ``yaml/``."""
    # the maker's clone, and the archive a source was read from: not what the archive is
    facts = {k: v for k, v in source.describe().items() if k not in ("tree", "archive")}
    members = {"SOURCE.json": json.dumps(facts, indent=1, sort_keys=True).encode() + b"\n"}
    members.update({f"files/{p}": d for p, d in source.files.items()})
    members.update({f"include/{n}": d for n, d in source.includes.items()})
    members.update({f"yaml/{p}": d for p, d in source.yamls.items()})
    with atomic_open(path, "wb") as handle, tarfile.open(fileobj=handle, mode="w:xz") as tar:
        for name, data in sorted(members.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))


def read_archive(path):
    """The release source shipped in ``path``. Which release it serves is its ``SOURCE.json``'s to
    say (``serves``)."""
    members = {}
    if Path(path).is_dir():
        members = {p.relative_to(path).as_posix(): p.read_bytes() for p in Path(path).rglob("*") if p.is_file()}
    else:
        with reading(path), tarfile.open(path) as tar:
            for member in tar.getmembers():
                if member.isfile():
                    members[member.name] = tar.extractfile(member).read()
    if "SOURCE.json" not in members:
        raise CorruptFile(path, "no SOURCE.json, which every shipped release source holds")
    with reading(path):
        facts = json.loads(members.pop("SOURCE.json"))
    parts = {head: {name[len(head) + 1:]: data for name, data in members.items()
                    if name.startswith(head + "/")} for head in ("files", "include", "yaml")}
    origin = facts.pop("origin")
    return ReleaseSource(f"{origin} (shipped: {path})", facts.pop("reconstructed"), parts["files"],
                         parts["include"], facts.pop("standins"), parts["yaml"], {**facts, "archive": str(path)})


def find(sources, arm, release, paths, fix, record):
    """The release's own source of ``paths`` (the kernel files a fix rebuilds and the headers it
    changes) for ``release`` (a ``Release``), by the first way in (module doc) that has it;
    ``fix``: the fix (``arm.Fix``: a reconstruction makes a cherry-picked fix on the branch
    point's files), ``record``: where a reconstruction's search is recorded. Raises
    ``LookupError`` saying where it looked and which settings would give a source."""
    version, tried = release.version, []
    tag = f"v{version}"
    clone = sources.get("fix_clone")
    if clone:
        for ref, where in ((release.commit, f"the release's commit {release.commit[:12]} (its "
                                            "torch/version.py)"), (tag, f"tag {tag}")):
            commit = clone_commit(clone, ref) if ref and (ref != tag or TAG.match(tag)) else None
            if commit:
                tree = CloneTree(clone, commit, submodules=sources.get("submodules"))
                return from_tree(tree.read_bytes, where, with_includers(tree, paths), release.headers,
                                 f"clone {clone}", facts={**release.identity, "commit": commit, "tree": tree.where()},
                                 tree=tree)
        tried.append(f"clone {clone} has neither tag {tag} nor the release's commit "
                     f"{release.commit[:12] or '(the wheel names none)'}")
    if sources.get("fix_api"):
        if any(p.endswith(".h") or parts.GENERIC.match(p) for p in paths):
            tried.append("GitHub's files cannot say which files include a changed header or TH generic file")
        else:
            from ..mine.github import GitHubClient  # PyGithub and requests: only when the API is asked
            client = GitHubClient(base_url=sources["api_url"])
            return from_tree(api_reader(client, sources["repo"], tag), f"tag {tag}", paths, release.headers,
                             f"GitHub {sources['repo']}", facts=release.identity)
    if arm.get("patch"):
        archive = archive_of(arm["patch"])
        if archive.exists():
            shipped = read_archive(archive)
            why = serves(shipped.facts, release)
            missing = sorted(p for p in paths if not p.endswith(".h") and p not in shipped.files)
            if not why and not missing:
                return shipped
            tried.append(f"{archive} is not torch {version}'s: {why}" if why else
                         f"{archive} does not hold {', '.join(missing)}")
        else:
            tried.append(f"no {archive.name} beside the patch")
    if clone:
        return reconstructed(clone, arm, release, paths, fix, record, sources.get("submodules"))
    raise LookupError(f"no source of torch {version}'s own {', '.join(paths)}: "
                      f"{'; '.join(tried) or 'no clone, no API, no patch file'}. A source comes from "
                      f"{WAYS_IN}")


def reconstructed(clone, arm, release, paths, fix, record, submodules=None):
    """The release's source reconstructed from a clone of the master history it was cut from
    (``reconstruct``): the branch point's files, with the fix made on them where it landed after
    the branch point and this release's notes list it (a cherry-pick); ``submodules``: clones of
    the submodules it pins (``clone_tree``)."""
    found = reconstruct.reconstruction(clone, release.wheel, release.sha256, release.version, record)
    commit = found["branch_point"]
    checked = found.get("generated_headers") or {}
    # the cherry-picks its generated headers found (``generated_headers``), on the branch point's files
    picked = generated_headers.placed(clone, commit, [p["commit"] for p in checked.get("cherry_picks", ())])
    base = CloneTree(clone, commit, picked, submodules)
    rebuild = with_includers(base, paths)
    files = {p: base.read_bytes(p) for p in rebuild}
    missing = sorted(p for p, data in files.items() if data is None)
    if missing:
        raise NotShipped(f"{base.absent(missing)} not in torch {release.version}'s branch point "
                         f"{commit[:12]}: the release does not ship it", missing, base)
    how = _how_the_fix_came(arm, release, commit, fix, files)
    changed = {}
    if how.startswith("cherry-picked"):
        try:
            made, _ = fix.made(files, "old", commit)
        except NotPlaced as exc:
            raise LookupError(f"torch {release.version}'s notes list the fix, but it does not apply to "
                              f"the branch point's files: {exc}") from None
        changed = {p: data for p, data in made.items() if data is not None and p in files}
    tree = CloneTree(clone, commit, {**picked, **changed}, submodules)
    facts = {**release.identity, "branch_point": commit,
             "branch_point_date": found["branch_point_date"], "headers_matched": found["headers_matched"],
             "branch_point_ties": found["branch_point_ties"], "generated_headers": checked,
             "files_same_in_ties": all(_same_in(clone, tie, commit, rebuild) for tie in found["branch_point_ties"]),
             "fix": how, "rebuild": sorted(p for p in rebuild if not p.endswith(".h")),
             "record": str(record), "tree": tree.where()}
    matched, total = found["headers_matched"]
    origin = (f"reconstructed: torch {release.version}'s branch point {commit[:12]} "
              f"({found['branch_point_date'][:10]}, {matched} of {total} of the wheel's headers identical; "
              f"{generated_headers.in_words(checked)}) of {Path(clone).name}, fix {how}")
    return from_tree(tree.read_bytes, f"branch point {commit[:12]}", rebuild, release.headers, origin,
                     reconstructed=True, facts=facts, tree=tree)


def _how_the_fix_came(arm, release, commit, fix, files):
    """Whether the branch point holds the fix, and how the release came to hold it or not: the
    fix's commit in the branch point's history (with a patch only: its diff placing there in
    reverse); else a cherry-pick where this release's notes list it (``notes_release``, absent:
    this release's), else not in the release."""
    if fix.holds(commit, files):
        return "in the branch point"
    notes = arm.get("notes_release") or f"v{release.version}"
    if notes.lstrip("v") == release.version:
        return "cherry-picked: landed after the branch point, listed in this release's notes"
    return f"not in the release: landed after the branch point, listed in {notes}'s notes"


def _same_in(clone, tie, commit, paths):
    """Whether a commit that holds as many of the wheel's headers has the same rebuilt files."""
    a, b = CloneTree(clone, tie), CloneTree(clone, commit)
    return all(a.read_bytes(p) == b.read_bytes(p) for p in paths)


def with_includers(tree, paths):
    """``paths`` and the tree's files that compile them where they are not compiled alone: an op or
    stub file's header's native includers (shared headers: ``shared_headers``); a TH generic file's
    includers in its library (``parts.compile_units``)."""
    found = set()
    headers = [include_name(p) for p in paths if p.endswith(".h") and part_of(p) in ("op", "stub")]
    if headers:
        found.update(_grep(tree, headers, ("aten/src/ATen/native/*.cpp", "aten/src/ATen/native/cpu/*.cpp")))
    for path in paths:
        generic = parts.GENERIC.match(path)
        if generic:
            library = f"aten/src/{generic.group(1)}/"
            named = _grep(tree, [path[len(library):]], (f"{library}*.cpp", f"{library}*.c"))
            found.update(parts.compile_units(path, {p: tree.read_bytes(p) for p in named}))
    return sorted(set(paths) | found)


def _grep(tree, names, where):
    """The files of ``tree`` under the pathspecs ``where`` whose text holds any of ``names``."""
    listing = subprocess.run(["git", "-C", tree.clone, "grep", "-l", "-F", *sum((["-e", n] for n in names), []),
                              tree.commit, "--", *where], capture_output=True, text=True)
    return [line.split(":", 1)[1] for line in listing.stdout.splitlines() if ":" in line]
