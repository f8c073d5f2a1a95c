"""The rules of reach's static side, one class each: what kind of file of a diff it reads
(``applies``) and what it claims of it (``claim``: ``claims`` added to the fix's ``Mapping``).
A file goes by the first rule, in the order they are defined here, that applies; adding a rule is
one class here (and its test), adding a kind of claim one class in ``claims``."""
import functools
import re
from dataclasses import dataclass

from ..framework import cmake, cpp
from ..framework.paths import CUDA, kind_of, why_unbounded
from ..framework.tables import (
    AUTOGRAD_TEMPLATES,
    C_SUFFIXES,
    CPP_SUFFIXES,
    CWRAP,
    DERIVATIVES,
    NATIVE,
    NATIVE_YAML,
    TH,
    cwrap_entries,
    th_name,
)
from .bindings import binding_change
from .claims import (
    CompiledUnder,
    CudaOnly,
    CudaOperator,
    CudaUnknown,
    EnteredThrough,
    Frontend,
    Lines,
    Mapping,
    NotShipped,
    Operator,
    Unknown,
    Way,
)
from .cpp_changes import add_ops, called_from_native, changed_functions, native_ops, tested_outside_cuda, yaml_change
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
    def args(self):  # what the helpers of C++ and YAML changes read
        return self.fd, self.tables, self.old_tree, self.new_tree, self.mapping


class Rule:
    """One kind of file of a diff: when it applies (``applies``), and what it claims of the file
    (``claim``: ``claims`` added to ``change.mapping``). A file goes by the first rule, in the
    order they are defined here (``RULES``), that applies."""

    def applies(self, change):
        raise NotImplementedError

    def claim(self, change):
        raise NotImplementedError


RULES = []


def rule(cls):
    RULES.append(cls())
    return cls


@rule
class PythonLines(Rule):
    """A file of the torch package: its hunks, found in the traced release's copy (or placed by
    the fix's own files, where trees give them)."""

    def applies(self, c):
        return c.kind == "python"

    def claim(self, c):
        scopes = python_scopes(c.fd, c.old_tree, c.new_tree) if c.old_tree or c.new_tree else None
        c.mapping.add(Lines(c.path, c.fd.hunks, scopes))


@rule
class NotShippedFile(Rule):
    """Tests, docs, CI: nothing a wheel holds (``paths.part_of``)."""

    def applies(self, c):
        return c.kind == "not_shipped"

    def claim(self, c):
        c.mapping.add(NotShipped(c.path))


@rule
class FrontendFile(Rule):
    """The C++ frontend and mobile bindings, which a Python workload never calls."""

    def applies(self, c):
        return c.kind == "frontend"

    def claim(self, c):
        c.mapping.add(Frontend(c.path))


@rule
class OutsidePackage(Rule):
    """A Python file outside the torch package (setup, tools): not bounded."""

    def applies(self, c):
        return c.kind == "unknown"

    def claim(self, c):
        c.mapping.add(Unknown(f"{c.path}: a Python file outside the torch package"))


@rule
class BinaryFile(Rule):
    """A binary file (an image, a library): nothing the tables can read."""

    def applies(self, c):
        return c.fd.binary

    def claim(self, c):
        c.mapping.add(Unknown(f"{c.path}: a binary change"))


@rule
class CudaWithoutTables(Rule):
    """CUDA-only, in a diff that needs no tables (no CPU C++ changed): its operators matter on a
    GPU only, and are not mapped."""

    def applies(self, c):
        return bool(CUDA.search(c.path)) and c.tables is None

    def claim(self, c):
        c.mapping.add(CudaOnly(c.path))


@rule
class NativeFunctions(Rule):
    """``native_functions.yaml``: the operators whose entries it changes."""

    def applies(self, c):
        return c.path == NATIVE_YAML

    def claim(self, c):
        yaml_change(*c.args, backward=False)


@rule
class Derivatives(Rule):
    """``derivatives.yaml``: the operators whose backward entries it changes."""

    def applies(self, c):
        return c.path == DERIVATIVES

    def claim(self, c):
        yaml_change(*c.args, backward=True)


@rule
class NativeSource(Rule):
    """A source of ATen/native (a CUDA one's claims hold on a GPU only): the operators its
    changed functions implement or lead to through their callers (``Tables.affected_ops``);
    machinery most kernels run through is unknown."""

    def applies(self, c):
        return c.path.startswith(NATIVE) and c.path.endswith(CPP_SUFFIXES)

    def claim(self, c):
        if HUBS.search(c.path):
            c.mapping.add(Unknown(f"{c.path}: machinery most kernels run through (TensorIterator, "
                                  f"DispatchStub, loops, copies, reductions)"))
            return
        if not CUDA.search(c.path):
            native_ops(*c.args)
            return
        found = Mapping()  # a CUDA source's claims, made device-held
        native_ops(c.fd, c.tables, c.old_tree, c.new_tree, found)
        c.mapping.add(CudaOnly(c.path))
        for claim in found.claims.values():
            c.mapping.add(CudaOperator(claim.op, claim.way) if isinstance(claim, Operator)
                          else CudaUnknown(claim.reason))


@rule
class FormulaHelpers(Rule):
    """The helpers of derivative formulas (``Functions.cpp``'s template): the backward of each
    operator whose formula calls a changed one."""

    def applies(self, c):
        return c.path == AUTOGRAD_TEMPLATES + "Functions.cpp"

    def claim(self, c):
        names = {fn.name for _, fn in changed_functions(*c.args)}
        for name in sorted(names):
            users = c.tables.formula_users.get(name, set())
            if not users:
                c.mapping.add(Unknown(f"{c.path}: {name}() is called by no derivatives.yaml formula"))
            for op in sorted(users):
                c.mapping.add(Operator(op, Way((name,), f"its backward formula calls {name}()"), backward=True))


