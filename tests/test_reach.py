"""Reach: real PyTorch fixes mapped through real ATen tables, judged against real traces."""
import csv
import json
import os
import subprocess
import sys
import tarfile

import pytest
from conftest import ROOT, untar

from bugimpact.challenges import prepare
from bugimpact.framework import cpp, patch
from bugimpact.framework.declarations import dispatch_targets, yaml_entries
from bugimpact.framework.tables import DirTree, Tables
from bugimpact.reach.claims import BindingMember, Mapping
from bugimpact.reach.python_files import PythonFile, python_reach
from bugimpact.reach.static import map_diff
from bugimpact.reach.verdict import judge

FIX = ROOT / "tests" / "fixtures" / "reach"
ENV = dict(os.environ, PYTHONPATH=str(ROOT / "src"), PYTHONHASHSEED="0", OMP_NUM_THREADS="1")


@pytest.fixture(scope="module")
def aten_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("aten")
    with tarfile.open(FIX / "aten-2020-03-25.tar.xz") as archive:
        untar(archive, root)
    return root


@pytest.fixture(scope="module")
def aten(aten_root):
    return Tables(DirTree(aten_root, label="aten 2020-03-25"))


def mapped(tables, fix):
    return map_diff((FIX / "diffs" / f"{fix}.diff").read_text(), tables)


# --- the C++ lexer and the tables ---------------------------------------------------------------

def test_function_spans_survive_comments_strings_macros_and_members():
    source = """#include <x.h>
#define K(a) { a; }
namespace at { namespace native {
namespace {
static void helper(int a) { if (a) { foo(a); } }   // } in a comment
}
Tensor& add_out(Tensor& r, const Tensor& a) {
  auto s = "{";  /* { */
  AT_DISPATCH_ALL(a.scalar_type(), "add", [&] { add_stub(kCPU, r); x.apply(r); at::mul(r); });
  return r;
}
REGISTER_DISPATCH(add_stub, &add_kernel);
static const int table[] = {1, 2};
template <typename T> struct Op : Base<T> {
  void operator()(T v) const { helper(v); }
};
__global__ void C10_LAUNCH_BOUNDS_1(512) kern(int n) { helper(n); }
void launch(int n) { kern<<<1, 2>>>(n); }
}}
"""
    found = {f.name: f for f in cpp.functions(source)}
    assert set(found) == {"helper", "add_out", "operator()", "kern", "launch"}
    assert (found["helper"].start, found["helper"].end) == (5, 5) and found["helper"].static
    assert (found["add_out"].start, found["add_out"].end) == (7, 11)
    # members (.apply) and dispatched calls (at::mul) are not calls of an ATen/native function
    assert found["add_out"].calls == {"AT_DISPATCH_ALL", "add_stub"}
    assert found["operator()"].owner == "Op" and found["launch"].calls == {"kern"}
    assert cpp.enclosing(list(found.values()), 13) is None  # namespace-level data


def test_a_specialisation_is_named_by_its_template_and_a_macro_body_calls_for_its_function():
    """``interleave2<double>(`` is interleave2 (its argument is not its name), a comparison in a
    template argument is not an initializer, and what a macro defined in a body calls is called
    by that body (``HANDLE_CASE`` in GridSamplerKernel.cpp): vec256.h's pr28207 went unplaced."""
    source = """template <typename T>
inline c10::guts::enable_if_t<Vec256<T>::size() % 2 == 0, std::pair<Vec256<T>, Vec256<T>>>
interleave2(const Vec256<T>& a, const Vec256<T>& b) {
  return a;
}
template <>
std::pair<Vec256<double>, Vec256<double>>
inline interleave2<double>(const Vec256<double>& a, const Vec256<double>& b) {
  return a;
}
void kernel(int mode) {
#define HANDLE_CASE(m)                     \\
  case m: slice_iterator<m>(mode); \\
    return;
  switch (mode) { HANDLE_CASE(1) }
#undef HANDLE_CASE
}
"""
    found = cpp.functions(source)
    assert [(f.name, f.start, f.end) for f in found] == [("interleave2", 1, 5), ("interleave2", 6, 10),
                                                       ("kernel", 11, 17)]
    assert found[2].calls == {"HANDLE_CASE", "slice_iterator"}


def test_tables_find_what_each_operator_dispatches_to(aten, aten_root):
    # every dispatch target that these files define (a line that starts with a return type and
    # the name: a definition at namespace level) is found by the lexer
    import re
    defined = {fn.name for funcs in aten.functions.values() for fn in funcs}
    texts = "\n".join(p.read_text() for p in (aten_root / "aten").rglob("*.c*"))
    targets = {t for t in aten.ops_of_function
               if re.search(r"(?m)^(?:[\w:<>,]+[&*]?\s+)+[&*]?%s\s*\(" % re.escape(t), texts)}
    assert len(targets) > 40 and targets <= defined, targets - defined
    entry = next(e for e in yaml_entries((aten_root / "aten/src/ATen/native/native_functions.yaml")
                                         .read_text(), "func") if e["signature"].startswith("max_pool3d_with_indices("))
    assert dispatch_targets(entry["lines"]) == {"max_pool3d_with_indices_cpu",
                                                "max_pool3d_with_indices_cuda"}
    assert "max_elementwise_stub" in aten.stub_of_kernel["max_elementwise_kernel"]


