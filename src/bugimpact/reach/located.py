"""Where a diff's changed lines sit in a C++ file's copies, and what a changed line outside any
function stands for (a macro, a constant, a conditional that only chooses macros)."""
import re

from ..framework import patch
from .claims import Unknown

# the name a namespace-level declaration defines: ``static const int64_t kMax = 8;``, ``table[] =``
DECLARED = re.compile(r"(\w+)\s*(?:\[[^\]]*\]\s*)*(?:=|;|\{|$)")
CONDITIONALS = {"if", "ifdef", "ifndef", "elif", "else", "endif"}
DIRECTIVE = re.compile(r"\s*#\s*(\w+)")


def _locate(fd, hunk, tree, which):
    """Line numbers of the hunk's changes in ``tree``'s copy of the file (``which``: the side the
    tree holds, found by its text); None when the copy lacks it."""
    text = tree.read(fd.path if which == "new" else (fd.old_path or fd.path)) if tree else None
    if text is None:
        return None, None
    found = patch.locate(hunk, text.splitlines())
    return (found[1], text) if found else (None, text)


def _trees(fd, tables, old_tree, new_tree):
    """(tree, side) pairs to find the file's hunks in: the commits' own trees that hold it (an
    archive of the fix's files holds only its Python files), else the tables' tree."""
    pairs = [(t, side) for t, side, name in ((new_tree, "new", fd.path), (old_tree, "old", fd.old_path))
             if t is not None and name and t.read(name) is not None]
    return pairs or [(tables.tree, "new")]


def located(fd, tables, old_tree, new_tree, mapping):
    """(hunk, changed line numbers, file text) for each copy of the file that holds the hunk; a
    hunk that no copy holds is unknown."""
    for hunk, lines, text, _ in located_sides(fd, tables, old_tree, new_tree, mapping):
        yield hunk, lines, text


def located_sides(fd, tables, old_tree, new_tree, mapping):
    """``located``, with the side of the fix each copy is (``old``, ``new``): a pure insertion is
    marked in the old copy by the lines around it, which it does not change."""
    for hunk in fd.hunks:
        found = False
        for tree, side in _trees(fd, tables, old_tree, new_tree):
            lines, text = _locate(fd, hunk, tree, side)
            if lines is not None:
                found = True
                yield hunk, lines, text, side
        if not found:
            mapping.add(Unknown(f"{fd.name}: the hunk at line {hunk.new_start} is not in {tables.label}'s copy"))


def outside_functions(path, src, code, funcs, inits, n):
    """What a changed line ``n`` outside any function stands for: ``("skip", None)`` for a blank
    line, a comment or an include; ``("functions", [Function])`` for a macro or a constant the
    functions of its own file use (a source file's: a header's are used wherever it is included);
    ``("unknown", why)`` otherwise (a conditional, a macro or constant no function here uses, a
    declaration of something else). A conditional that only chooses how macros are defined
    (``#ifdef _MSC_VER #define LSEEK _lseeki64 #else #define LSEEK lseek #endif``) stands for
    what those macros stand for."""
    line = src[n - 1] if n - 1 < len(src) else ""
    directive = re.match(r"\s*#\s*(\w+)\s*(\w*)", line)
    if directive is None and not (n - 1 < len(code) and code[n - 1].strip()):
        return "skip", None
    if directive is not None and directive.group(1) == "include":
        return "skip", None
    if directive is not None and directive.group(1) == "define":
        name = directive.group(2)
    elif directive is not None and directive.group(1) in CONDITIONALS and (defines := _defines_only(src, code, n)):
        found = [outside_functions(path, src, code, funcs, inits, m) for m in defines]
        if any(what == "unknown" for what, _ in found):
            return next(f for f in found if f[0] == "unknown")
        return "functions", list({id(fn): fn for _, users in found for fn in users}.values())
    elif directive is not None:
        return "unknown", f"a preprocessor {directive.group(1)} (line {n}), which can change what compiles"
    else:
        init = next((d for d in inits if d.start <= n <= d.end), None)
        found = DECLARED.search(init.head if init else code[n - 1])  # comments blanked
        name = found.group(1) if found else ""
    if not name or path.endswith((".h", ".cuh", ".hpp")):
        return "unknown", f"a declaration, macro or constant outside any function (line {n})"
    used = re.compile(r"\b%s\b" % re.escape(name))
    users = [fn for fn in funcs if used.search("\n".join(src[fn.start - 1:fn.end]))]
    if not users:
        return "unknown", f"{name} (line {n}), which no function of the file uses"
    return "functions", users



def _defines_only(src, code, n):
    """The lines of the ``#define``s of the conditional block around line ``n``, when defining
    macros is all it does (its other lines blank, comments or conditionals); else []."""
    def kind(i):
        found = DIRECTIVE.match(src[i - 1])
        return found.group(1) if found else None
    start, depth = None, 0
    for i in range(n, 0, -1):  # up to the block's own #if
        k = kind(i)
        if k == "endif" and i != n:
            depth += 1
        elif k in ("if", "ifdef", "ifndef"):
            if depth == 0:
                start = i
                break
            depth -= 1
    if start is None:
        return []
    defines, depth = [], 0
    for i in range(start, len(src) + 1):
        k = kind(i)
        if i > 1 and src[i - 2].rstrip().endswith("\\"):
            continue  # a continued #define
        if k in ("if", "ifdef", "ifndef"):
            depth += 1
        elif k == "endif":
            depth -= 1
            if depth == 0:
                return defines
        elif k == "define":
            defines.append(i)
        elif k not in CONDITIONALS and i - 1 < len(code) and code[i - 1].strip():  # comments blanked
            return []
    return []