@rule
class CudaSource(Rule):
    """Any other CUDA-only source: no CPU run executes it."""

    def applies(self, c):
        return bool(CUDA.search(c.path))

    def claim(self, c):
        c.mapping.add(CudaOnly(c.path))


@rule
class CwrapEntries(Rule):
    """A change to a Declarations.cwrap entry: the ``_th_`` function it declares, and the operators
    that call it."""

    def applies(self, c):
        return c.path == CWRAP

    def claim(self, c):
        for hunk, lines, text in located(*c.args):
            entries = cwrap_entries(text)
            hit = {e["cname"] for e in entries for n in lines if e["start"] <= n <= e["end"]}
            if not hit:
                c.mapping.add(Unknown(f"{c.path}: a change outside any entry (near line {hunk.new_start})"))
                continue
            add_ops(c.mapping, *c.tables.th_ops(hit), c.path, f"TH {', '.join(sorted(hit))}")


@rule
class LegacyTH(Rule):
    """A change to the legacy TH library: the TH functions it changes (``THTensor_(addmm)`` is
    ``addmm``), their TH callers, the ``_th_`` functions Declarations.cwrap makes of them, and the
    operators that call those (``Tables.th_ops``)."""

    def applies(self, c):
        return c.path.startswith(TH) and c.path.endswith(C_SUFFIXES)

    def claim(self, c):
        names, unbounded = set(), {}
        for _, lines, text in located(*c.args):
            (funcs, inits), src, code = cpp.definitions(text), text.splitlines(), cpp.blank(text).splitlines()
            for n in lines:
                fn = cpp.enclosing(funcs, n)
                if fn is not None:
                    names.add(th_name(src, fn))
                    continue
                what, found = outside_functions(c.path, src, code, funcs, inits, n)
                if what == "functions":
                    names |= {th_name(src, user) for user in found}
                elif what == "unknown":
                    unbounded.setdefault(n, found)
        if unbounded:
            c.mapping.add(Unknown(f"{c.path}: {unbounded[min(unbounded)]}"))
        if names:
            add_ops(c.mapping, *c.tables.th_ops(names), c.path, f"TH {', '.join(sorted(names))}")


@rule
class EnteredOnlyThrough(Rule):
    """C++ that Python enters only through one package (``ENTERED_THROUGH``)."""

    def applies(self, c):
        return any(rx.search(c.path) for rx, _ in ENTERED_THROUGH)

    def claim(self, c):
        c.mapping.add(EnteredThrough(c.path, next(pkg for rx, pkg in ENTERED_THROUGH if rx.search(c.path))))


@rule
class PythonBindings(Rule):
    """torch._C's Python bindings: the tables read when it loads, and the binding classes'
    methods and properties (``bindings.binding_change``)."""

    def applies(self, c):
        return bool(BINDINGS.search(c.path))

    def claim(self, c):
        binding_change(*c.args)


@rule
class BuildFile(Rule):
    """A build file: CUDA-only where each change is a CUDA build's alone (``cmake``), else
    unknown, with the first line that is not."""

    def applies(self, c):
        return bool(cmake.BUILD_FILE.search(c.path)) and c.tables is not None

    def claim(self, c):
        fd, tables = c.fd, c.tables
        unplaced = Mapping()
        # a side the hunk only adds to or only removes from is marked by the lines around the change
        placed = [(hunk, lines, text) for hunk, lines, text, side in
                  located_sides(fd, tables, c.old_tree, c.new_tree, unplaced)
                  if any(tag == ("+" if side == "new" else "-") for tag, _ in hunk.lines)]
        tests = functools.lru_cache(maxsize=None)(lambda macro: tested_outside_cuda(tables.tree, macro))
        found = [cmake.cuda_build_only(text, lines, tests) for _, lines, text in placed]
        if placed and not unplaced.unknown and all(option for option, _ in found):
            options = sorted({o for option, _ in found for o in option.split()})
            c.mapping.add(CudaOnly(f"{fd.name} (every change under {' or '.join(options)})"))
        else:
            why = next((w for _, w in found if w), "")
            c.mapping.add(Unknown(f"{fd.name}: {why_unbounded(fd.name)}" + (f" ({why})" if why else "")))


@rule
class AnyOtherCpp(Rule):
    """A C++ file the tables cannot map: compiled only under one build setting (each changed line
    inside its ``#if``, in every copy that holds it), or changed only in functions that ATen's
    native code alone calls (``called_from_native``), or unknown."""

    def applies(self, c):
        return True

    def claim(self, c):
        fd, tables = c.fd, c.tables
        unplaced = Mapping()  # a hunk no copy holds cannot be said to be under anything
        placed = list(located(fd, tables, c.old_tree, c.new_tree, unplaced)) if tables else []
        settings = {cpp.guard_of(text.splitlines(), lines) for _, lines, text in placed} if tables else {None}
        if len(settings) == 1 and None not in settings and not unplaced.unknown:
            c.mapping.add(CompiledUnder(fd.name, settings.pop()))
            return
        changed, why = called_from_native(fd.name, placed, tables) if placed and not unplaced.unknown \
            else (None, why_unbounded(fd.name))
        if changed:
            add_ops(c.mapping, *tables.affected_ops(changed), fd.name)
        else:
            c.mapping.add(Unknown(f"{fd.name}: {why}"))