# --- where a hunk sits ------------------------------------------------------------------------

def test_a_hunk_is_found_by_its_text_and_identical_hunks_by_their_line():
    diff = (FIX / "diffs" / "pr32829.diff").read_text()
    fd = next(f for f in patch.parse(diff) if f.path.endswith("GridSamplerKernel.cpp"))
    first, second = fd.hunks[0], fd.hunks[1]
    old = [line for tag, line in first.lines if tag != "+"]
    assert old == [line for tag, line in second.lines if tag != "+"]  # two identical hunks
    copy = [""] * 217 + old + [""] * 70 + old  # the copy moved on by 5 lines, then by 4 more
    assert len(copy) > second.old_start
    # both are found, each at the occurrence nearest its own line number
    a, b = patch.locate(first, copy), patch.locate(second, copy)
    assert a[0] == b[0] == "old" and 218 <= a[1][0] < 218 + len(old) <= b[1][0]
    assert patch.locate(first, ["nothing here"]) is None


def test_a_pure_insertion_is_marked_by_the_lines_around_it():
    hunk = patch.Hunk(10, 10, [(" ", "a"), ("+", "new"), (" ", "b")])
    assert patch.locate(hunk, ["x", "a", "b"]) == ("old", [2, 3])


# --- the static mapping of real fixes ------------------------------------------------------------

def test_a_kernel_fix_maps_to_its_operator(aten):
    m = mapped(aten, "pr32350")  # ConstantPadNd.cpp
    assert set(m.ops) == {"constant_pad_nd"} and not m.unknown and not m.python


def test_a_stub_kernel_maps_through_its_registration(aten):
    m = mapped(aten, "pr32541")  # min/max elementwise CPU kernels
    assert {"max", "min"} <= set(m.ops)
    assert "max_elementwise_stub" in m.ops["max"]


def test_native_functions_and_derivatives_entries_map_to_forward_and_backward(aten):
    m = mapped(aten, "pr31167")  # cdist: a new entry, a derivative, the kernel
    assert "_cdist_forward" in m.ops and "cdist" in m.ops
    assert {"cdist", "_cdist_forward"} & set(m.backward_ops)


def test_a_cuda_only_fix_is_cuda_only(aten):
    m = mapped(aten, "pr36820")
    assert m.cuda == ["aten/src/ATen/native/cuda/DilatedMaxPool3d.cu"] and not m.ops
    assert "max_pool3d_with_indices_backward" in m.cuda_ops and not m.unknown


def test_tensor_iterator_is_unknown_never_not_reached(aten):
    m = mapped(aten, "pr37214")
    assert m.unknown and "TensorIterator" in m.unknown[0]


def test_a_convolution_fix_maps_to_the_convolution_operators(aten):
    assert {"conv2d", "_convolution"} <= set(mapped(aten, "pr28784").ops)


# --- Python lines ---------------------------------------------------------------------------------

PY = '''"""Module docstring."""
import torch
LIMIT = 3
UNUSED = 4


def used(x, eps=1e-5):
    """Doc."""
    if x is None:
        return 0
    return x + eps * LIMIT


def unused(x):
    return x * 2


add_docstr(used, """
Some text.
""")
'''


def python_trace(ran):
    from bugimpact.harness.trace import pack
    return {"sources": {"torch/m.py": pack(PY)}, "lines": {"torch/m.py": ran},
            "torch_version": "t", "ops": {}, "device": "cpu"}


def hunk_on(line_no, text):
    lines = PY.splitlines()
    before, after = lines[line_no - 2], lines[line_no]
    return patch.Hunk(line_no - 1, line_no - 1, [(" ", before), ("-", text), ("+", text + "  # x"),
                                                 (" ", after)])


def test_python_lines_are_reached_by_running_by_a_call_or_at_import_never_by_docs():
    source = PythonFile(PY)
    assert source.where(11)[0] == "body" and source.where(7)[0] == "header"
    assert source.where(3)[0] == "import" and 19 in source.docs and 8 in source.docs
    trace = python_trace([7, 9, 11])  # used() ran (its def line is its call event); x was not None
    lines = PY.splitlines()
    # a value bound at import counts when a line that ran reads it (LIMIT), not otherwise
    # (UNUSED); an import statement only binds names; documentation never counts
    cases = {11: "ran", 10: None, 7: "header", 15: None, 3: "import", 4: None, 2: None, 19: None}
    for n, how in cases.items():
        reached, unknown, _ = python_reach("torch/m.py", [hunk_on(n, lines[n - 1])], trace)
        assert not unknown
        assert bool(reached) == (how is not None), (n, reached)
    reached, _, note = python_reach("torch/other.py", [hunk_on(11, lines[10])], trace)
    assert not reached and "not imported" in note


# --- Python bindings ----------------------------------------------------------------------------

