"""What the release's C++ ran, by the dynamic loader's word (``harness.loader``, ``reach.loader``),
and how reach reads it: an operator called inside another operator's kernel, which the profiles of
torch 1.4 and 1.5 never name, is reached; a ``not reached`` is checked against a ground truth, and
one that the truth contradicts is a defect that fails the check. Real runs of the host's torch."""
import json
import os
import subprocess
import sys

from conftest import ROOT

from bugimpact.reach.batch import checked, trace_in
from bugimpact.reach.claims import CudaOnly, Mapping, Operator, Way
from bugimpact.reach.loader import called, contradicted, short_names
from bugimpact.reach.verdict import judge
from bugimpact.stats.tables import contradiction

ENV = dict(os.environ, PYTHONPATH=str(ROOT / "src"), OMP_NUM_THREADS="1")
# a run in its own process: the loader's record is asked for as the launcher asks (LD_DEBUG)
RUN = """
import json, sys
from bugimpact.harness import loader
{lazy}
import torch
loader.mark()
x = torch.ones(3, 4)
{calls}
print(json.dumps(loader.MARK))
"""


def run_with_bindings(tmp_path, calls, lazy=True):
    code = RUN.format(lazy="loader.lazy()" if lazy else "", calls=calls)
    tmp_path.mkdir(exist_ok=True)
    env = dict(ENV, LD_DEBUG="bindings", LD_DEBUG_OUTPUT=str(tmp_path / "bindings"))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return called(json.loads(done.stdout.strip().splitlines()[-1]))


def test_the_loader_names_the_release_functions_a_run_called_and_not_those_of_its_imports(tmp_path):
    relu = run_with_bindings(tmp_path / "a", "torch.relu(x)")
    assert "at::native::relu" in relu
    assert not any("cdist" in name for name in relu)  # registered at import, never called
    both = run_with_bindings(tmp_path / "b", "torch.relu(x); torch.cdist(x, x)")
    assert any("cdist" in name for name in both) and "at::native::relu" in both
    assert {"relu", "cdist"} <= short_names(both)


def test_a_record_of_a_torch_not_loaded_lazily_is_no_record(tmp_path):
    """Loaded with RTLD_NOW, every function is bound at import: the run's own record names no
    call, which must not read as "called nothing" (reach falls back to the operators' carriers)."""
    assert run_with_bindings(tmp_path, "torch.relu(x)", lazy=False) is None
    assert called(None) is None and called({"file": str(tmp_path / "none"), "offset": 0}) is None


def test_a_trace_of_the_workload_records_the_releases_calls(tmp_path):
    import yaml
    train = yaml.safe_load((ROOT / "config.yaml").read_text())["train"]
    trace_in(sys.executable, train, tmp_path / "trace.json", steps=2)
    trace = json.loads((tmp_path / "trace.json").read_text())
    ran = short_names(trace["cpp_called"])
    assert {"relu", "conv2d"} <= set(trace["ops"]) and {"relu", "convolution"} <= ran, sorted(ran)[:40]
    assert trace["loader"]["file"] and len(trace["cpp_called"]) > 100


# --- reach against what ran ----------------------------------------------------------------------

# a change in threshold's kernel, which relu's kernel calls below autograd in torch 1.4 and 1.5
THRESHOLD = Mapping(Operator("threshold", Way(("threshold_kernel", "threshold"), "TensorCompare.cpp"),
                             carriers=frozenset({"relu", "hardtanh"})))
PROFILED = {"ops": {"relu": 10, "conv2d": 10}, "device": "cpu", "torch_version": "1.4.0"}


def test_an_operator_called_inside_a_traced_kernel_is_reached_below_the_profile():
    verdict = judge(THRESHOLD, dict(PROFILED, cpp_called=["at::native::threshold", "at::native::relu"]))
    assert verdict["verdict"] == "reached"
    assert verdict["reached"] == ["operator threshold (threshold_kernel <- threshold (TensorCompare.cpp)): "
                                  "the release's C++ called threshold, below the profile"]


def test_without_a_record_of_the_calls_a_carried_operator_is_unknown_never_not_reached():
    verdict = judge(THRESHOLD, PROFILED)
    assert verdict["verdict"] == "unknown"
    assert "the kernels of relu, which ran, can call it below autograd" in verdict["unknown"][0]
    # carried by no operator that ran: not reached, as before
    assert judge(THRESHOLD, dict(PROFILED, ops={"conv2d": 1}))["verdict"] == "not reached"


def test_with_a_record_of_the_calls_an_operator_no_function_of_whose_way_ran_is_not_reached():
    verdict = judge(THRESHOLD, dict(PROFILED, cpp_called=["at::native::relu", "at::native::conv2d"]))
    assert verdict["verdict"] == "not reached"
    assert verdict["not_reached"] == ["operator threshold not dispatched, and the release's C++ called "
                                      "no function on its way"]


