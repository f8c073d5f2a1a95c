"""The static side: what a fix's diff can affect, from the diff and the operator tables alone.

Each file of the diff ends in one of:
- ``python``: a file of the package; its hunks are kept, to be found in the traced release's copy;
- ``ops``: operators whose forward (``native_functions.yaml``, kernels, helpers and the stubs they
  register, the macros and constants those use) or backward (``derivatives.yaml`` and the helpers
  its formulas call) it changes;
- ``at import``: the tables of torch._C's Python bindings (``PyMethodDef``, ``PyTypeObject``, ...),
  which it builds into its types and modules when it loads: every workload reads them;
- ``methods`` and ``properties``: the methods of a binding class (``Tensor``, the storages) and
  the properties of its binding type whose table entry or binding body it changes, which run only
  when called, or read or set (``bindings``);
- ``cuda``: a CUDA-only source, which no CPU run executes, or a build file changed only in what a
  CUDA build alone does (``cmake``: under ``if (USE_NCCL)``, CUDA-only sources, libraries, macros);
- ``not shipped`` (tests, docs, CI) or ``frontend`` (the C++ frontend and mobile bindings, which a
  Python workload never calls);
- ``compiled under``: a file (outside the tables' reach) whose every changed line lies inside a
  conditional on one of the build's own settings (``cpp.BUILD_GUARD``: ``#if AT_PARALLEL_NATIVE``):
  the verdict reads the traced torch's build to say whether that code is in it at all;
- ``unknown``, with the reason: everything the tables cannot bound (headers used everywhere,
  TensorIterator, the dispatcher, codegen, other build changes, a conditional, a declaration no
  function of its file uses).
"""
import functools
import re
from dataclasses import dataclass

from ..framework import cmake, cpp, patch
from ..framework.declarations import yaml_entries
from ..framework.paths import CUDA, kind_of, part_of, why_unbounded
from ..framework.tables import (
    AUTOGRAD_TEMPLATES,
    C_SUFFIXES,
    CPP_SUFFIXES,
    CWRAP,
    DERIVATIVES,
    NATIVE,
    NATIVE_YAML,
    REGISTER,
    TH,
    cwrap_entries,
    th_name,
    written_at,
)
from .bindings import binding_change
from .claims import Mapping, Way
from .located import located, located_sides, outside_functions
from .python_files import python_scopes

# C++ that Python reaches only through one Python package: not reached when none of that package's
# functions ran (TorchScript's compiler and interpreter through torch.jit, ONNX export through
# torch.onnx, process groups and RPC through torch.distributed). The tracer itself (``tracer.cpp``,
# ``tracer.h``) is excluded: every operator consults it. Its Python side (``python_tracer.cpp``)
# is not: autograd's Python functions enter it only while a trace that torch.jit started runs.
ENTERED_THROUGH = ((re.compile(r"^torch/csrc/(jit/passes/onnx|onnx)"), "torch/onnx/"),
                   (re.compile(r"^torch/csrc/jit/(?!(.*/)?tracer\.)"), "torch/jit/"),
                   (re.compile(r"^torch/(lib/c10d|csrc/distributed)/"), "torch/distributed/"))
# Machinery that most kernels run through: a change there cannot be bounded to a few operators.
HUBS = re.compile(r"(^|/)(TensorIterator|DispatchStub|Loops|TensorIteratorReduce|Resize|"
                  r"TypeProperties|Copy|Fill|SharedReduceOps|ReduceOpsUtils|cpu/Reduce|"
                  r"cpu/Loops|cpu/vec256/[^/]*|UnaryOps\.h|BinaryOps\.h)[^/]*$")
# The Python bindings (torch._C): hand-written under torch/csrc, and the templates of the generated
# ones, whose code outside the ``${...}`` placeholders is copied as it is.
BINDINGS = re.compile(r"^torch/csrc/|^tools/autograd/templates/python_[^/]*\.cpp$")


def needs_tables(diff_text):
    """Whether mapping this diff needs the operator tables (it changes C++ or ATen's YAML)."""
    return any(kind_of(fd.name) == "cpp" and not (fd.binary or CUDA.search(fd.name))
               for fd in patch.parse(diff_text))


@dataclass
class Change:
    """One file of a diff, with what it is mapped through and into."""
    fd: object  # patch.FileDiff
    tables: object  # tables.Tables, or None when the diff needs none
    old_tree: object
    new_tree: object
    mapping: Mapping

    @property
    def path(self):
        return self.fd.name

    @property
    def kind(self):
        return kind_of(self.fd.name)

    @property
    def args(self):  # what the handlers of C++ and YAML changes read
        return self.fd, self.tables, self.old_tree, self.new_tree, self.mapping


