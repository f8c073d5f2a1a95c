"""A unified diff as files and hunks, and where a hunk sits in some copy of its file.

The copy a hunk is compared with is rarely the diff's own base: a release wheel's Python file, or the
operator tables' checkout. A hunk is found there by its text (its old side, else its new side), as
``patch`` finds a hunk whose line numbers moved; one that is in neither form is not found, and the
caller says ``unknown`` rather than guess.
"""
import re
from dataclasses import dataclass, field

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class Hunk:
    old_start: int
    new_start: int
    lines: list = field(default_factory=list)  # (tag, text): tag ' ', '-' or '+'

    def side(self, which):
        """The hunk's text on one side (``old``: context and removed lines) and, for each line,
        whether it is changed on that side."""
        drop = "+" if which == "old" else "-"
        kept = [(tag, text) for tag, text in self.lines if tag != drop]
        return [text for _, text in kept], [tag != " " for tag, _ in kept]


def _insertion_index(lines, own):
    index = 0
    for tag, _ in lines:
        if tag not in (" ", own):
            return index
        index += 1
    return None


@dataclass
class FileDiff:
    path: str            # the new path ('' when the file is deleted)
    old_path: str        # the old path ('' when the file is new)
    hunks: list = field(default_factory=list)
    binary: bool = False

    @property
    def name(self):
        return self.path or self.old_path


def parse(text):
    """Files of a git diff (``git diff``/``git show`` output; leading prose is skipped)."""
    files, current, hunk = [], None, None
    for line in text.splitlines():
        if line.startswith("diff --git "):
            match = re.match(r"diff --git a/(.+?) b/(.+)$", line)
            current = FileDiff(match.group(2), match.group(1)) if match else FileDiff("", "")
            files.append(current)
            hunk = None
        elif current is None:
            continue
        elif hunk is None and line.startswith("--- "):
            current.old_path = "" if line[4:] == "/dev/null" else re.sub(r"^a/", "", line[4:])
        elif hunk is None and line.startswith("+++ "):
            current.path = "" if line[4:] == "/dev/null" else re.sub(r"^b/", "", line[4:])
        elif line.startswith(("Binary files", "GIT binary patch")):
            current.binary = True
        elif HUNK.match(line):
            m = HUNK.match(line)
            hunk = Hunk(int(m.group(1)), int(m.group(3)))
            current.hunks.append(hunk)
        elif hunk is not None and line[:1] in (" ", "-", "+"):
            hunk.lines.append((line[0], line[1:]))
        elif hunk is not None and line == "":
            hunk.lines.append((" ", ""))
    return files


def locate(hunk, lines):
    """Where the hunk's changed lines are in ``lines`` (a copy of the file, without newlines):
    ``(side, line_numbers)``, side ``old`` or ``new`` being the form found there, or None.

    The block is searched with all its context; where it occurs more than once (two identical
    hunks), the place nearest the hunk's own line number wins. When context lines differ (the copy
    moved on), the changed lines alone are tried, and must then occur once."""
    stripped = [line.rstrip() for line in lines]
    for which in ("old", "new"):
        texts, changed = hunk.side(which)
        hits = _find_block([t.rstrip() for t in texts], stripped)
        if hits:
            start = (hunk.old_start if which == "old" else hunk.new_start) - 1
            best = min(hits, key=lambda i: abs(i - start))
            return which, _marks(best, changed, hunk, which)
    for which in ("old", "new"):
        texts, changed = hunk.side(which)
        core = [t.rstrip() for t, c in zip(texts, changed) if c]
        if len([t for t in core if t.strip()]) >= 2:  # a lone line matches too much
            hits = _find_block(core, stripped)
            if len(hits) == 1:
                return which, [hits[0] + 1 + i for i in range(len(core))]
    return None


def _marks(offset, changed, hunk, which):
    marks = [offset + 1 + i for i, c in enumerate(changed) if c]
    if marks:
        return marks
    at = _insertion_index(hunk.lines, "-" if which == "old" else "+")
    return [n for n in (offset + at, offset + at + 1) if n >= 1] if at is not None else []


def _find_block(block, lines):
    """The 0-based indexes where ``block`` occurs in ``lines``."""
    if not block:
        return []
    n = len(block)
    return [i for i in range(len(lines) - n + 1) if lines[i] == block[0] and lines[i:i + n] == block]