# The shape of tools/autograd/templates/python_variable_methods.cpp at v1.5.1, cut down: a
# hand-written binding, the generated ones' placeholder, and the method table.
BINDINGS = """#include <Python.h>
static PyObject * THPVariable_record_stream(PyObject* self, PyObject* arg)
{
  void* data = self_.data_ptr();
  Py_RETURN_NONE;
}

${py_methods}

PyMethodDef variable_methods[] = {
  {"__add__", (PyCFunction)(void(*)(void))THPVariable_add, METH_VARARGS | METH_KEYWORDS, NULL},
  {"record_stream", (PyCFunction)THPVariable_record_stream, METH_O, NULL},
  ${py_method_defs}
  {NULL}
};
"""
TEMPLATE = "tools/autograd/templates/python_variable_methods.cpp"


def binding_fix(tmp_path, old, new, base=BINDINGS, path=TEMPLATE):
    """The mapping of a one-line change of ``base``, with the buggy and the corrected file."""
    trees = []
    for side in ("old", "new"):
        root = tmp_path / side
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        text = base if side == "old" else base.replace(old, new)
        (root / path).write_text(text)
        trees.append(DirTree(root))
    diff = subprocess.run(["git", "diff", "--no-index", "-U2", str(tmp_path / "old" / path),
                           str(tmp_path / "new" / path)], capture_output=True, text=True).stdout
    diff = diff.replace(str(tmp_path / "old"), "").replace(str(tmp_path / "new"), "")
    return map_diff(diff, None, old_tree=trees[0], new_tree=trees[1])


def seen(called=(), missing=(), owner="Tensor", properties=("names",)):
    """A trace's binding methods (``harness.trace.BindingMethods``), for one class."""
    return {owner: {"called": list(called), "missing": list(missing), "properties": list(properties)}}


def test_a_binding_class_method_is_reached_when_called_and_other_binding_tables_at_import(tmp_path, smallcnn_trace):
    trace = smallcnn_trace[0]
    # pr38695's kind of change: an entry of the Tensor's method table (one replaced by another)
    entry = binding_fix(tmp_path / "entry", '  {"__add__",', '  {"__iadd__",')
    assert set(entry.methods) == {"Tensor.__add__", "Tensor.__iadd__"} and not entry.at_import and not entry.unknown
    assert "its entry in PyMethodDef variable_methods[] changed" in entry.methods["Tensor.__add__"]
    assert judge(entry, dict(trace, methods=seen(["size"])))["verdict"] == "not reached"
    # a + b calls __add__; t += x calls __add__ too where the Tensor has no __iadd__
    hit = judge(entry, dict(trace, methods=seen(["__add__"])))
    assert hit["verdict"] == "reached" and hit["reached"] == [
        f"Tensor.__add__ called (its entry in PyMethodDef variable_methods[] changed ({TEMPLATE}))",
        f"Tensor.__iadd__ called (its entry in PyMethodDef variable_methods[] changed ({TEMPLATE}))"]
    # a method a fix adds changes a lookup of its name that found nothing before (hasattr)
    added = binding_fix(tmp_path / "added", '  {"__add__",', '  {"is_shifted", NULL},\n  {"__add__",')
    assert "Tensor.is_shifted" in added.methods  # (an insertion marks the lines around it too)
    assert judge(added, dict(trace, methods=seen(missing=["is_shifted"])))["verdict"] == "reached"
    # a trace made before the binding methods were recorded cannot say, nor one without the class
    old_trace = {k: v for k, v in trace.items() if k != "methods"}
    assert judge(entry, old_trace)["verdict"] == "unknown"
    assert judge(entry, dict(trace, methods=seen(owner="Storage")))["verdict"] == "unknown"
    # pr27371's kind: the body of a binding only the Tensor's table names runs when that method is
    # called; the small CNN never calls record_stream
    body = binding_fix(tmp_path / "body", "self_.data_ptr()", "self_.storage().data_ptr().get()")
    assert body.methods == {"Tensor.record_stream": "the body of its binding THPVariable_record_stream() "
                                                    f"changed ({TEMPLATE})"} and not body.unknown
    assert "record_stream" not in trace["methods"]["Tensor"]["called"]
    verdict = judge(body, trace)
    assert verdict["verdict"] == "not reached" and "Tensor.record_stream never called" in verdict["not_reached"][0]
    # a body the file also calls from C: no method call shows that, so it stays unknown
    caller = "static PyObject* again(PyObject* s, PyObject* a) { return THPVariable_record_stream(s, a); }\n"
    from_c = binding_fix(tmp_path / "from-c", "self_.data_ptr()", "self_.storage().data_ptr().get()",
                         base=BINDINGS.replace("${py_methods}", caller + "${py_methods}"))
    assert not from_c.methods and "THPVariable_record_stream() binds record_stream" in from_c.unknown[0]
    # a body bound in the Tensor's table and in another's too: that other's callers go unseen
    twice = binding_fix(tmp_path / "twice", "self_.data_ptr()", "self_.storage().data_ptr().get()",
                        base=BINDINGS + "PyMethodDef torch_methods[] = {\n  {\"record_stream\", "
                                        "(PyCFunction)THPVariable_record_stream, METH_O, NULL},\n};\n")
    assert not twice.methods and "THPVariable_record_stream() binds record_stream" in twice.unknown[0]
    # a table of another type or module is read whole when torch loads: reached by every workload
    module = binding_fix(tmp_path / "module", '  {"__add__",', '  {"__iadd__",',
                         base=BINDINGS.replace("PyMethodDef variable_methods[]", "PyMethodDef torch_methods[]"))
    assert module.at_import == [f"{TEMPLATE}: PyMethodDef torch_methods[]"] and not module.methods
    assert "reads when it loads" in judge(module, trace)["reached"][0]
    # a placeholder inside the table is code generation, whatever table holds it
    generated = binding_fix(tmp_path / "generated", "  ${py_method_defs}", "  ${py_method_defs_v2}")
    assert not generated.at_import and "code generation" in generated.unknown[0]


