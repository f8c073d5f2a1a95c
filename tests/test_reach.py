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


def binding_fix(tmp_path, old, new):
    """The mapping of a one-line change of BINDINGS, with the buggy and the corrected file."""
    trees = []
    for side in ("old", "new"):
        root = tmp_path / side
        (root / TEMPLATE).parent.mkdir(parents=True, exist_ok=True)
        text = BINDINGS if side == "old" else BINDINGS.replace(old, new)
        (root / TEMPLATE).write_text(text)
        trees.append(DirTree(root))
    diff = subprocess.run(["git", "diff", "--no-index", "-U2", str(tmp_path / "old" / TEMPLATE),
                           str(tmp_path / "new" / TEMPLATE)], capture_output=True, text=True).stdout
    diff = diff.replace(str(tmp_path / "old"), "").replace(str(tmp_path / "new"), "")
    return map_diff(diff, None, old_tree=trees[0], new_tree=trees[1])


def test_a_binding_table_is_reached_at_import_and_a_bindings_body_is_unknown(tmp_path, smallcnn_trace):
    trace = smallcnn_trace[0]
    # pr38695's kind of change: an entry of the method table, which torch._C reads when it loads
    entry = binding_fix(tmp_path / "entry", '  {"__add__",', '  {"__iadd__",')
    assert entry.at_import == [f"{TEMPLATE}: PyMethodDef variable_methods[]"] and not entry.unknown
    verdict = judge(entry, trace)
    assert verdict["verdict"] == "reached" and "reads when it loads" in verdict["reached"][0]
    # pr27371's kind: the body of a binding, which runs only when Python calls it: not bounded
    body = binding_fix(tmp_path / "body", "self_.data_ptr()", "self_.storage().data_ptr().get()")
    assert not body.at_import and judge(body, trace)["verdict"] == "unknown"
    assert "THPVariable_record_stream() binds record_stream" in body.unknown[0]
    # a placeholder inside the table is code generation, whatever table holds it
    generated = binding_fix(tmp_path / "generated", "  ${py_method_defs}", "  ${py_method_defs_v2}")
    assert not generated.at_import and "code generation" in generated.unknown[0]


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
    rows.write_text("id,buggy_sha,corrected_sha\npr28784,,\npr36820,,\npr99999,,\n")
    snapshots = tmp_path / "snapshots"
    (snapshots / "51818cc4ea76").mkdir(parents=True)
    os.rename(aten_root / "aten", snapshots / "51818cc4ea76" / "aten")
    os.rename(aten_root / "tools", snapshots / "51818cc4ea76" / "tools")
    try:
        done = subprocess.run([sys.executable, "-m", "bugimpact", "--config",
                               str(ROOT / "config.yaml"), "reach", "--trace",
                               str(trace_path), "--rows", str(rows), "--tables", str(snapshots),
                               "--patches", str(FIX / "diffs"), "--out", str(tmp_path / "t.csv")],
                              cwd=tmp_path, env=ENV, capture_output=True, text=True)
    finally:
        os.rename(snapshots / "51818cc4ea76" / "aten", aten_root / "aten")
        os.rename(snapshots / "51818cc4ea76" / "tools", aten_root / "tools")
    assert done.returncode == 0, done.stderr
    table = {r["id"]: r for r in csv.DictReader(open(tmp_path / "t.csv"))}
    assert table["pr28784"]["verdict"] == "reached"
    assert table["pr36820"]["verdict"] == "not reached on cpu"
    assert table["pr99999"]["verdict"] == "unknown" and "no commits and no patch" in table["pr99999"]["detail"]


def test_a_cuda_trace_that_gets_no_gpu_is_a_recorded_failed_trace(tmp_path, monkeypatch):
    """Under SLURM a trace job with no GPU given (CUDA_VISIBLE_DEVICES unset) records a failed
    trace, which makes its bugs unknown, instead of failing the job with a traceback."""
    import yaml

    from bugimpact.config import validate_config
    from bugimpact.io import read_json, write_json
    from bugimpact.reach.run import trace
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
