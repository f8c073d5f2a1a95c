"""A fix's own diff, from where the config says: a patch file, a clone, or the GitHub API; and
its own files at both commits, from a clone or an archive shipped beside the patch."""
import io
import re
import subprocess
import tarfile
from pathlib import Path

from ..framework import patch
from ..framework.paths import kind_of
from ..framework.tables import GitTree, TarTree, checked_sha
from ..io import atomic_open
from .onefix import Refused


def fix_diff(sources, spec):
    """The fix's own diff and where it came from: a patch file, the clone, or the GitHub API."""
    if spec.get("patch"):
        return Path(spec["patch"]).read_text(encoding="utf-8"), f"file {spec['patch']}"
    buggy, corrected = spec.get("buggy_sha"), spec.get("corrected_sha")
    clone = sources["fix_clone"]
    if clone or sources["fix_api"]:
        try:  # commits from a sheet or an API are data: never an option for git
            checked_sha(buggy, "buggy_sha")
            checked_sha(corrected, "corrected_sha")
        except ValueError as exc:
            raise Refused(str(exc)) from None
    if clone:
        out = subprocess.run(["git", "-C", clone, "diff", "--full-index", buggy, corrected, "--"],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"git diff {buggy[:12]} {corrected[:12]} in {clone} failed: "
                               f"{out.stderr.strip()[-400:]}")
        return out.stdout, f"clone {clone}: git diff {buggy} {corrected}"
    if sources["fix_api"]:
        from ..mine.github import GitHubClient  # PyGithub and requests: only when the API is asked
        client = GitHubClient(base_url=sources["api_url"])
        return (client.compare_diff(sources["repo"], buggy, corrected),
                f"GitHub API: compare {buggy}...{corrected}")
    raise Refused("no source for the fix's diff: give a patch file, set artifacts.onefix.clone "
                  "(or resolve.clone), or set artifacts.onefix.api")


INDEX = re.compile(r"^index ([0-9a-f]{7,40})\.\.([0-9a-f]{7,40})\b")
GIT_PATHS = re.compile(r"^diff --git a/(\S+) b/(\S+)$")


def landed_commits(clone, diff_text):
    """The commits a patch was made between, found in ``clone`` by the blobs its ``index`` lines
    name (``git diff`` writes them): a commit that makes every changed file its post-image from a
    first parent where each is its pre-image. ``(buggy_sha, corrected_sha)``, or None where the
    patch names no blobs or the clone holds no such commit (a hand-made patch, another history)."""
    blobs, paths = [], None
    for line in diff_text.splitlines():
        if line.startswith("diff --git "):
            paths = GIT_PATHS.match(line)
        elif paths and (index := INDEX.match(line)):
            blobs.append((paths.group(1), index.group(1), paths.group(2), index.group(2)))
            paths = None

    def git(*args):
        out = subprocess.run(["git", "-C", str(clone), *args], capture_output=True, text=True)
        return out.stdout.strip() if out.returncode == 0 else ""

    def holds(commit, path, blob):  # an all-zero blob: the file is not there
        found = git("rev-parse", "--verify", "-q", f"{commit}:{path}")
        return not found if set(blob) == {"0"} else found.startswith(blob)

    added = next(((new_path, new) for _, _, new_path, new in blobs if set(new) != {"0"}), None)
    full = git("rev-parse", "--verify", "-q", f"{added[1]}^{{blob}}") if added else ""
    if not full:
        return None
    for corrected in git("log", "--all", "--format=%H", f"--find-object={full}", "--", added[0]).split():
        buggy = git("rev-parse", "--verify", "-q", f"{corrected}^1")
        if buggy and all(holds(corrected, new_path, new) and holds(buggy, old_path, old)
                         for old_path, old, new_path, new in blobs):
            return buggy, corrected
    return None


def files_archive(patch):
    """The archive of the fix's own files shipped beside its patch: ``pr38156.diff`` ->
    ``pr38156.files.tar.xz``."""
    return Path(patch).with_suffix(".files.tar.xz")


def fix_trees(sources, arm):
    """The fix's own files at its buggy and corrected commits, as (old, new) source trees: the
    clone's commits, else the archive beside its patch, else (None, None). Reach reads where each
    changed Python line runs from them when the traced release no longer holds the line."""
    clone, buggy, corrected = sources.get("fix_clone"), arm.get("buggy_sha"), arm.get("corrected_sha")
    if clone and buggy and corrected:
        return GitTree(clone, buggy), GitTree(clone, corrected)
    archive = files_archive(arm["patch"]) if arm.get("patch") else None
    if archive is not None and archive.is_file():
        return TarTree(archive, "buggy"), TarTree(archive, "corrected")
    return None, None


def write_fix_files(clone, buggy, corrected, diff_text, archive):
    """Ship the fix's own files for reach (``fix_trees``): each file of the torch package the diff
    changes, at the buggy commit under ``buggy/`` and at the corrected one under ``corrected/``, in
    a reproducible ``.tar.xz`` (sorted, no times or owners). Returns how many files it holds."""
    trees = {"buggy": GitTree(clone, buggy), "corrected": GitTree(clone, corrected)}
    members = {}
    for fd in patch.parse(diff_text):
        if kind_of(fd.name) != "python":
            continue
        for folder, path in (("buggy", fd.old_path), ("corrected", fd.path)):
            text = trees[folder].read(path) if path else None
            if text is not None:
                members[f"{folder}/{path}"] = text.encode("utf-8")
    with atomic_open(archive, "wb") as handle, tarfile.open(fileobj=handle, mode="w:xz") as tar:
        for name, data in sorted(members.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return len(members)