# The shape of torch/csrc/generic/StorageMethods.cpp at v1.4.0, cut down: bindings (one that seeks
# with a macro), and the storages' method table (one per scalar type, THPStorage_ names it).
STORAGE = """#include <Python.h>
#include <unistd.h>

static PyObject *THPStorage_(size)(THPStorage *self, PyObject *noargs)
{
  return PyLong_FromLong(self->cdata->size());
}

static PyObject *THPStorage_(setFromFile)(THPStorage *self, PyObject *args)
{
  const auto pos = lseek(fd, 0, SEEK_CUR);
  const auto n = self->cdata->size();
  Py_RETURN_NONE;
}

static PyMethodDef THPStorage_(methods)[] = {
  {"size", (PyCFunction)THPStorage_(size), METH_NOARGS, nullptr},
  {"_set_from_file", (PyCFunction)THPStorage_(setFromFile), METH_VARARGS, nullptr},
  {nullptr}
};
"""
STORAGE_FILE = "torch/csrc/generic/StorageMethods.cpp"


def test_a_storage_binding_changed_through_a_conditionally_defined_macro_is_reached_when_called(tmp_path):
    # pr27125: a conditional that only chooses a macro's definition, and the binding that uses it;
    # inserted, it marks the binding after it too (size, a TH generic name other code says as a word)
    fix = STORAGE.replace("#include <unistd.h>\n", "#include <unistd.h>\n\n#ifdef _MSC_VER\n#define LSEEK _lseeki64\n"
                          "#else\n#define LSEEK lseek\n#endif\n").replace("= lseek(", "= LSEEK(")
    mapping = binding_fix(tmp_path / "storage", STORAGE, fix, base=STORAGE, path=STORAGE_FILE)
    assert not mapping.unknown and mapping.methods == {
        "Storage._set_from_file": f"the body of its binding setFromFile() changed ({STORAGE_FILE})",
        "Storage.size": f"the body of its binding size() changed ({STORAGE_FILE})"}
    assert judge(mapping, {"ops": {}, "methods": seen(["data_ptr"], owner="Storage")})["verdict"] == "not reached"
    assert judge(mapping, {"ops": {}, "methods": seen(["_set_from_file"], owner="Storage")})["verdict"] == "reached"
    # a conditional that also holds code stays unknown: it can change what compiles
    code = fix.replace("#define LSEEK lseek\n", "#define LSEEK lseek\nstatic int mode = 1;\n")
    assert "a preprocessor ifdef" in binding_fix(tmp_path / "code", STORAGE, code, base=STORAGE,
                                                 path=STORAGE_FILE).unknown[0]


# The shape of torch/csrc/autograd/python_variable.cpp in 2019-2020, cut down: a property's getter
# and setter, and the Tensor's property table, a table of a struct type (``static struct``).
VARIABLE = """#include <Python.h>
PyObject *THPVariable_get_names(THPVariable *self, void *unused)
{
  return THPUtils_packNames(self->cdata.names());
}

int THPVariable_set_names(THPVariable *self, PyObject *names, void *unused)
{
  self->cdata.set_names(names);
  return 0;
}

static struct PyGetSetDef THPVariable_properties[] = {
  {"T", (getter)THPVariable_get_T, nullptr, nullptr, nullptr},
  {"names", (getter)THPVariable_get_names, (setter)THPVariable_set_names, nullptr, nullptr},
  {nullptr}
};
"""
VARIABLE_FILE = "torch/csrc/autograd/python_variable.cpp"


