"""The real-history fixture (bin/extract-history): PyTorch's commits of 2019-01 to 2020-05 on
master, and those off master until 2020-07, rebuilt as a real git repository with git fast-import.

Trees are empty, so the rebuilt commits have other SHAs: ``real`` and ``rebuilt`` map between them,
and a message that names a commit of the fixture (``This reverts commit <sha>``, a cherry-pick line,
an abbreviation) is rewritten to name the rebuilt one, as the real message names the real one.
"""
import hashlib
import json
import lzma
import re
import subprocess
from datetime import datetime
from pathlib import Path

FIXTURE = Path(__file__).parent / "fixtures" / "pytorch-history.jsonl.xz"


def load():
    with lzma.open(FIXTURE, "rt", encoding="utf-8") as handle:
        header = json.loads(handle.readline())
        return header, [json.loads(line) for line in handle]


def _stamp(iso):
    when = datetime.fromisoformat(iso)
    offset = int(when.utcoffset().total_seconds() // 60)
    sign = "-" if offset < 0 else "+"
    return f"{int(when.timestamp())} {sign}{abs(offset) // 60:02d}{abs(offset) % 60:02d}"


EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
IDENT = "pytorch <pytorch@example.com>"


def build_repo(path):
    """A bare repository holding the fixture's history; returns (header, commits, real, rebuilt):
    rebuilt SHA -> real SHA and back."""
    header, commits = load()
    by_prefix = {}
    for c in commits:
        by_prefix.setdefault(c["sha"][:7], []).append(c["sha"])
    rebuilt, mark, stream = {}, {}, []

    def rename(match):  # a commit named in a message: name its rebuilt twin, at the same length
        token = match.group(0)
        found = [s for s in by_prefix.get(token[:7], ()) if s.startswith(token) and s in rebuilt]
        return rebuilt[found[0]][:len(token)] if len(found) == 1 else token

    for c in commits:
        message = re.sub(r"\b[0-9a-f]{7,40}\b", rename, c["message"]).encode("utf-8")
        parents = [rebuilt[p] for p in c["parents"] if p in rebuilt]
        stamp = _stamp(c["date"])
        body = "".join(f"parent {p}\n" for p in parents)
        body = (f"tree {EMPTY_TREE}\n{body}author {IDENT} {stamp}\ncommitter {IDENT} {stamp}\n\n"
                .encode() + message)
        rebuilt[c["sha"]] = hashlib.sha1(b"commit %d\0" % len(body) + body).hexdigest()
        mark[rebuilt[c["sha"]]] = len(rebuilt)
        if not parents:
            stream.append(b"reset refs/fixture/scratch\n")
        stream.append(f"commit refs/fixture/scratch\nmark :{len(rebuilt)}\n"
                      f"author {IDENT} {stamp}\ncommitter {IDENT} {stamp}\n"
                      f"data {len(message)}\n".encode() + message + b"\n")
        stream += [f"{'from' if i == 0 else 'merge'} :{mark[p]}\n".encode()
                   for i, p in enumerate(parents)]
        stream.append(b"\n")
    heads = {header["default_branch"]: header["tip"]}
    for sha, branches in header["heads"].items():
        heads[next((b for b in branches if b not in heads), f"branch-{sha[:12]}")] = sha
    stream += [f"reset refs/heads/{name}\nfrom :{mark[rebuilt[sha]]}\n\n".encode()
               for name, sha in heads.items()]
    subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True)
    marks = Path(path) / "fixture-marks"
    subprocess.run(["git", f"--git-dir={path}", "fast-import", "--quiet", f"--export-marks={marks}"],
                   input=b"".join(stream), check=True)
    subprocess.run(["git", f"--git-dir={path}", "update-ref", "-d", "refs/fixture/scratch"],
                   check=True)
    subprocess.run(["git", f"--git-dir={path}", "symbolic-ref", "HEAD",
                    f"refs/heads/{header['default_branch']}"], check=True)
    made = [line.split()[1] for line in marks.read_text().splitlines()]
    assert made == list(rebuilt.values()), "git wrote other commits than the fixture's"
    return header, commits, {v: k for k, v in rebuilt.items()}, rebuilt
