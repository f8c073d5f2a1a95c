"""A fix's diff made on some copy of its files, in the one direction that copy allows: forwards
(the copy lacks the fix) or in reverse (it holds it). Each change is placed by its own changed
lines (``patch.place``); the direction is the one whose placements more of the copy's lines agree
with, the changed lines and the context the diff shows around them (``patch.evidence``). A removed
line that reappears inside the added block places forwards in a copy that holds the fix, yet
without the context around it: the reverse direction, where the whole change and its context
stand, is the one taken. A copy where both directions stand on equal evidence, or neither places,
is refused (``NoDirection``), never guessed.
"""
import subprocess
import tempfile
from pathlib import Path

from .patch import NotPlaced, evidence, place_all, replaced


class NoDirection(NotPlaced):
    """The diff places in neither direction, or in both on equal evidence: the message says which."""


def direction_of(diffs, release):
    """Which way the diff goes on the release's files (``release``: path -> bytes, None where the
    release lacks it): ``forward`` (the release lacks the fix) or ``reverse`` (it has it). Where
    both place, the one with more evidence (module doc). Returns (direction, the files patched
    that way, where each change sat); raises ``NoDirection``."""
    done, why = {}, {}
    for direction, side in (("forward", "old"), ("reverse", "new")):
        try:
            done[direction] = place(diffs, release, side)
        except NotPlaced as exc:
            why[direction] = str(exc)
    if not done:
        raise NoDirection(f"the diff does not apply to the release's files, in either direction: "
                          f"forwards, {why['forward']}; in reverse, {why['reverse']}")
    if len(done) == 2:
        weight = {d: sum(evidence(found) for found in done[d][2]) for d in done}
        if weight["forward"] == weight["reverse"]:
            raise NoDirection(f"the diff applies both forwards and in reverse to the release's files, "
                              f"{weight['forward']} lines agreeing either way: cannot tell whether "
                              "the release contains the fix")
        direction = max(weight, key=weight.get)
    else:
        direction = next(iter(done))
    files, placement, _ = done[direction]
    return direction, files, placement


def place(diffs, release, side):
    """Every file of the diff with its changes made (``side``: the form the release holds, old
    for forwards), where each change sat (words, for a manifest) and the placements themselves,
    file by file; raises ``NotPlaced``."""
    files, placement, placements = {}, [], []
    for fd in diffs:
        if not fd.old_path or not fd.path:  # a file the fix adds or removes
            files[fd.name] = _whole_file(fd, release[fd.name], side)
            placement.append({"file": fd.name, "line": 1, "placed": "the whole file"})
            continue
        here, there = (fd.old_path, fd.path) if side == "old" else (fd.path, fd.old_path)
        before = release[here]  # a renamed file is found under the name this side gives it
        if before is None:
            raise NotPlaced(f"{here}: not in the release")
        if here != there and release[there] is not None:
            raise NotPlaced(f"{there}: in the release already (the fix renames {here})")
        try:
            after, found = _replace(before, fd.hunks, side)
        except NotPlaced as exc:
            raise NotPlaced(f"{here}: {exc}") from None
        if _undone(after, found, before) != before:
            raise NotPlaced(f"{here}: the change reversed on the patched file does not give back "
                            "the release's bytes")
        if here != there:
            files[here] = None
            placement.append({"file": here, "line": 1, "placed": f"renamed to {there}"})
        files[there] = after
        placement += [{"file": here, "line": p.start + 1, "placed": p.describe()} for p in found]
        placements.append(found)
    return files, placement, placements


def _replace(content, hunks, side):
    """A file's bytes with its changes made, the release's own line ends kept."""
    raw = content.decode("utf-8").splitlines(keepends=True)
    bare = [line.rstrip("\r\n") for line in raw]
    eol = "\r\n" if raw and raw[0].endswith("\r\n") else "\n"
    found = place_all(hunks, bare, side)
    out = replaced(raw, found, eol)
    ends_changed = found and found[-1].start + found[-1].length == len(raw)
    if raw and raw[-1] == bare[-1] and out and ends_changed:  # it ended without a line end
        out[-1] = out[-1][:-len(eol)]
    return "".join(out).encode("utf-8"), found


def _undone(after, found, before):
    """The patched bytes with each change taken back at the place it was made: the release's
    bytes, unless the patching lost or added anything on the way (a line end, a line)."""
    raw, patched = before.decode("utf-8").splitlines(keepends=True), after.decode("utf-8")
    lines = patched.splitlines(keepends=True)
    out, at, shift = [], 0, 0
    for p in found:
        made = len(p.made())
        out += lines[at:p.start + shift] + raw[p.start:p.start + p.length]
        at, shift = p.start + shift + made, shift + made - p.length
    return "".join(out + lines[at:]).encode("utf-8")


def _whole_file(fd, before, side):
    """A file the diff adds (or removes): the side without it must not have it, the side with it
    must have exactly its lines."""
    lines = [text for hunk in fd.hunks for tag, text in hunk.lines if tag != " "]
    has_it = "new" if not fd.old_path else "old"
    content = "".join(line + "\n" for line in lines).encode("utf-8")
    if side == has_it:
        if before is None or before.decode("utf-8", "replace").splitlines() != lines:
            raise NotPlaced(f"{fd.name}: not in the release as the diff has it")
        return None
    if before is not None:
        raise NotPlaced(f"{fd.name}: in the release already")
    return content


def merged(copy, old, new, side, name):
    """The fix made on ``copy`` (a copy of one file) by a three-way merge of the fix's own file at
    both its commits, as git's cherry-pick (``side`` old: the copy lacks the fix) and revert (new:
    it holds it) do: changes the copy made elsewhere, or around the fix's lines, are kept. Raises
    ``NotPlaced`` naming the copy's lines that conflict with the fix's own."""
    base, other = (old, new) if side == "old" else (new, old)
    with tempfile.TemporaryDirectory(prefix="bugimpact-merge-") as tmp:
        paths = [Path(tmp) / n for n in ("copy", "base", "other")]
        for path, data in zip(paths, (copy, base, other)):
            path.write_bytes(data)
        out = subprocess.run(["git", "merge-file", "-p", "--diff3", *map(str, paths)], capture_output=True)
    if out.returncode < 0 or out.returncode > 127:
        raise RuntimeError(f"git merge-file failed on {name}: {out.stderr.decode(errors='replace')[-300:]}")
    if out.returncode:
        lines = out.stdout.decode("utf-8", "replace").splitlines()
        at = [i + 1 for i, line in enumerate(lines) if line.startswith("<<<<<<<")]
        raise NotPlaced(f"{name}: {len(at)} of the fix's changes conflict with the release's own "
                        f"lines (near line{'s' if len(at) > 1 else ''} {', '.join(map(str, at[:4]))})")
    return out.stdout
