"""The operator tables of one PyTorch source tree: which operators a C++ function can affect.

Read from a tree at one commit (a clone, or a folder such as ``../shared/pytorch-history``'s
snapshots): ``native_functions.yaml`` (operator -> the functions it dispatches to),
``derivatives.yaml`` (operator -> its backward formula), the DispatchStub registrations
(``REGISTER_DISPATCH(stub, &kernel)``: kernel -> stub), and every function of ``aten/src/ATen/native``
with the names it calls (to go from a changed helper to the functions that call it).
"""
import dataclasses
import functools
import pickle
import re
import subprocess
import tarfile
from collections import defaultdict
from pathlib import Path

from ..failures import reading
from ..io import atomic_open
from . import cpp
from .callers import walk
from .cpp import IDENT
from .declarations import dispatch_targets, yaml_entries
from .paths import kind_of

SHA = re.compile(r"^[0-9a-f]{40}$")
TABLES_VERSION = 5  # bump when what the tables hold changes: cached tables are then remade


def checked_sha(value, what):
    """``value`` if it is a full commit SHA; else ValueError naming it (a value from an API or a
    file that starts with ``-`` would reach git as an option)."""
    if not isinstance(value, str) or not SHA.match(value) or value.endswith("\n"):
        raise ValueError(f"{what}: not a commit SHA (40 hex digits): {str(value)[:80]!r}")
    return value

NATIVE = "aten/src/ATen/native/"
TH = "aten/src/TH/"  # the legacy CPU library (THC, its CUDA twin, is CUDA-only)
CWRAP = "aten/src/ATen/Declarations.cwrap"  # TH functions (cname) -> the _th_ functions ATen calls
TH_NAME = re.compile(r"\bTH\w*_\s*\(\s*(\w+)\s*\)\s*\(")  # THTensor_(addmm)( ...
NATIVE_YAML = NATIVE + "native_functions.yaml"
DERIVATIVES = "tools/autograd/derivatives.yaml"
AUTOGRAD_TEMPLATES = "tools/autograd/templates/"
CPP_SUFFIXES = (".cpp", ".cc", ".cu", ".h", ".cuh", ".hpp")
C_SUFFIXES = CPP_SUFFIXES + (".c",)  # and TH's C
TESTS = re.compile(r"(^|/)tests?/|_test\.(cc|cpp)$")  # compiled into test binaries, not the wheel
REGISTER = re.compile(r"REGISTER_(?:\w+_)?DISPATCH\s*\(\s*(\w+)\s*,\s*&?\s*([\w:]+)\s*\)")


class DirTree:
    """A source tree as a folder (a snapshot of a commit)."""

    def __init__(self, root, label=None):
        self.root = Path(root)
        self.label = label or str(root)

    def read(self, path):
        p = self.root / path
        return p.read_text(encoding="utf-8", errors="replace") if p.is_file() else None

    def files(self, prefix):
        base = self.root / prefix
        if not base.is_dir():
            return []
        return sorted(str(p.relative_to(self.root)) for p in base.rglob("*") if p.is_file())


class TarTree:
    """One folder of a tar archive as a source tree: the fix's own files shipped beside its patch
    (``artifacts.diffs.write_fix_files``), read once into memory."""

    def __init__(self, archive, folder, label=None):
        self.archive, self.folder = Path(archive), folder
        self.label = label or f"{self.archive.name}:{folder}"
        self._files = None

    def _members(self):
        if self._files is None:
            self._files = {}
            with reading(self.archive), tarfile.open(self.archive) as tar:
                for member in tar.getmembers():
                    head, _, path = member.name.partition("/")
                    if head == self.folder and member.isfile():
                        self._files[path] = tar.extractfile(member).read().decode("utf-8", "replace")
        return self._files

    def read(self, path):
        return self._members().get(path)


class SourceTree:
    """A release source (``release_files.ReleaseSource``) as a tree of its files and operator
    declarations."""

    def __init__(self, source):
        self.texts = {path: data.decode("utf-8", "replace")
                      for path, data in {**source.files, **source.yamls}.items()}
        self.label = source.origin

    def read(self, path):
        return self.texts.get(path)

    def files(self, prefix):
        return sorted(p for p in self.texts if p.startswith(prefix))


