"""A release's own source from a history that lacks its tag and its release commit: the master
commit the release was cut from (its branch point), found by the headers its wheel ships.

A release branch is cut from master and then takes a few cherry-picks. Of the first-parent master
commits of the 120 days before the wheel was made, the one whose tree holds the most of the
wheel's headers byte for byte is the branch point (the latest of equals). Measured on the mirror
github:zou3519/pytorch: 1.4.0 at 2019-11-22 (735 of 747 headers), 1.5.x at 2020-03-18 (803 of
837). Searching takes seconds, so it runs once per release wheel and clone: the record
(``layout.RECONSTRUCTION``) is shared by every fix of that release and names what it found.

A fix that landed on master after the branch point reached the release only by a cherry-pick,
which the release's own notes list. So its files are the branch point's with the fix made on
them where the notes of this release list the fix, and the branch point's as they are where
another release's notes do. Only the faithful build's check (the release's training, bit for
bit) vouches for a reconstruction, and every manifest made from one says it is one.
"""
import fcntl
import hashlib
import json
import logging
import subprocess
import time
import zipfile
from datetime import date, timedelta
from pathlib import Path

from ..failures import reading
from ..io import write_json
from . import generated_headers

# where a wheel's torch/include/<name> lives in the source tree
INCLUDE_MAP = (("ATen/", "aten/src/ATen/"), ("c10/", "c10/"), ("TH/", "aten/src/TH/"),
               ("THNN/", "aten/src/THNN/"), ("torch/csrc/", "torch/csrc/"), ("caffe2/", "caffe2/"))
WINDOW_DAYS = 120  # how long before its wheel a release may have been cut
COARSE = 16  # commits between the first scores; then every commit around the best
log = logging.getLogger("bugimpact")
RECORD_VERSION = 5  # bump when what the search does changes (5: 2019 generators run as in their day)
MATCHED = 0.5  # of the wheel's headers, the least a branch point holds (measured: 98% and 95%)


def git(clone, *args, binary=False):
    out = subprocess.run(["git", "-C", str(clone), *args], capture_output=True, check=True)
    return out.stdout if binary else out.stdout.decode()


def blob_sha(data):
    """Git's id of a file's bytes."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def wheel_headers(wheel):
    """The wheel's headers: include name -> (source path, git blob id)."""
    out = {}
    with reading(wheel), zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if not name.startswith("torch/include/"):
                continue
            include = name[len("torch/include/"):]
            for prefix, source in INCLUDE_MAP:
                if include.startswith(prefix) and include.endswith((".h", ".hpp", ".cuh")):
                    out[include] = (source + include[len(prefix):], blob_sha(archive.read(name)))
    return out


def wheel_made(wheel):
    """The day the wheel was made: its newest member's date."""
    with reading(wheel), zipfile.ZipFile(wheel) as archive:
        made = max(info.date_time for info in archive.infolist())
    return date(*made[:3])


def default_branch(clone):
    """The branch releases are cut from: the clone's remote default, else main, else master."""
    for ref in ("refs/remotes/origin/HEAD", "refs/heads/main", "refs/heads/master", "HEAD"):
        if subprocess.run(["git", "-C", str(clone), "rev-parse", "--verify", "--quiet", ref],
                          capture_output=True).returncode == 0:
            return ref
    raise LookupError(f"clone {clone} has no branch to find a release's branch point on")


def held(clone, commit, wanted):
    """How many of the wheel's headers (``wanted``: source path -> blob id) ``commit`` holds byte
    for byte."""
    listing = git(clone, "ls-tree", "-r", commit, "--", "aten/src", "c10", "torch/csrc", "caffe2")
    have = {line.split("\t", 1)[1]: line.split()[2] for line in listing.splitlines()}
    return sum(1 for path, blob in wanted.items() if have.get(path) == blob)


