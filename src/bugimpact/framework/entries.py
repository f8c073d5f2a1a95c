"""A fix made on the code generators' lists and ATen's op files entry by entry, where a line merge
conflicts.

``native_functions.yaml``, ``derivatives.yaml`` and the TH declarations (``*.cwrap``) are lists of
entries the generators read one by one, keyed by their schema, signature or name, in any order;
an op file (``native/*.cpp``) is a list of namespace-level items (definitions keyed by their head,
statements and macro invocations by their code). Porting operators from TH to ATen took their
``.cwrap`` entries and ``IMPLEMENT_UNARY_OP_VEC(op)`` lines away one commit at a time, each beside
the last (2019: 31 commits to ``Declarations.cwrap`` between pr23492 and torch 1.3.0), so taking one
port back on a release conflicts line by line with its neighbours' ports, though no entry the fix
changes was touched by another commit. Merged by entry: an entry the fix changes or
takes away must read on the release as the fix's one side has it; one it adds must be absent, and
goes after the entry it follows in the fix (else before the one it precedes, else at the end).
Anything else is a conflict, named by its entry.
"""
import re

from . import cpp
from .apply import NotPlaced

# where an entry starts, and its key, per kind of list
STARTS = {"yaml": re.compile(r"^- (?:func|name):\s*(.+?)\s*$"), "cwrap": re.compile(r"^\[\[\s*$")}
CWRAP_NAME = re.compile(r"^\s+name:\s*(\S+)")


def kind_of(name):
    """``yaml`` or ``cwrap`` for a list the generators read by entry, ``cpp`` for an op file (its
    namespace-level definitions and statements, each an entry), else None."""
    base = name.rsplit("/", 1)[-1]
    if base in ("native_functions.yaml", "derivatives.yaml"):
        return "yaml"
    if base.endswith(".cwrap"):
        return "cwrap"
    return "cpp" if re.match(r"aten/src/ATen/native/.*\.cpp$", name) else None


def split(data, kind):
    """A list's text as (head, [(key, entry text)]): an entry runs from its start line to the next
    one's, the comments and blank lines before the next one included; a key met twice is numbered."""
    lines = data.decode("utf-8", "replace").splitlines(keepends=True)
    starts = _cpp_starts(lines) if kind == "cpp" else [i for i, line in enumerate(lines) if STARTS[kind].match(line)]
    if not starts:
        return "".join(lines), []
    out, seen = [], {}
    for at, end in zip(starts, starts[1:] + [len(lines)]):
        block = lines[at:end]
        # an entry without a name (a stray ``[[``) is known by its text: a line moves with every edit
        found = _cpp_key(block) if kind == "cpp" else STARTS[kind].match(block[0]).group(1) if kind == "yaml" else \
            next((m.group(1) for m in map(CWRAP_NAME.match, block) if m), " ".join("".join(block).split()))
        seen[found] = seen.get(found, 0) + 1
        out.append((found if seen[found] == 1 else f"{found} #{seen[found]}", "".join(block)))
    return "".join(lines[:starts[0]]), out


def merged(copy, old, new, side, name):
    """The fix (``old`` -> ``new``, taken back where ``side`` is new) made on ``copy`` entry by
    entry (module doc); raises ``NotPlaced`` naming the entries that conflict."""
    kind = kind_of(name)
    base, other = (old, new) if side == "old" else (new, old)
    (_, before), (_, after), (head, release) = (split(d, kind) for d in (base, other, copy))
    before, after_by_key, ours = dict(before), dict(after), dict(release)
    order = [key for key, _ in release]
    conflicts = []
    for key in list(before):
        if key in after_by_key and _same(after_by_key[key], before[key]):
            continue
        if _same(ours.get(key), before[key]):
            if key in after_by_key:
                ours[key] = after_by_key[key]
            else:
                order.remove(key)
        else:
            conflicts.append(key)
    fix_order = [key for key, _ in after]
    for index, key in enumerate(fix_order):
        if key in before:
            continue
        if key in ours:
            conflicts.append(key)
            continue
        ours[key] = after_by_key[key]
        preceding = next((k for k in reversed(fix_order[:index]) if k in order), None)
        following = next((k for k in fix_order[index + 1:] if k in order), None)
        order.insert(order.index(preceding) + 1 if preceding else order.index(following) if following else len(order),
                     key)
    if conflicts:
        raise NotPlaced(f"{name}: by entry too, {len(conflicts)} of the fix's entries read otherwise on the release "
                        f"({', '.join(conflicts[:3])})")
    return (head + "".join(_ended(ours[key]) for key in order)).encode()


def _cpp_starts(lines):
    """Where each namespace-level item of a C++ file starts (a definition, a statement, a macro's
    invocation, a preprocessor line, a namespace's brace): the first line of code after the last
    item ended, a namespace's braces being no nesting of their own."""
    code = cpp.blank("".join(lines)).splitlines()
    starts, depth, open_item = [], [], False
    for i, line in enumerate(code):
        text = line.strip()
        raw = lines[i].strip()
        if not open_item and (text or raw.startswith("#")):
            if not raw.startswith(("//", "/*", "*")):
                starts.append(i)
                open_item = True
        for c in text:
            if c == "{":
                head = " ".join(" ".join(code[max(0, i - 3):i + 1]).split()).rsplit("{", 1)[0]
                depth.append("namespace" if re.search(r'(\bnamespace\b[\w\s:]*|extern\s*$)$', head) else "body")
            elif c == "}" and depth:
                depth.pop()
        inner = any(d == "body" for d in depth)
        if open_item and not inner and (raw.startswith("#") or not text or text.endswith((";", "}", "{", ")"))):
            open_item = False
    return starts


def _cpp_key(block):
    """A C++ item's key: a definition's head (its text before the body), else its code."""
    code = " ".join(cpp.blank("".join(block)).split())
    return code.split("{", 1)[0].strip() if "(" in code.split("{", 1)[0] and "{" in code else \
        code or " ".join("".join(block).split())


def _same(a, b):
    """Two entries alike but for trailing whitespace and the blank lines after them."""
    return a is not None and [line.rstrip() for line in a.rstrip().splitlines()] == \
        [line.rstrip() for line in b.rstrip().splitlines()]


def _ended(entry):
    return entry if entry.endswith("\n") else entry + "\n"