class GitTree:
    """A source tree as a commit of a clone: files read with ``git cat-file``, never checked out."""

    def __init__(self, clone, commit):
        if not re.fullmatch(r"[0-9a-f]{40}", commit or ""):
            raise ValueError(f"not a commit SHA: {commit!r}")
        self.clone, self.commit = str(clone), commit
        self.label = f"{Path(clone).name}@{commit[:12]}"
        self._cache = {}

    def read(self, path):
        if path not in self._cache:
            out = subprocess.run(["git", "-C", self.clone, "cat-file", "blob", f"{self.commit}:{path}"],
                                 capture_output=True)
            self._cache[path] = out.stdout.decode("utf-8", "replace") if out.returncode == 0 else None
        return self._cache[path]

    def files(self, prefix):
        out = subprocess.run(["git", "-C", self.clone, "ls-tree", "-r", "--name-only", self.commit,
                              "--", prefix], capture_output=True, text=True)
        return sorted(out.stdout.split()) if out.returncode == 0 else []

    def absent(self, paths):
        """``paths`` (absent from this tree), each with the commit of its history that took it away
        or moved it, where the clone has one: "aten/src/ATen/NamedTensor.cpp (taken away or moved
        by 0123abcd Move NamedTensor to core)"."""
        said = []
        for path in paths:
            last = subprocess.run(["git", "-C", self.clone, "log", "-1", "--format=%h %s", self.commit, "--", path],
                                  capture_output=True, text=True).stdout.strip()
            said.append(f"{path} (taken away or moved by {last})" if last else path)
        return ", ".join(said)

    def read_many(self, paths):
        """Many files in one ``git cat-file --batch`` (reading ATen one file at a time is slow)."""
        want = [p for p in paths if p not in self._cache]
        if want:
            batch = "".join(f"{self.commit}:{p}\n" for p in want).encode()
            out = subprocess.run(["git", "-C", self.clone, "cat-file", "--batch"], input=batch,
                                 capture_output=True).stdout
            pos = 0
            for p in want:
                end = out.index(b"\n", pos)
                header = out[pos:end].split()
                if len(header) == 3:
                    size = int(header[2])  # a folder (a tree object) is no file
                    self._cache[p] = out[end + 1:end + 1 + size].decode("utf-8", "replace") \
                        if header[1] == b"blob" else None
                    pos = end + 1 + size + 1
                else:
                    self._cache[p] = None
                    pos = end + 1
        return {p: self._cache[p] for p in paths}


# What the library is compiled from: its C and C++ sources, and the code generators and their
# inputs, which can write any name into the generated sources
COMPILED_FROM = re.compile("(" + "|".join(re.escape(x) for x in C_SUFFIXES) + r")$|^(tools|aten/src/ATen)/.*\.(py|yaml|cwrap|in)$")


def written_at(tree, word):
    """Where ``word`` is written in the files the library is compiled from, as {path: [line]}
    (in C and C++, outside comments and literals: ``_lines_writing``); None
    where the tree cannot be searched whole (the fix's own files), so nothing can be said of where
    else it is written."""
    if isinstance(tree, GitTree):
        out = subprocess.run(["git", "-C", tree.clone, "grep", "-I", "-l", "-w", "-e", word, tree.commit, "--"],
                             capture_output=True, text=True)
        if out.returncode not in (0, 1):
            return None
        paths = [line.split(":", 1)[1] for line in out.stdout.splitlines()]
    elif hasattr(tree, "files"):
        paths = tree.files("")
    else:
        return None
    # what a Python workload never runs (tests, mobile, binaries, the C++ frontend) calls nothing
    paths = [p for p in paths if COMPILED_FROM.search(p) and not TESTS.search(p)
             and kind_of(p) not in ("not_shipped", "frontend")]
    texts = tree.read_many(paths) if hasattr(tree, "read_many") else {p: tree.read(p) for p in paths}
    pattern, found = re.compile(rf"\b{re.escape(word)}\b"), {}
    for path, text in texts.items():
        lines = _lines_writing(text or "", pattern) if path.endswith(C_SUFFIXES) else \
            [n for n, line in enumerate((text or "").splitlines(), 1) if pattern.search(line)]
        if lines:
            found[path] = lines
    return found


