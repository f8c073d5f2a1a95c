"""A unified diff as files and hunks, and where each change of a hunk sits in some copy of its file.

The copy a change is compared with is rarely the diff's own base: a release wheel's Python file
(cut from a branch, where the lines around a fix moved or changed), the traced torch's copy, or
the operator tables' checkout. A change is placed by its own changed lines, in the form the copy
holds (old: the fix not made; new: made), its context deciding among places (``place``); one
whose changed lines are not there, or are there in places nothing tells apart, is not placed, and
the caller refuses the fix or says ``unknown`` rather than guess. One-fix artifacts apply a fix by
these placements, and reach reads them.
"""
import re
from dataclasses import dataclass, field
from difflib import SequenceMatcher

SAME_LINE = 0.8  # how much of a changed line must be in a line of the copy to be that line, edited
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class Hunk:
    old_start: int
    new_start: int
    lines: list = field(default_factory=list)  # (tag, text): tag ' ', '-' or '+'


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


@dataclass
class Change:
    """One run of changed lines of a hunk, with the context lines the diff shows around it."""
    before: list     # context lines above it, the nearest last
    old: list        # its lines on the old side (removed)
    new: list        # its lines on the new side (added)
    after: list      # context lines below it, the nearest first
    old_line: int    # 1-based line of its first old-side line in the diff's own old file
    new_line: int    # the same in the new file

    def side(self, which):
        return self.old if which == "old" else self.new

    def line(self, which):
        return self.old_line if which == "old" else self.new_line


def changes(hunk):
    """The hunk's changes in order: each maximal run of removed and added lines, with the context
    between it and its neighbours."""
    out, context, old_no, new_no = [], [], hunk.old_start, hunk.new_start
    lines, i = hunk.lines, 0
    while i < len(lines):
        if lines[i][0] == " ":
            context.append(lines[i][1])
            old_no, new_no, i = old_no + 1, new_no + 1, i + 1
            continue
        if out:
            out[-1].after = list(context)
        change = Change(list(context), [], [], [], old_no, new_no)
        while i < len(lines) and lines[i][0] != " ":
            tag, text = lines[i]
            if tag == "-":
                change.old.append(text)
                old_no += 1
            else:
                change.new.append(text)
                new_no += 1
            i += 1
        out.append(change)
        context = []
    if out:
        out[-1].after = list(context)
    return out


def other(side):
    return "new" if side == "old" else "old"


@dataclass
class Placement:
    """Where a change sits in a copy of its file: its ``side``'s lines begin at ``start`` (0-based;
    for a side with no lines, the place they would go), with ``context`` of the diff's context
    lines matching around them, ``shift`` lines from where the diff's line numbers put it."""
    change: Change
    side: str
    start: int
    context: int
    shift: int
    span: int = None  # lines of the copy it covers, where not its own lines (``loose``)
    rewrite: list = None  # the other side's lines as they go into the copy, where edited to fit
    how: str = ""  # how a loose placement fits

    @property
    def length(self):
        return len(self.change.side(self.side)) if self.span is None else self.span

    def made(self):
        """The lines that replace it in the copy."""
        return self.change.side(other(self.side)) if self.rewrite is None else self.rewrite

    def numbers(self, size):
        """1-based line numbers of the change in the copy: its lines, or, where it has none on this
        side (a pure insertion or deletion), the lines around the place."""
        if self.length:
            return [self.start + 1 + k for k in range(self.length)]
        return [n for n in (self.start, self.start + 1) if 1 <= n <= size]

    def describe(self):
        """How it was placed, in words, for a manifest: exact, or shifted and with what context,
        or how a change whose lines differ in the copy was fitted (``loose``)."""
        if self.how:
            return self.how
        total = len(self.change.before) + len(self.change.after)
        how = "exact" if not self.shift and self.context == total else (
            f"shifted {self.shift:+d} lines" if self.shift else "at its line")
        if self.context < total:
            how += f", {self.context} of {total} context lines matching"
        return how


class NotPlaced(Exception):
    """A change whose lines are not in the copy, or are in it in more than one place alike."""


def _matched(context, lines, at, step):
    """How many context lines stand where the diff puts them, outward from ``at`` (``step`` -1:
    ``context`` is above, nearest last; +1: below, nearest first). An edited line among them
    costs itself, not the lines beyond it."""
    ordered = context[::-1] if step < 0 else context
    return sum(1 for k, text in enumerate(ordered)
               if 0 <= at + k * step < len(lines) and lines[at + k * step] == text)