def _python(change):
    change.mapping.python.append((change.path, change.fd.hunks))
    if change.old_tree or change.new_tree:
        change.mapping.scopes[change.path] = python_scopes(change.fd, change.old_tree, change.new_tree)


def _entered(change):
    package = next(pkg for rx, pkg in ENTERED_THROUGH if rx.search(change.path))
    change.mapping.entered.append((change.path, package))


# What each file of a diff is, and what is done with it: the first row whose test it passes.
CHANGE_KINDS = (
    (lambda c: c.kind == "python", _python),
    (lambda c: c.kind == "not_shipped", lambda c: c.mapping.not_shipped.append(c.path)),
    (lambda c: c.kind == "frontend", lambda c: c.mapping.frontend.append(c.path)),
    (lambda c: c.kind == "unknown",
     lambda c: c.mapping.unknown.append(f"{c.path}: a Python file outside the torch package")),
    (lambda c: c.fd.binary, lambda c: c.mapping.unknown.append(f"{c.path}: a binary change")),
    # CUDA-only, with no tables to map it through: its operators matter on a GPU only
    (lambda c: CUDA.search(c.path) and c.tables is None, lambda c: c.mapping.cuda.append(c.path)),
    (lambda c: c.path == NATIVE_YAML, lambda c: _yaml_change(*c.args, forward=True)),
    (lambda c: c.path == DERIVATIVES, lambda c: _yaml_change(*c.args, forward=False)),
    (lambda c: c.path.startswith(NATIVE) and c.path.endswith(CPP_SUFFIXES), lambda c: _native_change(*c.args)),
    (lambda c: c.path == AUTOGRAD_TEMPLATES + "Functions.cpp", lambda c: _formula_helpers(*c.args)),
    (lambda c: CUDA.search(c.path), lambda c: c.mapping.cuda.append(c.path)),
    (lambda c: c.path == CWRAP, lambda c: _cwrap_change(*c.args)),
    (lambda c: c.path.startswith(TH) and c.path.endswith(C_SUFFIXES), lambda c: _th_change(*c.args)),
    (lambda c: any(rx.search(c.path) for rx, _ in ENTERED_THROUGH), _entered),
    (lambda c: BINDINGS.search(c.path), lambda c: binding_change(*c.args)),
    (lambda c: cmake.BUILD_FILE.search(c.path) and c.tables is not None, lambda c: _build_file(*c.args)),
    (lambda c: True, lambda c: _unbounded(*c.args)),
)


def _build_file(fd, tables, old_tree, new_tree, mapping):
    """A build file: CUDA-only where each change is a CUDA build's alone (``cmake``), else
    unknown, with the first line that is not."""
    unplaced = Mapping()
    # a side the hunk only adds to or only removes from is marked by the lines around the change
    placed = [(hunk, lines, text) for hunk, lines, text, side in
              located_sides(fd, tables, old_tree, new_tree, unplaced)
              if any(tag == ("+" if side == "new" else "-") for tag, _ in hunk.lines)]
    tests = functools.lru_cache(maxsize=None)(lambda macro: _tested_outside_cuda(tables.tree, macro))
    found = [cmake.cuda_build_only(text, lines, tests) for _, lines, text in placed]
    if placed and not unplaced.unknown and all(option for option, _ in found):
        options = sorted({o for option, _ in found for o in option.split()})
        mapping.cuda.append(f"{fd.name} (every change under {' or '.join(options)})")
    else:
        why = next((w for _, w in found if w), "")
        mapping.unknown.append(f"{fd.name}: {why_unbounded(fd.name)}" + (f" ({why})" if why else ""))


def _tested_outside_cuda(tree, macro):
    """Whether any C or C++ source but a CUDA-only one tests ``macro`` with the preprocessor (a
    tree that cannot be searched whole: assumed so)."""
    where = written_at(tree, macro)
    if where is None:
        return True
    test = re.compile(rf"^\s*#\s*(if|ifdef|ifndef|elif)\b.*\b{re.escape(macro)}\b", re.M)
    return any(test.search(tree.read(path) or "") for path in where if not CUDA.search(path))
def _unbounded(fd, tables, old_tree, new_tree, mapping):
    """A C++ file the tables cannot map: compiled only under one build setting (each changed line
    inside its ``#if``, in every copy that holds it), or changed only in functions that ATen's
    native code alone calls (``_called_from_native``), or unknown."""
    unplaced = Mapping()  # a hunk no copy holds cannot be said to be under anything
    placed = list(located(fd, tables, old_tree, new_tree, unplaced)) if tables else []
    settings = {cpp.guard_of(text.splitlines(), lines) for _, lines, text in placed} if tables else {None}
    if len(settings) == 1 and None not in settings and not unplaced.unknown:
        mapping.compiled_under.append((fd.name, settings.pop()))
        return
    changed, why = _called_from_native(fd.name, placed, tables) if placed and not unplaced.unknown \
        else (None, why_unbounded(fd.name))
    if changed:
        _add_ops(mapping, *tables.affected_ops(changed), fd.name)
    else:
        mapping.unknown.append(f"{fd.name}: {why}")


