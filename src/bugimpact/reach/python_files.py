"""Python files of the traced torch: where a fix's changed lines run, and whether they ran.

A changed line counts when it ran (the trace's line tracer), a function's header when the function
was called, a line outside every function when its module was loaded (before the trace), a line of
a function a module calls while it loads always; never documentation or an import, nor a value
bound to a name that no line that ran reads. A change not in the traced copy is placed by the
fix's own files (``python_scopes``), where a clone gives them.
"""
import ast
import base64
import zlib

from ..framework import patch


def unpack(text):
    return zlib.decompress(base64.b64decode(text)).decode("utf-8")


DOC_CALLS = {"add_docstr", "_add_docstr", "add_docstr_all"}


class PythonFile:
    """A traced Python file: its functions' spans and its documentation-only lines."""

    def __init__(self, source):
        self.lines = source.splitlines()
        self.functions, self.docs, self.statements, self.names = [], set(), {}, {}
        self._qualified = None
        self._named_at = {}  # def line -> qualified name (two defs may share a name)
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

    def qualified(self):
        """{qualified name: (first line, def line, first body line, last line)} of every function,
        nested in its classes and functions (``Class.method``, ``outer.inner``)."""
        if self.functions is None:
            return {}
        if self._qualified is not None:
            return self._qualified
        out = self._qualified = {}

        def walk(node, prefix):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    name = prefix + child.name
                    if not isinstance(child, ast.ClassDef):
                        first = min([d.lineno for d in child.decorator_list] + [child.lineno])
                        out[name] = (first, child.lineno, child.body[0].lineno, child.end_lineno)
                        self._named_at[child.lineno] = name
                    walk(child, name + ".")
                else:
                    walk(child, prefix)
        walk(ast.parse("\n".join(self.lines)), "")
        return out

    def defined_at_import(self, name):
        """Whether a function's ``def`` runs while its module loads: it is nested in classes
        only, not in another function."""
        parts = name.split(".")
        return not any(".".join(parts[:k]) in self.qualified() for k in range(1, len(parts)))

    def qualified_at(self, line):
        """The qualified name of the function defined on ``line`` (a property's getter and setter
        share one, which ``qualified`` keeps the last span of)."""
        self.qualified()
        return self._named_at[line]

    def scope(self, n):
        """Where line n executes: ``("body", qualified name)`` of the innermost function whose body
        holds it, ``("header", name)`` for its decorators and signature (run when the ``def``
        runs), ``("import", None)`` outside every function, ``("binding", None)`` for an import
        statement (it only binds names), or None when unparsable."""
        if self.functions is None:
            return None
        if isinstance(self.statements.get(n), (ast.Import, ast.ImportFrom)):
            return "binding", None
        inside = [(span, name) for name, span in self.qualified().items() if span[0] <= n <= span[3]]
        if not inside:
            return "import", None
        span, name = max(inside, key=lambda item: item[0][0])
        return ("header" if n < span[2] else "body"), name

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
        self.trace, self.sites, self.files, self.import_calls = trace, {}, {}, set()
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
            for kind, name in _calls_while_loading(tree):
                self.import_calls.add((kind, name))

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