def _stands(change, want, lines, i):
    """Whether the other side's lines already stand at place ``i``, beside the context the diff
    puts next to them (an insertion that is already made is no place for it)."""
    k = len(want)
    below = lines[i:i + k] == want and (not change.after or lines[i + k:i + k + 1] == change.after[:1])
    above = i >= k and lines[i - k:i] == want and (
        not change.before or (i > k and lines[i - k - 1] == change.before[-1]))
    return below or above


def place(change, lines, side, expected, floor=0):
    """The change's ``side`` found in ``lines`` (a copy of the file, without line ends) at or after
    ``floor``. Its own lines must be there, one after another; the diff's context decides among
    places, as many of its lines as match outward from the change; among places with as much
    context, the one nearest ``expected`` (0-based), as ``patch`` does. Refused (``NotPlaced``)
    when its lines are not there, or when places tie with no context to tell them apart or at the
    same distance. A change with no lines on this side (a pure insertion) is placed by its
    context alone, all of it, and never where the other side's lines already stand."""
    have, want = change.side(side), change.side(other(side))
    n = len(have)
    if n:
        candidates = [i for i in range(floor, len(lines) - n + 1)
                      if lines[i] == have[0] and lines[i:i + n] == have]
    else:
        candidates = [i for i in range(floor, len(lines) + 1) if not _stands(change, want, lines, i)]
    scored = [(_matched(change.before, lines, i - 1, -1) + _matched(change.after, lines, i + n, 1), i)
              for i in candidates]
    if not n:  # an insertion has no lines of its own to be found by: all its context must stand
        full = len(change.before) + len(change.after)
        scored = [(c, i) for c, i in scored if c and c == full]
    what = f"the change at line {change.line(side)}"
    if not candidates and n:
        fitted = loose(change, lines, side, floor)
        if fitted is not None:
            return fitted
    if not scored and not n:
        raise NotPlaced(f"{what}: it adds lines only, and its context is not in the copy as the "
                        "diff has it")
    if not scored:
        absent = next((t for t in have if t not in lines[floor:]), None)
        raise NotPlaced(f"{what}: " + (f"its line {absent.strip()[:80]!r} is not in the copy"
                                       if absent is not None else
                                       "its lines are not in the copy one after another")
                        + (" (after the change before it)" if floor else ""))
    best = max(c for c, _ in scored)
    tied = sorted((abs(i - expected), i) for c, i in scored if c == best)
    if len(tied) > 1 and (best == 0 or tied[0][0] == tied[1][0]):
        raise NotPlaced(f"{what}: its lines are in {len(tied)} places alike (lines "
                        f"{', '.join(str(i + 1) for _, i in tied[:4])})")
    start = tied[0][1]
    return Placement(change, side, start, best, start - expected)


def loose(change, lines, side, floor=0):
    """A change whose lines are not in the copy as the diff has them, fitted where that is
    unambiguous (a release branch re-indents or edits lines a fix also touched):

    - **re-indented**: its lines are in the copy, one place only, once whitespace is ignored and
      blank lines between them are skipped; the other side's lines go in at the copy's indentation;
    - **within the line**: a one-line edit whose changed part, with the characters around it that
      make it unique, is in exactly one line of the copy that is the changed line edited elsewhere
      (``SAME_LINE`` of it as the diff has it); the edit is made there and the rest of that line
      is the copy's.

    None when neither fits (or fits in more than one place): not placed."""
    have, want = change.side(side), change.side(other(side))
    bare = [line.strip() for line in have if line.strip()]
    spans = []
    for i in range(floor, len(lines)):
        if lines[i].strip() != (bare or [None])[0]:
            continue
        k, j = 0, i
        while j < len(lines) and k < len(bare):
            if not lines[j].strip():
                j += 1
            elif lines[j].strip() == bare[k]:
                j, k = j + 1, k + 1
            else:
                break
        if k == len(bare):
            spans.append((i, j - i))
    if len(spans) == 1:
        start, span = spans[0]
        old_indent = _indent(next(line for line in have if line.strip()))
        new_indent = _indent(lines[start])
        rewrite = [new_indent + line[len(old_indent):] if line.startswith(old_indent) else line
                   for line in want]
        return Placement(change, side, start, 0, start - change.line(side) + 1, span, rewrite,
                         f"re-indented: its lines found ignoring whitespace and blank lines, "
                         f"{span} lines of the copy")
    if len(have) == 1 and len(want) == 1:
        return _within_line(change, lines, side, floor, have[0], want[0])
    return None