def test_a_tensor_property_binding_is_reached_when_read_or_set_as_its_getter_or_setter_changed(tmp_path):
    """Seen on the mirror's 86 commits that change a binding source: python_variable.cpp's hunks
    were mostly property getters and setters, all unknown, and its property table was not even
    read as a table (``static struct PyGetSetDef ...[] = {``, taken for a struct's definition)."""
    def variable_fix(name, old, new, base=VARIABLE):
        return binding_fix(tmp_path / name, old, new, base=base, path=VARIABLE_FILE)
    getter = variable_fix("getter", "return THPUtils_packNames(", "return THPUtils_packNamesOrNone(")
    assert getter.properties == {"Tensor.names": "the body of its binding THPVariable_get_names() changed "
                                              f"({VARIABLE_FILE})"} and not getter.unknown
    assert judge(getter, {"ops": {}, "methods": seen(["names="])})["verdict"] == "not reached"
    assert judge(getter, {"ops": {}, "methods": seen(["names"])})["verdict"] == "reached"
    setter = variable_fix("setter", "set_names(names)", "set_names(names, true)")
    assert list(setter.properties) == ["Tensor.names="] and not setter.unknown
    verdict = judge(setter, {"ops": {}, "methods": seen(["names", "size"])})
    assert verdict["verdict"] == "not reached" and verdict["not_reached"] == [
        f"Tensor.names= never called nor looked up (the body of its binding THPVariable_set_names() "
        f"changed ({VARIABLE_FILE}))"]
    # the table's entry: read or set, either runs what it names
    entry = variable_fix("entry", "(setter)THPVariable_set_names", "nullptr")
    assert set(entry.properties) == {"Tensor.names", "Tensor.names="} and not entry.at_import and not entry.unknown
    assert judge(entry, {"ops": {}, "methods": seen(["names="])})["verdict"] == "reached"
    # a trace that did not watch the property (made before they were, or the class shadows it)
    blind = judge(entry, {"ops": {}, "methods": seen(["size"], properties=())})
    assert blind["verdict"] == "unknown" and "does not watch the Tensor property names" in blind["unknown"][0]
    # a getter the file calls from C too stays unknown
    caller = VARIABLE + "PyObject* again(THPVariable* s) { return THPVariable_get_names(s, nullptr); }\n"
    from_c = variable_fix("from-c", "return THPUtils_packNames(", "return THPUtils_packNamesOrNone(", base=caller)
    assert not from_c.properties and "THPVariable_get_names() binds names" in from_c.unknown[0]


def test_the_tracers_python_side_is_entered_through_torch_jit_and_the_tracer_every_operator_consults_is_not(tmp_path):
    """pr29791 (``preRecordPythonTrace``, which autograd's Python functions call only while a trace
    that torch.jit started runs) was unknown: every path with "tracer" in it was left out of
    torch.jit's files, where only the tracer that every operator consults had to be."""
    source = "bool isTracing() {\n  return state != nullptr;\n}\n"
    untraced = {"ops": {}, "lines": {}, "sources": {}}
    for path in ("torch/csrc/jit/python_tracer.cpp", "torch/csrc/jit/python/python_tracer.cpp",
                 "torch/csrc/jit/script/init.cpp", "torch/csrc/jit/tracer.cpp", "torch/csrc/jit/tracer.h",
                 "torch/csrc/jit/frontend/tracer.cpp"):
        mapping = binding_fix(tmp_path / path, "!= nullptr", "!= NULL", base=source, path=path)
        if "/python_tracer." in path or path.endswith("init.cpp"):
            assert mapping.entered == [[path, "torch/jit/"]] and not mapping.unknown, path
            assert judge(mapping, untraced)["verdict"] == "not reached"
        else:
            assert not mapping.entered and mapping.unknown, path


# --- traces of a real workload --------------------------------------------------------------------

@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    folder = tmp_path_factory.mktemp("data")
    meta = prepare("digits", folder / "digits.npz", folder / "digits.json")
    return folder / "digits.npz", meta