# how many functions outside ATen/native a changed function's callers may lead through
MAX_CALLERS = 64


def _called_by_name(fn):
    """Whether ``fn`` runs only where its name is written: not an operator, a constructor or a
    destructor."""
    return bool(fn.name) and not fn.name.startswith("operator") and fn.name != fn.owner


def _called_from_native(path, placed, tables):
    """The changed functions of a C++ file outside ATen/native (a header such as ``vec256.h``),
    as (path, cpp.Function) pairs, where every changed line lies in the body of a function called
    by its name (``_called_by_name``) and every place the library's sources and code generators
    write that name is its own definition, a declaration, a call the tables follow, or a call
    from another function outside ATen/native that is bounded so in turn: the tables' callers then
    bound them all. Else ``(None, why)``."""
    if part_of(path) == "codegen" or not path.endswith(C_SUFFIXES):
        return None, why_unbounded(path)
    queue = []
    for _, lines, text in placed:
        funcs = cpp.functions(text)
        for n in lines:
            fn = cpp.enclosing(funcs, n)
            if fn is None or not _called_by_name(fn):
                return None, why_unbounded(path)
            queue.append((path, fn))
    changed, bounded = {id(fn) for _, fn in queue}, {}
    while queue:
        where_fn, fn = queue.pop()
        if (where_fn, fn.owner, fn.name) in bounded:
            continue
        if len(bounded) == MAX_CALLERS:
            return None, f"{fn.name}() and more than {MAX_CALLERS} functions outside ATen/native call it"
        bounded[(where_fn, fn.owner, fn.name)] = (where_fn, fn)
        where = written_at(tables.tree, fn.name)
        if where is None:
            return None, why_unbounded(path)
        for user, lines in sorted(where.items()):
            text = tables.tree.read(user) or ""
            native = tables.functions.get(user)
            funcs = native if native is not None else cpp.functions(text)
            for n in lines:
                at = cpp.enclosing(funcs, n)
                if at is not None and at.name == fn.name or at is None and cpp.declares(text, n, fn.name):
                    continue  # its own definition (a specialisation, an overload), or a declaration
                if native is None and at is not None and _called_by_name(at):
                    queue.append((user, at))  # a caller outside the tables: bounded the same way
                elif at is None or (user, at) not in tables.callers.get(fn.name, ()):
                    how = "changed there" if id(fn) in changed else f"which leads to the change, in {where_fn}"
                    return None, (f"{fn.name}(), {how}, is named at {user}:{n}, which the operator "
                                  f"tables do not follow")
    return list(bounded.values()), ""


def map_diff(diff_text, tables, old_tree=None, new_tree=None):
    """A fix's diff mapped through ``tables`` (built at the corrected commit; None when
    ``needs_tables`` says no), each file by the first row of ``CHANGE_KINDS`` it matches.
    ``new_tree`` and ``old_tree``: copies of the changed files at the corrected and buggy commits
    (default: the tables' own tree, where hunks are found by text)."""
    mapping = Mapping(tables=tables.label if tables else "not needed (no C++ change)")
    for fd in patch.parse(diff_text):
        change = Change(fd, tables, old_tree, new_tree, mapping)
        next(handle for applies, handle in CHANGE_KINDS if applies(change))(change)
    if tables is not None:
        for op, way in mapping.ops.items():
            mapping.carriers[op] = tables.calling_ops({op, *way.functions[-1:]}) - {op}
    return mapping


def _yaml_change(fd, tables, old_tree, new_tree, mapping, forward):
    target = mapping.ops if forward else mapping.backward_ops
    key = "func" if forward else "name"
    for hunk, lines, text in located(fd, tables, old_tree, new_tree, mapping):
        entries = yaml_entries(text, key)
        hit = {e["op"] for e in entries for n in lines if e["start"] <= n <= e["end"]}
        for op in hit:
            target.setdefault(op, Way(note=f"its {fd.path} entry changed"))
        if not hit:
            mapping.unknown.append(f"{fd.path}: a change outside any entry (near line "
                                   f"{hunk.new_start})")