def _calls_while_loading(tree):
    """What a module calls while it loads (module and class level, decorators), as ``("name",
    f)`` for ``f(...)`` and ``("attr", f)`` for ``x.f(...)``: those functions may run before a
    trace starts, which then cannot see them."""
    called = set()

    def note(func):
        if isinstance(func, ast.Name):
            called.add(("name", func.id))
        elif isinstance(func, ast.Attribute):
            called.add(("attr", func.attr))

    def calls_in(node, decorator=False):
        if decorator and not isinstance(node, ast.Call):
            note(node)  # @decorator calls it with the function
        for inner in ast.walk(node):
            if isinstance(inner, ast.Call):
                note(inner.func)

    def visit(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                for deco in child.decorator_list:
                    calls_in(deco, decorator=True)
                if isinstance(child, ast.ClassDef):
                    visit(child)
            elif isinstance(child, ast.Lambda):
                continue
            else:
                if isinstance(child, ast.Call):
                    note(child.func)
                visit(child)
    visit(tree)
    return called


def called_while_loading(uses, qualified):
    """Whether a function (by its qualified name) may be called while some module loads: a
    method by ``x.name(...)``, a module's function by ``name(...)`` or ``module.name(...)``."""
    name = qualified.split(".")[-1]
    return ("attr", name) in uses.import_calls or (
        "." not in qualified and ("name", name) in uses.import_calls)


# a line long enough to say which code it is, where it is found again (not ``return x``)
DISTINCT = 24
# how a change the traced copy does not hold was found to be in functions that did not run
OWN_FILES = "by the fix's own files"
RENAMED = ("in functions the release renamed: none of the file's functions ran, and they hold the "
           "change's lines")


def _held_in_functions(hunk, source):
    """Whether the traced copy holds the hunk's code in its functions: one of the hunk's lines
    (context, removed or added) long enough to tell (``DISTINCT``) is a line of a function body
    there. A function the release renamed keeps most of its lines."""
    body = {source.lines[n - 1].strip() for name, span in source.qualified().items()
            for n in range(span[2], span[3] + 1) if n - 1 < len(source.lines)}
    return any(len(text) >= DISTINCT and not text.startswith("#") and text in body
               for text in (line.strip() for _, line in hunk.lines))


def _no_function_ran(source, ran, uses):
    """Whether no function of the traced copy ran in the trace, or may have while modules loaded."""
    return not source.entered(ran) and not any(called_while_loading(uses, name) for name in source.qualified())


def _unplaced(scopes, source, ran, uses, hunk):
    """For a change not found in the traced copy, from where the fix's own files put its lines
    (``python_scopes``): ``("reached", how)`` when a changed line runs while its module
    loads (the module was loaded) or in a function that ran or is called then; ``(None, how)``
    when every changed line is an import or in the body of a function that did not run: found in
    the traced copy by its qualified name, or, where the release renamed it, no function of the
    copy ran and the copy's functions hold the hunk's lines; else ``("unknown", why)``."""
    if not scopes:
        return "unknown", "no clone gave the fix's own files to say where its lines run"
    outcome = (None, OWN_FILES)
    for kind, name in scopes:
        if kind == "binding":  # an import: it only binds names, as a placed one
            continue
        if kind == "import" or (kind == "header" and source.defined_at_import(name)):
            return "reached", "a changed line runs while its module loads"
        if kind != "body":
            return "unknown", f"a changed line runs where the nested {name} is defined"
        span = source.qualified().get(name)
        if span is None and _no_function_ran(source, ran, uses) and _held_in_functions(hunk, source):
            outcome = outcome if outcome[0] else (None, RENAMED)
        elif span is None:
            outcome = ("unknown", f"its function {name} is not in it")
        elif any(span[2] <= m <= span[3] for m in ran):
            outcome = ("unknown", f"its function {name} ran, and which of its lines cannot be told")
        elif called_while_loading(uses, name):
            return "reached", f"in {name}, called while modules load, before the trace"
    return outcome


def python_reach(path, hunks, trace, uses=None, scopes=None):
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
    uses = uses or Uses(trace)
    reached, unknown, unplaced = [], [], []
    for index, hunk in enumerate(hunks):
        found = patch.locate(hunk, lines)
        if found is None:
            outcome, why = _unplaced((scopes or {}).get(index), source, ran, uses, hunk)
            where = f"{path}: the hunk at line {hunk.new_start} (not in the traced copy)"
            if outcome == "reached":
                reached.append(f"{where}: {why}")
            elif outcome == "unknown":
                unknown.append(f"{where}: {why}")
            else:
                unplaced.append((hunk.new_start, why))
            continue
        for n in found[1]:
            text = lines[n - 1].strip() if n - 1 < len(lines) else ""
            if not text or text.startswith("#") or n in source.docs:
                continue
            where, fn = source.where(n)
            dead = source.dead(n, uses, trace["lines"].get(path, ()))
            if dead:
                continue
            if where is None:
                unknown.append(f"{path}: cannot be parsed")
            elif where == "body" and n in ran:
                reached.append(f"{path}:{n} ran")
            elif where == "body" and called_while_loading(uses, source.qualified_at(fn[1])):
                reached.append(f"{path}:{n} (in {source.qualified_at(fn[1])}, called while modules "
                               "load, before the trace)")
            elif where == "header" and (ran & {fn[0], fn[1]} or any(fn[2] <= m <= fn[3] for m in ran)):
                reached.append(f"{path}:{n} (the header of a function that ran)")
            elif where == "import":
                reached.append(f"{path}:{n} ran at import")
    note = None if reached or unknown else f"{path}: no changed line that matters ran" + (
        " (the hunks not in the traced copy are in functions that did not run: "
        + "; ".join(f"at lines {', '.join(str(n) for n, w in unplaced if w == how)}, {how}"
                    for how in dict.fromkeys(w for _, w in unplaced)) + ")" if unplaced else "")
    return reached, unknown, note


def python_scopes(fd, old_tree, new_tree):
    """{hunk index: [(where, function)]}: where each changed line of the fix runs in the fix's
    own files (``PythonFile.scope``: a function's body or header, or module level), removed lines
    in the buggy file and added lines in the corrected one. Where a copy that moved on since the
    fix has lost the changed lines, these still say which function they were in."""
    sources = {side: PythonFile(text) for side, tree, name in (("old", old_tree, fd.old_path),
                                                               ("new", new_tree, fd.path))
               if tree is not None and name and (text := tree.read(name)) is not None}
    out = {}
    for index, hunk in enumerate(fd.hunks):
        scopes = set()
        for change in patch.changes(hunk):
            for side, source in sources.items():
                start = change.line(side)
                for n in range(start, start + len(change.side(side))):
                    scopes.add(source.scope(n) or ("unparsable", None))
        if scopes and len(sources) == 2:
            out[index] = sorted(scopes, key=str)
    return out
