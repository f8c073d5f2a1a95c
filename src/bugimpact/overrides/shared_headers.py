"""A fix's change to a shared header's code (ATen's own, ``TensorIterator.h``, c10's, vec256's,
TH's, the infrastructure's: ``judged_by_names``), judged by what it changes, not by the header's
name (issue 59, item 4).

Such a header reaches hundreds of files through ``ATen.h`` or ``TensorIterator.h``, but an includer's
object code holds the header's inline code only where it names it: a function or macro it calls, a
class or enum it uses (a macro the fix adds, which no file of the release names, reaches none). So what the fix changes is named (``changed_names``: the function, class or
enum each changed line is in, or what a changed statement declares), and the release's compiled
C++ that names any of it (``reaching``) is rebuilt with the fix's own files, each by its part's
route: op and stub files registered, ATen's and TH's other ``.cpp`` files interposed. Refused,
with the count and the names, where more than ``MOST`` files name it, where a file no library
rebuilds does (the autograd layer, TorchScript, caffe2, c10, another header's inline code), or
where a changed line names nothing.

Read from the release's commit in its clone (``git grep -w``); a reconstruction's cherry-picks are
files the fix does not change, which name what they named before.
"""
import difflib
import re
import subprocess

from ..framework import cpp
from ..framework.paths import CPP_TESTS, CUDA, part_of
from .parts import HEADER, INTERPOSABLE, Refused

MOST = 8  # more files than this naming a change: refused, the count named
COMPILED = ("aten/src", "torch/csrc", "caffe2", "c10")
C_SOURCES = re.compile(r"\.(c|cc|cpp|h|hpp)$")
STATEMENT_NAMES = (re.compile(r"\busing\s+(\w+)\s*="),  # an alias, a class's head, a function, a variable
                   re.compile(r"\b(?:struct|class|union|enum(?:\s+class)?)\s+(?:\w+\s+)*?(\w+)\s*(?:<[^{;]*)?(?::[^{;]*)?\{"),
                   re.compile(r"(\w+)\s*\("), re.compile(r"(\w+)\s*(?:=|;|\[|\{)"))
# words that name nothing a change could reach an includer by: C++'s keywords, and the types,
# namespaces and macros every ATen file names
NOT_NAMES = cpp.NOT_CALLS | {"const", "auto", "inline", "static", "void", "int", "bool", "int64_t", "double", "float",
                             "Tensor", "std", "at", "c10", "TORCH_API", "CAFFE2_API", "TORCH_CHECK", "AT_ASSERT",
                             "C10_API"}


def judged_by_names(path):
    """Whether a header whose code a fix changes is judged by the names it changes: every compiled
    header but the generators' (judged by their generated code), CUDA's (left out of a CPU arm
    with its includers), TorchScript's and the like (their part refuses the fix) and an op or stub
    file's own (rebuilt with the native files that include it: ``release_source.with_includers``)."""
    return path.endswith(HEADER) and part_of(path) in ("header", "th", "infra")


def changed_names(before, after):
    """The names a header's change reaches includers through (module doc), and the changed lines
    that name nothing (each side's text, stripped)."""
    names, unnamed = set(), []
    old, new = before.decode("utf-8", "replace"), after.decode("utf-8", "replace")
    lines = {"-": set(), "+": set()}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(),
                                                       autojunk=False).get_opcodes():
        if tag != "equal":
            lines["-"].update(range(i1 + 1, i2 + 1))
            lines["+"].update(range(j1 + 1, j2 + 1))
    for side, text in (("-", old), ("+", new)):
        code = cpp.blank(text).splitlines()
        raw = text.splitlines()
        funcs, scopes, macros = cpp.functions(text), cpp.scopes(text), _macros(raw)
        statements = _statements(cpp.blank(text))
        for n in sorted(lines[side]):
            if n not in macros and (not re.search(r"\w", code[n - 1]) or re.match(r"\s*namespace\b", code[n - 1])
                                    or re.match(r"\s*#\s*(include|if|ifdef|ifndef|else|elif|endif|pragma|undef)\b",
                                                raw[n - 1])):
                continue  # a blank line, a comment, a brace, a namespace, an include or a condition names nothing
            fn = cpp.enclosing(funcs, n)
            scope = next((name for start, end, name in scopes if start <= n <= end), None)
            found = {macros[n]} if n in macros else {fn.name} if fn and fn.name else {scope} if scope else \
                _declared_in(statements.get(n, ""))
            if found:
                names |= found
            else:
                unnamed.append(raw[n - 1].strip())
        names |= _callers_within(text, funcs, names)
    return {n for n in names - NOT_NAMES if not n[0].isdigit()}, unnamed