def _changed_functions(fd, tables, old_tree, new_tree, mapping):
    """The functions whose bodies the diff changes, on either side, as (path, cpp.Function); a
    changed ``REGISTER_DISPATCH`` line stands for its kernel, a changed macro or constant for the
    functions of its file that use it (``_outside_functions``); what else is outside a function
    makes the file unknown."""
    names, unbounded = [], {}
    for _, lines, text in located(fd, tables, old_tree, new_tree, mapping):
        funcs, inits = cpp.definitions(text)
        src, code = text.splitlines(), cpp.blank(text).splitlines()
        for n in lines:
            fn = cpp.enclosing(funcs, n)
            registered = cpp_register(src[n - 1]) if fn is None and n - 1 < len(src) else ()
            if fn is not None:
                names.append((fd.name, fn))
            elif registered:
                names += [(fd.name, cpp.Function(k, n, n)) for k in registered]
            else:
                what, found = outside_functions(fd.name, src, code, funcs, inits, n)
                if what == "functions":
                    names += [(fd.name, user) for user in found]
                elif what == "unknown":
                    unbounded.setdefault(n, found)
    if unbounded:
        mapping.unknown.append(f"{fd.name}: {unbounded[min(unbounded)]}")
    return names


def cpp_register(line):
    return {kernel.split("::")[-1] for _, kernel in REGISTER.findall(line)}


def _native_change(fd, tables, old_tree, new_tree, mapping):
    path = fd.name
    if HUBS.search(path):
        mapping.unknown.append(f"{path}: machinery most kernels run through (TensorIterator, "
                               f"DispatchStub, loops, copies, reductions)")
        return
    cuda = bool(CUDA.search(path))
    if cuda:  # what a CUDA source leaves unbounded matters on a GPU only
        mapping.cuda.append(path)
        unknown_before = len(mapping.unknown)
    names = _changed_functions(fd, tables, old_tree, new_tree, mapping)
    ops, why, loose = tables.affected_ops(names) if names else (set(), {}, set())
    target = mapping.cuda_ops if cuda else mapping.ops
    for op in ops:
        target.setdefault(op, Way(why[op]))
    for name in sorted(loose):
        mapping.unknown.append(f"{name}() implements no operator and has no caller in "
                               f"ATen/native (called from outside the tables, if at all)")
    if cuda:
        mapping.cuda_unknown += mapping.unknown[unknown_before:]
        del mapping.unknown[unknown_before:]


def _th_change(fd, tables, old_tree, new_tree, mapping):
    """A change to the legacy TH library: the TH functions it changes (``THTensor_(addmm)`` is
    ``addmm``), their TH callers, the ``_th_`` functions Declarations.cwrap makes of them, and the
    operators that call those (``Tables.th_ops``)."""
    names, unbounded = set(), {}
    for _, lines, text in located(fd, tables, old_tree, new_tree, mapping):
        (funcs, inits), src, code = cpp.definitions(text), text.splitlines(), cpp.blank(text).splitlines()
        for n in lines:
            fn = cpp.enclosing(funcs, n)
            if fn is not None:
                names.add(th_name(src, fn))
                continue
            what, found = outside_functions(fd.name, src, code, funcs, inits, n)
            if what == "functions":
                names |= {th_name(src, user) for user in found}
            elif what == "unknown":
                unbounded.setdefault(n, found)
    if unbounded:
        mapping.unknown.append(f"{fd.name}: {unbounded[min(unbounded)]}")
    if names:
        _add_ops(mapping, *tables.th_ops(names), fd.name, f"TH {', '.join(sorted(names))}")


def _cwrap_change(fd, tables, old_tree, new_tree, mapping):
    """A change to a Declarations.cwrap entry: the ``_th_`` function it declares, and the
    operators that call it."""
    for hunk, lines, text in located(fd, tables, old_tree, new_tree, mapping):
        entries = cwrap_entries(text)
        hit = {e["cname"] for e in entries for n in lines if e["start"] <= n <= e["end"]}
        if not hit:
            mapping.unknown.append(f"{fd.name}: a change outside any entry (near line {hunk.new_start})")
            continue
        _add_ops(mapping, *tables.th_ops(hit), fd.name, f"TH {', '.join(sorted(hit))}")


def _add_ops(mapping, ops, why, loose, path, note=""):
    for op in ops:
        mapping.ops.setdefault(op, Way(why[op], note))
    for name in sorted(loose):
        mapping.unknown.append(f"{name}() implements no operator and has no caller in ATen/native "
                               f"or TH (called from outside the tables, if at all; changed in {path})")


def _formula_helpers(fd, tables, old_tree, new_tree, mapping):
    names = {fn.name for _, fn in _changed_functions(fd, tables, old_tree, new_tree, mapping)}
    for name in sorted(names):
        users = tables.formula_users.get(name, set())
        if not users:
            mapping.unknown.append(f"{fd.name}: {name}() is called by no derivatives.yaml formula")
        for op in users:
            mapping.backward_ops.setdefault(op, Way((name,), f"its backward formula calls {name}()"))