def _lines_writing(text, pattern):
    """The lines of a C or C++ source where ``pattern`` is in code, outside comments and literals;
    a preprocessor directive's lines are read as they are (a macro can call what it names)."""
    code, lines, directive = cpp.blank(text).splitlines(), [], False
    for n, line in enumerate(text.splitlines(), 1):
        directive = directive or line.lstrip().startswith("#")
        if pattern.search(line if directive else code[n - 1] if n - 1 < len(code) else ""):
            lines.append(n)
        directive = directive and line.rstrip().endswith("\\")
    return lines


def cwrap_entries(text):
    """The ``[[ ... ]]`` entries of Declarations.cwrap: name, cname (the TH function; the name
    when absent) and line span."""
    entries, current = [], None
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip() == "[[":
            current = {"name": "", "cname": "", "start": number, "end": number}
        elif current is not None:
            m = re.match(r"^\s*(name|cname):\s*(\w+)\s*$", line)
            if m and not current[m.group(1)]:
                current[m.group(1)] = m.group(2)
            if line.strip() == "]]":
                current["end"] = number
                current["cname"] = current["cname"] or current["name"]
                entries.append(current)
                current = None
    return entries


def th_name(lines, fn):
    """The name a TH function is defined under (``addmm`` for ``THTensor_(addmm)``), or its own
    name where it is a plain function (``fn``: a ``cpp.Function`` of that file)."""
    head = "\n".join(lines[max(0, fn.start - 1):fn.start + 2])
    match = TH_NAME.search(head)
    return match.group(1) if match and fn.name.endswith("_") else fn.name


@functools.lru_cache(maxsize=8192)
def _parsed(text):
    """The functions of one source's text, parsed once per content: the tables of commits near
    each other (a study's fixes, a corpus window) share most of ATen's files."""
    return tuple(cpp.functions(text))