def harness(tmp_path, spec, name):
    out = tmp_path / name
    done = subprocess.run([sys.executable, "-m", "bugimpact.harness", "--spec", "-", "--out",
                           str(out)], input=json.dumps(spec), env=ENV, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def smallcnn_trace(tmp_path_factory, digits):
    npz, meta = digits
    spec = {"bug": "__reach__", "arm": "trace", "run": 0, "seed": 5, "model": "smallcnn",
            "challenge": "digits", "data": str(npz), "data_sha256": meta["sha256"], "epochs": 15,
            "batch_size": 32, "test_batch_size": 100, "lr": 0.05, "momentum": 0.9, "threads": 1,
            "test_fraction": 0.25}
    folder = tmp_path_factory.mktemp("trace")
    traced = harness(folder, dict(spec, trace={"steps": 3}), "trace.json")
    plain = harness(folder, dict(spec, epochs=1, max_steps=3), "plain.json")
    return traced, plain


def test_a_traced_run_computes_exactly_what_an_untraced_run_computes(smallcnn_trace):
    traced, plain = smallcnn_trace
    assert traced["fingerprints"] == plain["fingerprints"]  # init, parameters, losses, logits
    assert traced["steps"] == 3 and len(traced["fingerprints"]["epochs"]) == 1


def test_the_trace_records_the_binding_methods_called_through_any_lookup_and_restores_the_classes():
    import torch

    from bugimpact.harness.trace import BindingMethods, binding_classes
    classes = [klass for _, klass in binding_classes()]
    assert torch.Tensor in classes and torch.UntypedStorage in classes
    before = [dict(vars(klass)) for klass in classes]
    a, b = torch.ones(3, requires_grad=True), torch.full((3,), 2.0)
    with BindingMethods() as methods:
        (a * b).sum().backward()  # operator slots and methods
        b //= 2  # an in-place operator the Tensor's table holds
        assert not hasattr(b, "no_such_method")  # a lookup that finds nothing
        super(torch.Tensor, b).split(1)  # a call on the binding type itself
        torch.nn.Parameter(torch.ones(2)).add(1)  # through a subclass
        b.untyped_storage().nbytes()
        a.grad = a.grad * 2  # the binding's property, read and set
        # read elsewhere as the binding's: torch 2.11's dynamo, loaded during a cuda trace, failed
        # on a plain property, whose class it asks for (torch.overrides' field accessors)
        from torch.overrides import get_default_nowrap_functions
        assert {fn.__self__.__name__ for fn in get_default_nowrap_functions()
                if getattr(fn.__self__, "__objclass__", None) is torch._C.TensorBase} >= {"grad", "_base"}
    called = methods.record()["Tensor"]["called"]
    assert {"__mul__", "sum", "backward", "__ifloordiv__", "split", "add", "grad", "grad="} <= set(called)
    assert "names" not in called and "names=" not in called
    watched = methods.record()["Tensor"]["properties"]
    # Tensor's own Python property (names, in 2.x) shadows the binding's: the line trace follows it
    assert {"grad", "requires_grad", "shape"} <= set(watched) and "names" not in watched
    assert "record_stream" not in called and methods.record()["Tensor"]["missing"] == ["no_such_method"]
    assert "nbytes" in methods.record()["Storage"]["called"]
    for klass, was in zip(classes, before):
        now = dict(vars(klass))
        assert now.keys() == was.keys() and all(now[k] is was[k] for k in was), klass
    assert not hasattr(torch.Tensor, "__getattr__") and methods.unrecorded() == {}


def test_the_binding_methods_recorder_refuses_to_vouch_for_what_it_cannot_see(monkeypatch):
    import torch

    from bugimpact.harness.trace import BindingMethods
    # another profiler taking over during the run: calls on the binding types went unseen
    with BindingMethods() as methods:
        sys.setprofile(lambda *a: None)
        torch.ones(2).sum()
    assert methods.record() == {} and set(methods.unrecorded().values()) == {
        "the profile hook was replaced during the run"}
    # a profile hook that sees nothing: a call on the binding type itself would go unseen
    with monkeypatch.context() as patched:
        patched.setattr(BindingMethods, "_profile", lambda self, frame, event, arg: None)
        with BindingMethods() as methods:
            pass
    assert methods.unrecorded() == {"Tensor": "a probe went unseen: dim (profiled)"}
    # wrappers that record nothing (an override never called): the probes go unseen
    monkeypatch.setattr(BindingMethods, "_recording", lambda self, owner, name, method: method)
    with BindingMethods() as methods:
        torch.ones(2).sum()
    assert methods.unrecorded() == {"Tensor": "a probe went unseen: __add__ (wrapped), size (wrapped)",
                                    "Storage": "a probe went unseen: data_ptr (wrapped)"}
    # property wrappers that record nothing
    monkeypatch.undo()
    monkeypatch.setattr(BindingMethods, "_property", lambda self, owner, name, descriptor: descriptor)
    with BindingMethods() as unseen_properties:
        pass
    assert unseen_properties.unrecorded() == {
        "Tensor": "a probe went unseen: requires_grad (wrapped), requires_grad= (wrapped)"}
    # a fix's verdict from such a trace is unknown, and says why
    verdict = judge(Mapping(BindingMember("Tensor.record_stream", "its binding changed")),
                    {"ops": {}, "methods": methods.record(), "methods_unrecorded": methods.unrecorded()})
    assert verdict["verdict"] == "unknown" and "a probe went unseen: __add__ (wrapped)" in verdict["unknown"][0]


def test_the_trace_records_forward_and_backward_operators_and_torch_lines(smallcnn_trace):
    trace = smallcnn_trace[0]
    assert {"conv2d", "max_pool2d", "log_softmax", "nll_loss", "convolution_backward"} & set(trace["ops"])
    assert {"conv2d", "nll_loss"} <= set(trace["ops"])
    assert any(k.endswith("Backward0") or "backward" in k for k in trace["ops"])
    conv = trace["lines"]["torch/nn/modules/conv.py"]
    assert conv and "torch/nn/modules/conv.py" in trace["sources"]
    # how the traced torch was built: what its configuration compiles out cannot run
    assert trace["build"]["parallel"] in ("OpenMP", "native thread pool", "native thread pool and TBB")
    assert isinstance(trace["build"]["mkldnn"], bool)


def test_the_trace_holds_the_workloads_operators_not_those_of_its_own_probes():
    """The binding-methods recorder checks itself with a probe (``torch.zeros(1)``, ``t + t``)
    before the steps: run under the profiler, its ``add`` made the paper's pr36832 (a change in
    ``add_kernel``) ``reached`` for VGG-X, which adds no tensors out of place."""
    import torch

    from bugimpact.harness import trace

    def train(spec):
        torch.ones(2).mul(3)
        return {"fingerprints": {}}
    record = trace.traced({"trace": {"steps": 1}, "device": "cpu"}, train)
    assert {"ones", "mul"} <= set(record["ops"]), record["ops"]
    assert not {"zeros", "add"} & set(record["ops"]), record["ops"]
    assert record["methods"]["Tensor"]["called"] == ["mul"] and not record["methods_unrecorded"]


def test_verdicts_of_real_fixes_against_a_real_trace(aten, smallcnn_trace):
    trace = smallcnn_trace[0]
    verdicts = {fix: judge(mapped(aten, fix), trace) for fix in
                ("pr28784", "pr32350", "pr36820", "pr37214", "pr31167")}
    assert verdicts["pr28784"]["verdict"] == "reached"
    assert any("conv2d" in r for r in verdicts["pr28784"]["reached"])
    assert verdicts["pr32350"]["verdict"] == "not reached"  # no constant_pad_nd in a small CNN
    assert "operator constant_pad_nd not dispatched" in verdicts["pr32350"]["not_reached"]
    assert verdicts["pr36820"]["verdict"] == "not reached on cpu"
    assert verdicts["pr37214"]["verdict"] == "unknown"
    assert verdicts["pr31167"]["verdict"] == "not reached"  # cdist
    on_cuda = judge(mapped(aten, "pr36820"), dict(trace, device="cuda",
                                                   ops=dict(trace["ops"], max_pool3d_with_indices_backward=1)))
    assert on_cuda["verdict"] == "reached"


def test_the_reach_command_judges_a_sheet_of_fixes_from_snapshots(tmp_path, aten_root, smallcnn_trace):
    trace_path = tmp_path / "smallcnn.json"
    trace_path.write_text(json.dumps(smallcnn_trace[0]))
    rows = tmp_path / "fixes.csv"
    rows.write_text("id,buggy_sha,corrected_sha\npr28784,,\npr36820,,\npr32350,,\npr99999,,\n")
    # ground truths of the traced torch: one where the release never called constant_pad_nd, one
    # where it did (a not reached it contradicts fails the command)
    version = smallcnn_trace[0]["torch_version"]
    (tmp_path / "agrees.json").write_text(json.dumps({"torch_version": version, "called": ["at::native::relu"]}))
    (tmp_path / "wrong.json").write_text(json.dumps({"torch_version": version,
                                                     "called": ["at::native::constant_pad_nd"]}))
    snapshots = tmp_path / "snapshots"
    (snapshots / "51818cc4ea76").mkdir(parents=True)
    os.rename(aten_root / "aten", snapshots / "51818cc4ea76" / "aten")
    os.rename(aten_root / "tools", snapshots / "51818cc4ea76" / "tools")
    def reach(truth):
        return subprocess.run([sys.executable, "-m", "bugimpact", "--config",
                               str(ROOT / "config.yaml"), "reach", "--trace",
                               str(trace_path), "--rows", str(rows), "--tables", str(snapshots),
                               "--patches", str(FIX / "diffs"), "--out", str(tmp_path / f"{truth}.csv"),
                               "--truth", str(tmp_path / f"{truth}.json")],
                              cwd=tmp_path, env=ENV, capture_output=True, text=True)
    try:
        done, wrong = reach("agrees"), reach("wrong")
    finally:
        os.rename(snapshots / "51818cc4ea76" / "aten", aten_root / "aten")
        os.rename(snapshots / "51818cc4ea76" / "tools", aten_root / "tools")
    assert done.returncode == 0, done.stderr
    table = {r["id"]: r for r in csv.DictReader(open(tmp_path / "agrees.csv"))}
    assert table["pr28784"]["verdict"] == "reached"
    assert table["pr36820"]["verdict"] == "not reached on cpu"
    assert table["pr32350"]["verdict"] == "not reached"
    assert table["pr32350"]["truth"] == "agrees: the release called none of the functions of its 1 operator(s)"
    assert wrong.returncode == 1
    assert "1 not reached contradicted by the ground truth" in wrong.stderr
    assert "pr32350 (smallcnn): contradicted: operator constant_pad_nd: constant_pad_nd called" in wrong.stderr
    assert table["pr99999"]["verdict"] == "unknown" and "no commits and no patch" in table["pr99999"]["detail"]


def test_a_cuda_trace_that_gets_no_gpu_is_a_recorded_failed_trace(tmp_path, monkeypatch):
    """Under SLURM a trace job with no GPU given (CUDA_VISIBLE_DEVICES unset) records a failed
    trace, which makes its bugs unknown, instead of failing the job with a traceback."""
    import yaml

    from bugimpact.config import validate_config
    from bugimpact.io import read_json, write_json
    from bugimpact.steps import trace
    config = validate_config(yaml.safe_load((ROOT / "config.yaml").read_text()))
    meta = prepare("digits", tmp_path / "d.npz", tmp_path / "d.json")
    assert meta["sha256"]
    write_json(tmp_path / "runtime.json", {"kind": "local", "python": sys.executable})
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    trace(dict(config["train"], device="cuda"), 3, tmp_path / "runtime.json",
          (tmp_path / "d.npz", tmp_path / "d.json"), "key", "installed", tmp_path / "trace.json",
          tmp_path / "trace.log")
    record = read_json(tmp_path / "trace.json")
    assert record["status"] == "failed"
    assert record["reason"].startswith("trace exit no GPU (train.device is cuda, but SLURM gave this job no GPU")


def test_a_function_defined_twice_under_one_name_is_named_at_each_definition():
    """Seen on a corpus of every mirror commit that changed a binding source (2019-06 to 2020-05):
    a property and its setter share one qualified name, and naming the getter's ``def`` line
    raised StopIteration, which ended the whole reach batch."""
    from bugimpact.harness.trace import pack
    text = ("class C:\n    @property\n    def x(self):\n        return 1\n\n"
            "    @x.setter\n    def x(self, v):\n        pass\n")
    source = PythonFile(text)
    assert source.qualified_at(3) == "C.x" and source.qualified_at(7) == "C.x"
    hunk = patch.Hunk(3, 3, [(" ", "    def x(self):"), ("-", "        return 1"), ("+", "        return 2"),
                             (" ", "")])
    trace = {"sources": {"torch/c.py": pack(text)}, "lines": {"torch/c.py": [1, 2, 6]}}
    reached, unknown, note = python_reach("torch/c.py", [hunk], trace)
    assert not reached and not unknown and "no changed line that matters ran" in note


# which rule reads a file (the first that applies): one row per rule, so a new rule is one class
# and one row here
FIRST_RULE = (("torch/nn/functional.py", True, "PythonLines"), ("test/test_nn.py", True, "NotShippedFile"),
              ("torch/csrc/api/src/nn/init.cpp", True, "FrontendFile"), ("caffe2/python/core.py", True, "OutsidePackage"),
              ("aten/src/ATen/native/cuda/Loss.cu", False, "CudaWithoutTables"),
              ("aten/src/ATen/native/native_functions.yaml", True, "NativeFunctions"),
              ("tools/autograd/derivatives.yaml", True, "Derivatives"),
              ("aten/src/ATen/native/Convolution.cpp", True, "NativeSource"),
              ("tools/autograd/templates/Functions.cpp", True, "FormulaHelpers"),
              ("aten/src/THC/THCTensorMath.cu", True, "CudaSource"),
              ("aten/src/ATen/Declarations.cwrap", True, "CwrapEntries"),
              ("aten/src/TH/generic/THTensorMath.cpp", True, "LegacyTH"),
              ("torch/csrc/jit/passes/inliner.cpp", True, "EnteredOnlyThrough"),
              ("torch/csrc/autograd/python_variable.cpp", True, "PythonBindings"),
              ("caffe2/CMakeLists.txt", True, "BuildFile"), ("c10/core/TensorImpl.cpp", True, "AnyOtherCpp"),
              ("docs/source/_static/img/tensor.png", True, "NotShippedFile"),
              ("torch/lib/libshm.so", True, "BinaryFile"))


def test_each_file_of_a_diff_goes_by_the_first_rule_that_applies():
    from bugimpact.reach.rules import RULES, Change
    assert {name for _, _, name in FIRST_RULE} == {type(r).__name__ for r in RULES}
    for path, with_tables, name in FIRST_RULE:
        body = (f"Binary files a/{path} and b/{path} differ\n" if path.endswith((".png", ".so")) else
                f"--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-a\n+b\n")
        fd = patch.parse(f"diff --git a/{path} b/{path}\n{body}")[0]
        change = Change(fd, object() if with_tables else None, None, None, Mapping())
        assert type(next(r for r in RULES if r.applies(change))).__name__ == name, path


def test_a_new_kind_of_claim_is_one_class_and_the_verdict_reads_it_unchanged():
    """The verdict asks each kind of claim to answer for its own: a kind defined outside the
    package (a module loaded) is judged and listed with no edit anywhere else."""
    from dataclasses import dataclass

    from bugimpact.reach.claims import Claim, NotShipped
    from bugimpact.reach.verdict import Answer

    @dataclass
    class Loaded(Claim):
        module: str
        runs = True

        @classmethod
        def answer(cls, claims, seen, mapping):
            ran = [c.module for c in claims if c.module in seen.trace["modules"]]
            return Answer(reached=[f"{m} loaded" for m in ran],
                          not_reached=[f"{c.module} never loaded" for c in claims if c.module not in ran])

        @classmethod
        def listed(cls, claims):
            return {"loaded": [c.module for c in claims]}

    try:
        mapping = Mapping(Loaded("torch.fft"), NotShipped("docs/fft.rst"), Loaded("torch.fft"))
        assert mapping.as_dict()["loaded"] == ["torch.fft"]  # one claim per key
        loaded = judge(mapping, {"ops": {}, "modules": ["torch.fft"]})
        assert loaded["verdict"] == "reached" and loaded["reached"] == ["torch.fft loaded"]
        never = judge(mapping, {"ops": {}, "modules": []})
        assert never["verdict"] == "not reached"
        assert never["not_reached"] == ["torch.fft never loaded", "not shipped (tests, docs, mobile): 1 file"]
    finally:
        Claim.KINDS.remove(Loaded)