def test_a_not_reached_is_checked_against_the_ground_truth():
    truth = {"called": ["at::native::relu", "at::native::threshold_kernel"]}
    assert contradicted(THRESHOLD, truth["called"]) == {"threshold": "threshold_kernel"}
    assert checked(THRESHOLD, truth) == "contradicted: operator threshold: threshold_kernel called"
    assert checked(THRESHOLD, {"called": ["at::native::relu"]}).startswith("agrees: the release called none")
    assert checked(Mapping(CudaOnly("aten/src/ATen/native/cuda/Loss.cu")), truth) == "no C++ function to check"


def test_a_not_reached_beside_what_ran_is_a_contradiction_in_the_verdicts():
    said = {"verdict": "not reached"}
    verified = {"corrected": {"outcome": "verified", "workload_calls": ["at::native::threshold"]}}
    assert "override check counted the workload's calls into the rebuilt code (at::native::threshold)" in (
        contradiction(said, "no evidence of impact", verified))
    # a check that knows the functions the fix changes holds reach to them (pr38262's library
    # registers index_select beside scatter_add_, and the small CNN calls only the first)
    other_ops = {"corrected": {**verified["corrected"], "changed_functions": 2, "changed_calls": {}}}
    assert contradiction(said, "not triggered", other_ops) == ""
    entered = {"corrected": {**other_ops["corrected"], "changed_calls": {"scatter_add_cpu_": 4}}}
    assert "calls into the functions the fix changes (scatter_add_cpu_)" in contradiction(said, "not triggered", entered)
    assert "yet the runs differ" in contradiction(said, "impact", {})
    assert contradiction(said, "not reached", {}) == ""
    assert contradiction({"verdict": "reached"}, "impact", verified) == ""
    assert contradiction({"verdict": "not reached on cpu"}, "impact", {}).startswith("reach said not reached on cpu")


def test_an_operator_a_traced_kernel_calls_through_the_dispatcher_is_carried_by_it(tmp_path):
    """Seen on the corpus (pr35150 on torch 1.5.1): cat's kernel calls ``at::_cat``, below autograd;
    with a trace that has no record of the release's calls, a change in _cat's kernel was "not
    reached" (the operator tables followed direct calls only), while the release called it."""
    from bugimpact.framework.tables import DirTree, Tables
    from bugimpact.reach.static import map_diff
    native = tmp_path / "aten" / "src" / "ATen" / "native"
    native.mkdir(parents=True)
    (native / "native_functions.yaml").write_text(
        "- func: cat(Tensor[] tensors, int dim=0) -> Tensor\n"
        "- func: _cat(Tensor[] tensors, int dim=0) -> Tensor\n  dispatch:\n    CPU: _cat_cpu\n"
        "- func: relu(Tensor self) -> Tensor\n- func: clamp_min(Tensor self, Scalar min) -> Tensor\n")
    source = ("namespace at { namespace native {\nTensor _cat_cpu(TensorList t, int64_t dim) {\n  return t[1];\n}\n"
              "Tensor cat(TensorList t, int64_t dim) {\n  return at::_cat(t, dim);\n}\n"
              "Tensor relu(const Tensor& self) {\n  return self.clamp_min(0);\n}\n}}\n")
    (native / "TensorShape.cpp").write_text(source)
    tables = Tables(DirTree(tmp_path))
    assert tables.calling_ops({"_cat"}) == {"cat"} and tables.calling_ops({"clamp_min"}) == {"relu"}
    diff = ("diff --git a/aten/src/ATen/native/TensorShape.cpp b/aten/src/ATen/native/TensorShape.cpp\n"
            "--- a/aten/src/ATen/native/TensorShape.cpp\n+++ b/aten/src/ATen/native/TensorShape.cpp\n"
            "@@ -1,4 +1,4 @@\n namespace at { namespace native {\n Tensor _cat_cpu(TensorList t, int64_t dim) {\n"
            "-  return t[0];\n+  return t[1];\n }\n")
    mapping = map_diff(diff, tables)
    assert mapping.ops["_cat"].functions == ("_cat_cpu",) and mapping.carriers == {"_cat": ["cat"]}
    traced = {"ops": {"cat": 4}, "device": "cpu", "torch_version": "1.5.1"}
    assert judge(mapping, traced)["verdict"] == "unknown"  # no record of the calls: cat can run it
    assert judge(mapping, dict(traced, cpp_called=["at::native::cat", "at::native::_cat_cpu"]))["verdict"] == "reached"
    assert judge(mapping, dict(traced, cpp_called=["at::native::cat"]))["verdict"] == "not reached"
