"""The verdict of one fix for one workload: the static mapping read against the workload's trace.

- ``reached``: a changed Python line ran (or a changed import-time line of a module that was
  loaded), or an affected operator was dispatched (its backward runs when it is in the autograd
  graph: a changed derivative counts when its forward operator ran);
- ``not reached``: nothing changed ran, on a complete mapping;
- ``not reached on cpu``: what could run is CUDA-only and the workload ran on the CPU;
- ``unknown``: the mapping could not bound part of the change (the reasons say which).
``reached`` is necessary, not sufficient, for an effect: the fingerprints after training stay the
proof that bits changed.
"""
import ast
import base64
import zlib

from . import patch


def unpack(text):
    return zlib.decompress(base64.b64decode(text)).decode("utf-8")


DOC_CALLS = {"add_docstr", "_add_docstr", "add_docstr_all"}


class PythonFile:
    """A traced Python file: its functions' spans and its documentation-only lines."""

    def __init__(self, source):
        self.lines = source.splitlines()
        self.functions, self.docs, self.statements, self.names = [], set(), {}, {}
        try:
            tree = ast.parse(source)
        except SyntaxError:
            self.functions = None
            return
        for node in ast.walk(tree):
            if isinstance(node, ast.stmt) and not isinstance(node, (ast.FunctionDef, ast.ClassDef,
                                                                    ast.AsyncFunctionDef)):
                for line in range(node.lineno, node.end_lineno + 1):
                    inner = self.statements.get(line)
                    if inner is None or inner.lineno <= node.lineno:
                        self.statements[line] = node  # the innermost simple statement
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([d.lineno for d in node.decorator_list] + [node.lineno])
                self.functions.append((first, node.lineno, node.body[0].lineno, node.end_lineno))
                self.names[node.lineno] = node.name
            elif isinstance(node, ast.Expr) and _is_text(node.value):
                self.docs.update(range(node.lineno, node.end_lineno + 1))
            elif isinstance(node, ast.Assign) and all(getattr(t, "attr", "") == "__doc__"
                                                      for t in node.targets):
                self.docs.update(range(node.lineno, node.end_lineno + 1))
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and \
                    getattr(node.value.func, "id", getattr(node.value.func, "attr", "")) in DOC_CALLS:
                self.docs.update(range(node.lineno, node.end_lineno + 1))  # sets a docstring

    def where(self, n):
        """``body`` / ``header`` of the innermost function holding line n (with its span), else
        ``import``; None when the file could not be parsed."""
        if self.functions is None:
            return None, None
        inside = [f for f in self.functions if f[0] <= n <= f[3]]
        if not inside:
            return "import", None
        fn = max(inside, key=lambda f: f[0])
        return ("header" if n < fn[2] else "body"), fn

    def bound_name(self, n):
        """The name that the assignment on line n only binds: an attribute of ``self``, or a
        module-level (or class-level) name; None for anything else (a local is read where it is
        set, and other statements act on their own)."""
        node = self.statements.get(n)
        if not isinstance(node, (ast.Assign, ast.AnnAssign)):
            return None
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        at_import = self.where(n)[0] == "import"
        names = set()
        for t in targets:
            if isinstance(t, ast.Attribute) and getattr(t.value, "id", "") == "self":
                names.add(t.attr)
            elif isinstance(t, ast.Name) and at_import:
                names.add(t.id)
            else:
                return None
        return names.pop() if len(names) == 1 else None

    def dead(self, n, uses, ran):
        """Whether a changed line cannot matter to this workload: an import (it only binds
        names), or a value bound to a name (``self.x``, a module-level name) that no line that ran
        reads; the lines of a private function that nothing that ran reads count as dead too."""
        node = self.statements.get(n)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return True
        target = self.bound_name(n)
        if target is not None:
            return not uses.read_by_running_code(target)
        where, fn = self.where(n)
        name = self.names.get(fn[1]) if fn else None
        if name and name.startswith("_") and not name.startswith("__"):
            return not uses.read_by_running_code(name)
        return False

    def entered(self, ran):
        return any(f[2] <= n <= f[3] or n in (f[0], f[1]) for n in ran for f in self.functions or ())


def _is_text(node):
    return (isinstance(node, ast.Constant) and isinstance(node.value, str)) or \
        isinstance(node, ast.JoinedStr) or (isinstance(node, ast.BinOp) and _is_text(node.left))


class Uses:
    """Where the traced sources read each name (``x``, ``obj.x``): a changed line that only binds a
    value matters only if a line that ran reads it."""

    def __init__(self, trace):
        self.trace, self.sites, self.files = trace, {}, {}
        for path, packed in trace["sources"].items():
            try:
                tree = ast.parse(unpack(packed))
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                name = node.id if isinstance(node, ast.Name) else (
                    node.attr if isinstance(node, ast.Attribute) else None)
                if name and isinstance(node.ctx, ast.Load):
                    self.sites.setdefault(name, []).append((path, node.lineno))

    def file(self, path):
        if path not in self.files:
            self.files[path] = PythonFile(unpack(self.trace["sources"][path]))
        return self.files[path]

    def read_by_running_code(self, name, depth=0):
        """Whether any line that ran reads ``name`` in a way that can matter (a read inside a
        private assignment that is itself never read does not)."""
        for path, n in self.sites.get(name, ()):
            if n not in set(self.trace["lines"].get(path, ())):
                continue
            target = self.file(path).bound_name(n)
            if target is None or depth > 3 or self.read_by_running_code(target, depth + 1):
                return True
        return False