def _callers_within(text, funcs, names):
    """The header's own functions whose bodies name any of ``names``, and theirs in turn: inline
    code of the header that runs what changed, which its includers call by these names."""
    raw, found = text.splitlines(), set()
    while True:
        wanted = re.compile(r"\b(%s)\b" % "|".join(map(re.escape, sorted(names | found)))) if names | found else None
        more = {fn.name for fn in funcs if fn.name and fn.name not in names | found and wanted
                and wanted.search("\n".join(raw[fn.start:fn.end]))}
        if not more:
            return found
        found |= more


def _statements(code):
    """Each line of a blanked source -> the namespace-level statement it is part of, on one line
    (from the ``;``, ``{`` or ``}`` before it to the ``;`` or ``{`` that ends it)."""
    out, start, line, first = {}, 0, 1, 1
    for i, c in enumerate(code):
        if c in ";{}":
            text = " ".join(code[start:i + (c != "}")].split())
            for n in range(first, line + 1):
                out.setdefault(n, text)
            start, first = i + 1, line
        if c == "\n":
            line += 1
    return out


def _macros(raw):
    """Each line of a ``#define`` (its continuation lines too) -> the macro's name."""
    out, name = {}, None
    for n, line in enumerate(raw, 1):
        defined = re.match(r"\s*#\s*define\s+(\w+)", line)
        name = defined.group(1) if defined else name
        if name:
            out[n] = name
        if not line.rstrip().endswith("\\"):
            name = None
    return out


def _declared_in(line):
    """What a statement at namespace level declares: an alias, a function, a variable."""
    if re.match(r"\s*(namespace\b|extern\s*\"C\")", line):
        return set()
    for pattern in STATEMENT_NAMES:
        found = {m for m in pattern.findall(line) if m not in NOT_NAMES}
        if found:
            return found
    return set()


def reaching(clone, commit, names, own):
    """The release's compiled C++ files (module doc) that name any of ``names``, but ``own`` (the
    fix's files, rebuilt already): path -> the names it holds."""
    if not names:
        return {}
    found = subprocess.run(["git", "-C", clone, "grep", "-w", "-o", "-F", *sum((["-e", n] for n in sorted(names)), []),
                            commit, "--", *COMPILED], capture_output=True, text=True)
    out = {}
    for row in found.stdout.splitlines():
        fields = row.split(":", 2)
        if len(fields) < 3:  # "Binary file ... matches"
            continue
        _, path, name = fields
        if path in own or not C_SOURCES.search(path) or CPP_TESTS.search(path) or CUDA.search(path):
            continue
        out.setdefault(path, set()).add(name)
    return {path: sorted(held) for path, held in sorted(out.items())}


def rebuilt_for(headers, clone, commit, own, version):
    """The files a fix's shared ``headers`` (path -> (the release's bytes, the arm's)) make a
    library rebuild (``reaching``), each with the names it holds; refuses (module doc)."""
    names, unnamed = set(), []
    for path, (before, after) in sorted(headers.items()):
        found, nameless = changed_names(before, after)
        names |= found
        unnamed += [f"{path}: {line[:60]}" for line in nameless]
    if unnamed:
        raise Refused(f"the fix changes code of a shared header that names nothing its includers use "
                      f"({'; '.join(unnamed[:2])}): which includers compile it cannot be bounded")
    reached = reaching(clone, commit, names, set(own) | set(headers))
    cannot = [p for p in reached if p.endswith((".h", ".hpp")) or not (
        part_of(p) in ("op", "stub") or INTERPOSABLE.search(p))]
    if len(reached) > MOST or cannot:
        why = (f"{len(reached)} of torch {version}'s compiled files name it, more than the {MOST} a library "
               "rebuilds" if len(reached) > MOST else
               f"{', '.join(cannot[:3])} name{'s' if len(cannot) == 1 else ''} it, "
               f"{'a header whose includers compile it' if cannot[0].endswith(('.h', '.hpp')) else 'code no library rebuilds'}")
        raise Refused(f"the fix changes a shared header's code ({', '.join(sorted(names)[:4])}"
                      f"{' ...' if len(names) > 4 else ''}): {why}: an ABI change with {len(reached)} includers")
    return reached