class Tables:
    def __init__(self, tree):
        self.tree, self.label = tree, tree.label
        self.native = yaml_entries(tree.read(NATIVE_YAML) or "", "func")
        self.derivatives = yaml_entries(tree.read(DERIVATIVES) or "", "name")
        if not self.native:
            raise FileNotFoundError(f"{tree.label}: no {NATIVE_YAML}")
        self.ops_of_function = defaultdict(set)  # C++ function name -> operators dispatching to it
        for entry in self.native:
            for target in dispatch_targets(entry["lines"]) or {entry["op"]}:
                self.ops_of_function[target].add(entry["op"])
        self.op_names = {e["op"] for e in self.native}
        paths = [p for p in tree.files(NATIVE) if p.endswith(CPP_SUFFIXES) and not TESTS.search(p)]
        texts = tree.read_many(paths) if hasattr(tree, "read_many") else {p: tree.read(p) for p in paths}
        self.functions = {}                    # path -> [cpp.Function]
        self.callers = defaultdict(set)        # name -> {(path, caller)}: direct calls
        self.dispatchers = defaultdict(set)    # operator -> {(path, caller)}: calls through the dispatcher
        self.stub_of_kernel = defaultdict(set)
        for path, text in texts.items():
            if text is None:
                continue
            funcs = [dataclasses.replace(fn) for fn in _parsed(text)]  # its own copies: indexed below
            self.functions[path] = funcs
            for fn in funcs:
                for name in fn.calls:
                    self.callers[name].add((path, fn))
                for name in fn.dispatched & self.op_names:
                    self.dispatchers[name].add((path, fn))
                fn.calls = fn.dispatched = None  # indexed: the tables are pickled per commit
            for stub, kernel in REGISTER.findall(text):
                self.stub_of_kernel[kernel.split("::")[-1]].add(stub)
        owners = {fn.owner for funcs in self.functions.values() for fn in funcs if fn.owner}
        self.files_naming = defaultdict(set)   # class -> files whose text names it
        for path, text in texts.items():
            for word in owners & set(IDENT.findall(text or "")):
                self.files_naming[word].add(path)
        self.formula_users = defaultdict(set)  # helper in Functions.cpp -> ops whose backward calls it
        for entry in self.derivatives:
            for name in cpp.CALL.findall("\n".join(entry["lines"][1:])):
                self.formula_users[name].add(entry["op"])
        self.cwrap = cwrap_entries(tree.read(CWRAP) or "")
        self.th_callers = defaultdict(set)     # TH function -> TH functions that call it
        th = [p for p in tree.files(TH) if p.endswith((".c", ".cpp", ".h"))]
        for text in (tree.read_many(th) if hasattr(tree, "read_many")
                     else {p: tree.read(p) for p in th}).values():
            for fn in cpp.functions(text or ""):
                caller = th_name(text.splitlines(), fn)
                body = "\n".join(text.splitlines()[fn.start - 1:fn.end])
                for callee in set(TH_NAME.findall(body)) - {caller}:
                    self.th_callers[callee].add(caller)

    def th_ops(self, names):
        """Operators that can run any of the TH functions ``names``: their TH callers' closure,
        mapped by Declarations.cwrap (an entry's ``cname``) to the ``_th_`` functions ATen
        calls, then as any function (``affected_ops``). Returns ``(ops, why, loose)``; ``loose``
        names the TH functions that no entry and no TH function lead to."""
        closure, queue = set(), list(names)
        while queue:
            name = queue.pop()
            if name not in closure:
                closure.add(name)
                queue += [c for c in self.th_callers.get(name, ()) if c]
        entries = {e["name"]: n for n in closure for e in self.cwrap if e["cname"] == n}
        known = set(self.ops_of_function) | set(self.callers)
        functions = [v for e in sorted(entries) for v in (e, e + "_out", e + "_") if v in known]
        # what dispatches to a _th_ function, and what calls it directly (legacy::cpu::_th_addmm):
        # a direct call bypasses the dispatcher, so its caller's operators run it too
        changed = [(CWRAP, cpp.Function(v, 0, 0)) for v in functions] + [
            (path, fn) for v in functions for path, fn in sorted(self.callers.get(v, ()),
                                                                 key=lambda c: (c[0], c[1].start))]
        ops, why, loose = self.affected_ops(changed) if changed else (set(), {}, set())
        if not entries:
            loose |= {f"{TH}: {n}" for n in sorted(names)}
        return ops, why, loose

    def class_users(self, cls):
        """Every function of every file that names the class: a member can be reached through
        objects held anywhere in those files (members of other classes included)."""
        return [(p, fn) for p in sorted(self.files_naming.get(cls, ())) for fn in self.functions[p]]

    def affected_ops(self, changed):
        """Operators that can run any of the ``changed`` functions ((path, cpp.Function) pairs):
        ``(ops, why, loose)`` of their ``callers.walk``. ``why`` maps an operator to the chain that
        reaches it (the functions from the changed one to the operator's, a tuple); ``loose``
        names the functions that implement no operator, register no kernel and have no caller in
        the tables: called, if at all, from outside ATen/native, which cannot be bounded."""
        found = walk(self, changed)
        return found.ops, found.why, found.loose

    def calling_ops(self, names):
        """Operators whose kernels can call any of the functions ``names``, directly or through
        other functions, other operators' included (an ``at::relu`` or ``x.relu()`` inside another
        kernel: ``dispatchers``): what can run them below autograd, where a profile does not look. An
        over-approximation, by name."""
        seen, ops, queue = set(), set(), list(names)
        while queue:
            name = queue.pop()
            if name in seen:
                continue
            seen.add(name)
            for _, caller in self.callers.get(name, set()) | self.dispatchers.get(name, set()):
                ops.update(self.ops_of_function.get(caller.name, ()))
                queue.append(caller.name)
            for stub in self.stub_of_kernel.get(name, ()):
                queue.append(stub)
        return ops


def cached_tables(tree, cache_dir):
    """Tables of a tree, pickled by commit (a commit is immutable); a folder is read each time.
    The tables keep the tree they were read from: hunks are found in it."""
    if not isinstance(tree, GitTree):
        return Tables(tree)
    path = Path(cache_dir) / f"{tree.commit}-v{TABLES_VERSION}.pickle"
    if path.exists():
        with open(path, "rb") as handle:
            tables = pickle.load(handle)
        tables.tree = tree
        return tables
    tables = Tables(tree)
    tables.tree = None  # the clone's reader is not kept
    with atomic_open(path, "wb") as handle:
        pickle.dump(tables, handle)
    tables.tree = tree
    return tables