def python_reach(path, hunks, trace, uses=None):
    """(reached lines as 'path:line (how)', reasons it cannot be told, a note) for one Python
    file. A body line counts when it ran; a function's header (decorators, signature, defaults)
    when the function was called; a line outside every function when the module was loaded (it
    ran at import, before the trace); documentation (docstrings, add_docstr texts) never."""
    packed = trace["sources"].get(path)
    if packed is None:
        return [], [], f"{path}: not imported by the workload"
    source = PythonFile(unpack(packed))
    lines = source.lines
    ran = set(trace["lines"].get(path, ()))
    reached, unknown = [], []
    for hunk in hunks:
        found = patch.locate(hunk, lines)
        if found is None:
            unknown.append(f"{path}: the hunk at line {hunk.new_start} is not in the traced "
                           f"torch {trace['torch_version']}'s copy")
            continue
        for n in found[1]:
            text = lines[n - 1].strip() if n - 1 < len(lines) else ""
            if not text or text.startswith("#") or n in source.docs:
                continue
            where, fn = source.where(n)
            dead = source.dead(n, uses or Uses(trace), trace["lines"].get(path, ()))
            if dead:
                continue
            if where is None:
                unknown.append(f"{path}: cannot be parsed")
            elif where == "body" and n in ran:
                reached.append(f"{path}:{n} ran")
            elif where == "header" and (ran & {fn[0], fn[1]} or any(fn[2] <= m <= fn[3] for m in ran)):
                reached.append(f"{path}:{n} (the header of a function that ran)")
            elif where == "import":
                reached.append(f"{path}:{n} ran at import")
    note = None if reached or unknown else f"{path}: no changed line that matters ran"
    return reached, unknown, note


def entered(trace, package):
    """Whether any function of a torch Python package ran in the trace (not only its import)."""
    return any(PythonFile(unpack(trace["sources"][path])).entered(ran)
               for path, ran in trace["lines"].items()
               if path.startswith(package) and path in trace["sources"])


def judge(mapping, trace):
    """The verdict dict of one fix (a ``static.Mapping``) against one trace."""
    device = trace.get("device", "cpu")
    traced_ops = set(trace["ops"])
    reached, unknown, notes = [], list(mapping.unknown), []
    for op, why in sorted(mapping.ops.items()):
        if op in traced_ops:
            reached.append(f"operator {op} ({why})")
    for op, why in sorted(mapping.backward_ops.items()):
        if op in traced_ops:
            reached.append(f"backward of {op} ({why})")
    if device == "cuda":
        unknown += mapping.cuda_unknown
    if device == "cuda" and mapping.cuda and not mapping.cuda_ops and not mapping.cuda_unknown:
        unknown.append(f"CUDA sources changed ({', '.join(mapping.cuda[:3])}) and no operator "
                       f"table mapped them: on cuda that cannot be bounded")
    if device == "cuda":
        for op, why in sorted(mapping.cuda_ops.items()):
            if op in traced_ops:
                reached.append(f"operator {op} on cuda ({why})")
    uses = None
    if mapping.python:  # one index per trace, kept with it (judging many fixes reuses it)
        uses = trace.get("_uses") or trace.setdefault("_uses", Uses(trace))
    for path, hunks in mapping.python:
        hits, cannot, note = python_reach(path, hunks, trace, uses)
        reached += hits
        unknown += cannot
        if note:
            notes.append(note)
    for path, package in mapping.entered:
        if entered(trace, package):
            unknown.append(f"{path}: C++ entered through {package}, whose functions ran: not "
                           f"bounded further")
        else:
            notes.append(f"{path}: entered only through {package}, none of whose functions ran")
    runs_anything = bool(mapping.ops or mapping.backward_ops or mapping.python or
                         (mapping.cuda_ops and device == "cuda"))
    if reached:
        verdict = "reached"
    elif unknown:
        verdict = "unknown"
    elif mapping.cuda and device != "cuda" and not runs_anything:
        verdict = "not reached on cpu"
    else:
        verdict = "not reached"
    return {"verdict": verdict, "reached": reached, "unknown": unknown,
            "not_reached": _not_reached(mapping, traced_ops, notes, device),
            "torch_version": trace.get("torch_version"), "device": device,
            "tables": mapping.tables}


def _not_reached(mapping, traced_ops, notes, device):
    out = [f"operator {op} not dispatched" for op in sorted(set(mapping.ops) | set(mapping.backward_ops))
           if op not in traced_ops]
    if mapping.cuda and device != "cuda":
        out.append(f"CUDA-only: {', '.join(mapping.cuda[:4])}{' ...' if len(mapping.cuda) > 4 else ''}")
    if mapping.frontend:
        out.append(f"C++ frontend, never called from Python: {_files(mapping.frontend)}")
    if mapping.not_shipped:
        out.append(f"not shipped (tests, docs, mobile): {_files(mapping.not_shipped)}")
    return out + notes


def _files(paths):
    return f"{len(paths)} file{'s' if len(paths) != 1 else ''}"