def _indent(line):
    return line[:len(line) - len(line.lstrip())]


def _within_line(change, lines, side, floor, have, want):
    """The one-line edit ``have`` -> ``want`` made where its changed part is unique in the copy."""
    prefix = 0
    while prefix < min(len(have), len(want)) and have[prefix] == want[prefix]:
        prefix += 1
    suffix = 0
    while suffix < min(len(have), len(want)) - prefix and have[-1 - suffix] == want[-1 - suffix]:
        suffix += 1
    mid_have, mid_want = have[prefix:len(have) - suffix], want[prefix:len(want) - suffix]
    # only a line that is the changed one, edited elsewhere: most of it as the diff has it; and one
    # that holds the smallest segment looked for below (every larger one holds it), or none can hit
    least = have[max(0, prefix - 1):prefix] + mid_have + have[len(have) - suffix:len(have) - suffix + 1]
    similar = [i for i in range(floor, len(lines)) if least in lines[i] and lines[i].strip()
               and _alike(have.strip(), lines[i].strip())]
    for grow in range(1, max(prefix, suffix) + 1):
        left, right = have[max(0, prefix - grow):prefix], have[len(have) - suffix:len(have) - suffix + grow]
        segment = left + mid_have + right
        made = left + mid_want + right
        hits = [(i, at) for i in similar for at in _occurrences(lines[i], segment)
                if mid_have or made not in lines[i]]  # an insertion already made is no place for it
        if not hits:
            return None
        if len(hits) == 1:
            i, at = hits[0]
            edited = lines[i][:at] + made + lines[i][at + len(segment):]
            return Placement(change, side, i, 0, i - change.line(side) + 1, 1, [edited],
                             f"within the line: {segment.strip()!r} made {(left + mid_want + right).strip()!r}")
    return None


def _alike(line, other):
    """Whether two lines are ``SAME_LINE`` alike: the cheap upper bounds first (many lines of a file
    are compared; the full ratio of each made reach over a corpus's large diffs take hours)."""
    matcher = SequenceMatcher(None, line, other, autojunk=False)
    return (matcher.real_quick_ratio() >= SAME_LINE and matcher.quick_ratio() >= SAME_LINE
            and matcher.ratio() >= SAME_LINE)


def _occurrences(text, segment):
    out, at = [], text.find(segment)
    while at >= 0:
        out.append(at)
        at = text.find(segment, at + 1)
    return out


def place_all(hunks, lines, side):
    """Every change of a file's hunks placed in order in ``lines``, each after the one before it,
    the expected place moving with the shift found so far; raises ``NotPlaced``."""
    placements, floor, shift = [], 0, 0
    for hunk in hunks:
        for change in changes(hunk):
            found = place(change, lines, side, change.line(side) - 1 + shift, floor)
            placements.append(found)
            floor, shift = found.start + found.length, found.shift
    return placements


def replaced(lines, placements, end=""):
    """``lines`` with each placed change's lines replaced by its other side's, each followed by
    ``end`` (the copy's line end, where ``lines`` keep theirs)."""
    out, at = [], 0
    for p in placements:
        out += lines[at:p.start] + [line + end for line in p.made()]
        at = p.start + p.length
    return out + lines[at:]


def evidence(placements):
    """Lines of the copy that agree with the diff where these changes were placed."""
    return sum(p.length + p.context for p in placements)


def locate(hunk, lines):
    """Where the hunk's changed lines are in ``lines`` (a copy of the file, without newlines):
    ``(side, line_numbers)``, side ``old`` or ``new`` being the form found there, or None. The
    copy may have moved on (lines shifted, context edited), as long as the changed lines
    themselves are there (``place``). Where both forms can be placed, the one more of the copy's
    lines agree with is taken; where as many agree with each, neither."""
    stripped = [line.rstrip() for line in lines]
    hunk = Hunk(hunk.old_start, hunk.new_start, [(t, x.rstrip()) for t, x in hunk.lines])
    found = {}
    for side in ("old", "new"):
        try:
            found[side] = place_all([hunk], stripped, side)
        except NotPlaced:
            continue
    if len(found) == 2 and evidence(found["old"]) == evidence(found["new"]):
        return None
    if not found:
        return None
    side = max(found, key=lambda s: evidence(found[s]))
    return side, [n for p in found[side] for n in p.numbers(len(stripped))]