def branch_point(clone, wheel):
    """The commit of the default branch the release was cut from (module doc): its sha, date, how
    many of the wheel's headers it holds byte for byte of how many, and the commits that hold as
    many. Refused where the best holds fewer than ``MATCHED`` of them: not that history."""
    started = time.time()
    branch = default_branch(clone)
    wanted = {path: blob for path, blob in wheel_headers(wheel).values()}
    if not wanted:
        raise LookupError(f"{Path(wheel).name} ships no headers to find its branch point by")
    until = wheel_made(wheel)
    log = git(clone, "log", "--first-parent", "--format=%H %cI", f"--until={until.isoformat()}",
              f"--since={(until - timedelta(days=WINDOW_DAYS)).isoformat()}", branch)
    commits = [line.split() for line in log.splitlines() if line]
    if not commits:
        raise LookupError(f"clone {clone} has no {branch} commit in the {WINDOW_DAYS} days before "
                          f"{Path(wheel).name} was made ({until})")

    coarse = {i: held(clone, commits[i][0], wanted) for i in range(0, len(commits), COARSE)}
    best = max(coarse, key=lambda i: (coarse[i], -i))
    fine = {i: coarse[i] if i in coarse else held(clone, commits[i][0], wanted)
            for i in range(max(0, best - COARSE), min(len(commits), best + COARSE + 1))}
    top = max(fine.values())
    if top < MATCHED * len(wanted):
        raise LookupError(f"no commit of {branch} in clone {clone} holds more than {top} of the {len(wanted)} "
                          f"headers {Path(wheel).name} ships: not the history the release was cut from")
    ties = [commits[i][0] for i in sorted(fine) if fine[i] == top]
    commit, when = commits[min(i for i in fine if fine[i] == top)]  # log order: newest first
    return {"branch_point": commit, "branch_point_date": when, "headers_matched": [top, len(wanted)],
            "branch_point_ties": ties, "search_seconds": round(time.time() - started, 1)}


def reconstruction(clone, wheel, wheel_sha256, version, record):
    """The branch point of torch ``version`` (its wheel ``wheel``) in ``clone``, searched once per
    release wheel and clone: read from ``record`` when it was made for them and says what its
    commit holds (``not_as_recorded``), else searched and written there, one search however many
    jobs ask at once."""
    record = Path(record)
    record.parent.mkdir(parents=True, exist_ok=True)
    identity = {"version": version, "wheel_sha256": wheel_sha256, "clone": str(Path(clone).resolve()),
                "record_version": RECORD_VERSION}
    with open(record.with_name(record.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if record.exists():
            try:
                made = json.loads(record.read_text())
            except ValueError:
                made = {}
            if isinstance(made, dict) and all(made.get(k) == v for k, v in identity.items()):
                why = not_as_recorded(clone, wheel, made)
                if not why:
                    return made
                log.warning("%s: %s; searched again", record, why)
        found = {**identity, **branch_point(clone, wheel)}
        shipped = {path: blob for path, blob in wheel_headers(wheel).values()}
        found["generated_headers"] = generated_headers.check(
            clone, found["branch_point"], wheel, found["branch_point_date"], wheel_made(wheel).isoformat(),
            default_branch(clone), lambda files: sorted(p for p, data in files.items()
                                                       if p in shipped and blob_sha(data) != shipped[p]))
        write_json(record, found)
        return found


def not_as_recorded(clone, wheel, made):
    """Why a reconstruction record does not say what its branch point holds (its commit gone from
    the clone, or another date or count of the wheel's headers: edited, or made from another
    history), or "" where it does. Reading it costs one listing of the commit's tree."""
    commit = str(made.get("branch_point", ""))
    found = subprocess.run(["git", "-C", str(clone), "show", "-s", "--format=%cI", f"{commit}^{{commit}}", "--"],
                           capture_output=True, text=True)
    if not commit or found.returncode != 0:
        return f"its branch point {commit[:12] or '(none)'} is not a commit of {clone}"
    if found.stdout.strip() != made.get("branch_point_date"):
        return f"its branch point {commit[:12]} was made {found.stdout.strip()}, not {made.get('branch_point_date')}"
    wanted = {path: blob for path, blob in wheel_headers(wheel).values()}
    have = held(clone, commit, wanted)
    if [have, len(wanted)] != made.get("headers_matched") or have < MATCHED * len(wanted):
        return (f"its branch point {commit[:12]} holds {have} of the wheel's {len(wanted)} headers, not the "
                f"{made.get('headers_matched')} it says")
    return ""
