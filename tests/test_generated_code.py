"""A fix's generated code compared by definition, as a CPU build compiles it, and judged: the
kernels a key calls are registered from the arm's declarations; TH wrappers the arm needs, inline
code of generated headers and the autograd layer's code are refused, each named. The generated
text below is as torch 1.4's and 1.5's generators write it (``CPUType.cpp``, ``Functions.h``); on
the mirror the real generators run (docs/usage.md)."""
from pathlib import Path

import pytest

from bugimpact.artifacts.onefix import verdict
from bugimpact.overrides import generated_code, generated_slices, parts, refusals
from bugimpact.overrides.build import BuildRefused, _every_generated_kernel
from bugimpact.overrides.registration import keyed_as_the_release, registration_key

CPU_1_4 = """namespace at {
namespace CPUType {
Tensor & abs_(Tensor & self) {
    const OptionalDeviceGuard device_guard(device_of(self));
    return at::native::%s(self);
}
Tensor angle(const Tensor & self) {
    return at::native::angle(self);
}
}
namespace {
auto registerer = torch::RegisterOperators()
  .op(torch::RegisterOperators::options()
    .schema("aten::abs_(Tensor(a!) self) -> Tensor(a!)")
    .impl_unboxedOnlyKernel<Tensor & (Tensor &), &CPUType::abs_>(TensorTypeId::CPUTensorId)
    .aliasAnalysis(c10::AliasAnalysisKind::FROM_SCHEMA))
  .op(torch::RegisterOperators::options()
    .schema("aten::angle(Tensor self) -> Tensor")
    .impl_unboxedOnlyKernel<Tensor (const Tensor &), &CPUType::angle>(TensorTypeId::CPUTensorId)
    .aliasAnalysis(c10::AliasAnalysisKind::FROM_SCHEMA));
}
}
"""
# torch 1.5's registration of the same (``.def`` with ``torch::dispatch``), an overload of diag
CPU_1_5 = """Tensor & diag_out_out(Tensor & out, const Tensor & self, int64_t diagonal) {
    return at::native::%s(out, self, diagonal);
}
Tensor diag(const Tensor & self, int64_t diagonal) {
    return at::native::legacy::cpu::_th_diag(self, diagonal);
}
static auto registerer = torch::import()
  .def("aten::diag.out(Tensor self, int diagonal=0, *, Tensor(a!) out) -> Tensor(a!)", torch::dispatch(
      DispatchKey::CPUTensorId,
      CppFunction::makeUnboxedOnly(CPUType::diag_out_out)))
  .def("aten::diag(Tensor self, int diagonal=0) -> Tensor", torch::dispatch(DispatchKey::CPUTensorId, &CPUType::diag));
"""
FUNCTIONS_H = """static inline Tensor & abs_(Tensor & self) {
#ifdef USE_STATIC_DISPATCH
    at::AutoNonVariableTypeMode _var_guard(true);
    %s
#else
    static c10::OperatorHandle op = c10::Dispatcher::singleton().findSchema({"aten::abs_", ""}).value();
    return c10::Dispatcher::singleton().callUnboxedOnly<Tensor &, Tensor &>(op, self);
#endif
}
"""
LEGACY = """Tensor & _th_abs_out(Tensor & result, const Tensor & self) {
    return result;
}
%s"""


def g(text):
    return text.encode()


def test_static_dispatch_blocks_drop_out_as_a_cpu_build_compiles_them():
    before = FUNCTIONS_H % "return CPUType::abs_(self);"
    after = FUNCTIONS_H % "return TypeDefault::abs_(self);"
    assert generated_code.as_compiled(g(before)) == generated_code.as_compiled(g(after))
    assert "CPUType" not in generated_code.as_compiled(g(before)) and "findSchema" in generated_code.as_compiled(g(before))
    assert generated_code.compared({"Functions.h": g(before)}, {"Functions.h": g(after)}) == {}


@pytest.mark.parametrize("release, arm, operators", [
    (CPU_1_4 % "_abs__cpu", CPU_1_4 % "abs_", ["abs_"]),  # 1.4: the kernel abs_'s registration names
    (CPU_1_5 % "_th_diag_out", CPU_1_5 % "diag_out", ["diag.out"]),  # 1.5: the overload, by signature
])
def test_a_changed_kernel_definition_is_named_by_the_registration_of_its_signature(release, arm, operators):
    differ = generated_code.compared({"CPUType.cpp": g(release)}, {"CPUType.cpp": g(arm)})
    assert differ["CPUType.cpp"]["operators"] == operators and not differ["CPUType.cpp"]["unnamed"]
    judged = generated_code.judged(differ, fix_in_release=True)
    assert judged.operators == operators and not judged.refusal


def test_a_kernel_taken_away_or_added_names_its_operator_by_its_registration():
    without = CPU_1_4 % "_abs__cpu"
    start = without.index("Tensor & abs_(")
    without = without[:start] + without[without.index("Tensor angle("):]
    start = without.index("  .op(torch::RegisterOperators::options()\n    .schema(\"aten::abs_")
    without = without[:start] + without[without.index("  .op(torch::RegisterOperators::options()\n    .schema(\"aten::angle"):]
    differ = generated_code.compared({"CPUType.cpp": g(CPU_1_4 % "_abs__cpu")}, {"CPUType.cpp": g(without)})
    assert differ["CPUType.cpp"]["operators"] == ["abs_"]
    assert "reg abs_" in differ["CPUType.cpp"]["removed"]


def test_th_wrappers_the_arm_no_longer_has_are_dead_code_and_ones_it_needs_are_refused():
    extra = "Tensor _th_abs(const Tensor & self) {\n    return self;\n}\n"
    dropped = generated_code.compared({"LegacyTHFunctionsCPU.cpp": g(LEGACY % extra)},
                                      {"LegacyTHFunctionsCPU.cpp": g(LEGACY % "")})
    assert not generated_code.judged(dropped, fix_in_release=False).refusal
    needed = generated_code.compared({"LegacyTHFunctionsCPU.cpp": g(LEGACY % "")},
                                     {"LegacyTHFunctionsCPU.cpp": g(LEGACY % extra)})
    taking_back = generated_code.judged(needed, fix_in_release=True)
    assert taking_back.earlier and "_th_abs(const Tensor &)" in taking_back.refusal
    assert "the fix builds on changes the release lacks" in taking_back.refusal
    forwards = generated_code.judged(needed, fix_in_release=False)
    assert not forwards.earlier and "TH's generated wrappers" in forwards.refusal


def test_inline_code_of_a_generated_header_and_the_autograd_layers_kernels_are_refused_named():
    header = generated_code.compared({"Functions.h": g("static inline Tensor f(const Tensor & s) {\n  return s;\n}\n")},
                                     {"Functions.h": g("static inline Tensor f(const Tensor & s) {\n  return -s;\n}\n")})
    refused = generated_code.judged(header, False).refusal
    assert "Functions.h changes inline code its includers compile" in refused
    variable = "Tensor VariableType::cdist(const Tensor & x1, const Tensor & x2) {\n  %s;\n}\n"
    autograd = generated_code.compared({"torch/VariableType_2.cpp": g(variable % "a")},
                                       {"torch/VariableType_2.cpp": g(variable % "b")})
    assert "torch/VariableType_2.cpp, the autograd layer's Variable kernels (def VariableType::cdist(const Tensor &, " \
           "const Tensor &))" in \
        generated_code.judged(autograd, False).refusal
    binding = generated_code.compared({"torch/python_torch_functions.cpp": g(variable % "a")},
                                      {"torch/python_torch_functions.cpp": g(variable % "b")})
    refused = generated_code.judged(binding, False).refusal
    assert "torch/python_torch_functions.cpp, a binding static to libtorch_python (def" in refused
    assert refusals.cause_of(refused) == "a binding static to libtorch_python"


def test_an_operator_the_arm_takes_away_is_left_registered_as_the_release_has_it_and_one_it_adds_is_built():
    """Seen on real history: a fix that adds an operator for its op file to call (pr27039's
    ``_use_cudnn_ctc_loss``, pr37337's ``_euclidean_dist``), taken back on a release that holds
    it. The arm lacks the operator: its kernel, Variable kernel, binding, backward node and
    ``at::`` function are the release's, which nothing the arm compiles calls, so they serve it;
    what else the fix changes is judged as ever. Made forwards, the arm adds the operator: its
    library registers it, compiles its Variable kernel and node, and leaves its binding out."""
    release_cpu = CPU_1_4 % "_abs__cpu"
    angle_def = release_cpu[release_cpu.index("Tensor angle("):release_cpu.index("}\nnamespace {")]
    angle_reg = release_cpu[release_cpu.index("))\n  .op(") + 2:release_cpu.rindex(");\n}\n}")]
    arm_cpu = (CPU_1_4 % "abs_cpu_").replace(angle_def, "").replace(angle_reg, "")
    angle_h = "static inline Tensor angle(const Tensor & self) {\n    return self;\n}\n"
    variable = ("Tensor VariableType::abs_(Tensor & self) {\n  return self;\n}\n"
                "Tensor VariableType::angle(const Tensor & self) {\n  return self;\n}\n")
    binding = ("static PyObject * THPVariable_angle(PyObject* self_, PyObject* args) {\n  return nullptr;\n}\n"
               "static PyMethodDef torch_functions[] = {\n  {\"abs_\", nullptr},\n  {\"angle\", nullptr},\n};\n")
    node = "variable_list AngleBackward::apply(variable_list&& grads) {\n  return grads;\n}\n"
    release = {"CPUType.cpp": g(release_cpu), "Functions.h": g(FUNCTIONS_H % "" + angle_h),
               "torch/VariableType_2.cpp": g(variable), "torch/python_torch_functions.cpp": g(binding),
               "torch/Functions.cpp": g(node)}
    arm = {"CPUType.cpp": g(arm_cpu), "Functions.h": g(FUNCTIONS_H % ""),
           "torch/VariableType_2.cpp": g(variable[:variable.index("Tensor VariableType::angle")]),
           "torch/python_torch_functions.cpp": g(binding[binding.index("static PyMethodDef"):].replace(
               '  {\"angle\", nullptr},\n', "")), "torch/Functions.cpp": g("")}
    assert generated_code.registered(release) == {"abs_", "angle"} and generated_code.registered(arm) == {"abs_"}
    judged = generated_code.judged(generated_code.compared(release, arm), True,
                                   (generated_code.registered(release), generated_code.registered(arm)))
    assert not judged.refusal and judged.lacking == ["angle"]
    assert judged.operators == ["abs_"]  # its kernel changed too: registered from the arm
    assert judged.headers == [] and judged.served == [
        "Functions.h", "torch/Functions.cpp", "torch/VariableType_2.cpp", "torch/python_torch_functions.cpp"]
    # a generated function's list of operators without the lacking one's line (1.6's
    # ``is_custom_op``, pr37337 taken back there): served; a line of another operator taken away is not
    ops = 'bool is_custom_op(const c10::OperatorName& op) {\n  static std::set<std::string> ops {\n%s  };\n  return true;\n}\n'
    listed = {**release, "core/ATenOpList.cpp": g(ops % '    "aten::abs_",\n    "aten::angle",\n')}
    for without, served in (('    "aten::abs_",\n', True), ('    "aten::angle",\n', False)):
        shorter = {**arm, "core/ATenOpList.cpp": g(ops % without)}
        listing = generated_code.judged(generated_code.compared(listed, shorter), True,
                                        (generated_code.registered(listed), generated_code.registered(shorter)))
        assert ("core/ATenOpList.cpp" in listing.served) is served and bool(listing.refusal) is not served
    # a Variable kernel the arm changes besides is judged as ever: refused
    changed = {**arm, "torch/VariableType_2.cpp": g(variable[:variable.index("Tensor VariableType::angle")].replace(
        "return self;", "return -self;"))}
    refused = generated_code.judged(generated_code.compared(release, changed), True,
                                    (generated_code.registered(release), generated_code.registered(changed)))
    assert "the autograd layer's Variable kernels (def VariableType::abs_(Tensor &)" in refused.refusal
    # made forwards: the arm adds the operator, whose kernel, Variable kernel and node its library
    # compiles; its binding only Python calls, which the release's own code does not
    forwards = generated_code.judged(generated_code.compared(arm, release), False,
                                     (generated_code.registered(arm), generated_code.registered(release)))
    assert not forwards.refusal and forwards.added == ["angle"] and "angle" in forwards.operators
    assert forwards.variable == {"torch/VariableType_2.cpp": ["def VariableType::angle(const Tensor &)"]}
    assert forwards.nodes == ["def AngleBackward::apply(variable_list&&)"] and forwards.headers == ["Functions.h"]
    assert forwards.added_left_out == ["torch/python_torch_functions.cpp"]
    # a binding of another operator besides: judged as ever, refused
    other = {**release, "torch/python_torch_functions.cpp": g(binding.replace('{"abs_", nullptr}', '{"abs", nullptr}'))}
    refused = generated_code.judged(generated_code.compared(arm, other), False,
                                    (generated_code.registered(arm), generated_code.registered(other)))
    assert "torch/python_torch_functions.cpp, a binding static to libtorch_python" in refused.refusal


# a Variable kernel as 1.5's autograd generator writes it (abridged): pr32062's formula for the
# exponent's gradient reads ``exponent`` too, so the release saves it for either gradient
VARIABLE = """Tensor pow_Tensor_Tensor(const Tensor & self, const Tensor & exponent) {
  std::shared_ptr<PowBackward1> grad_fn;
  if (compute_requires_grad( self, exponent )) {
    grad_fn->self_ = SavedVariable(self, false);
%s
  }
  return result;
}
"""
ALWAYS = "    grad_fn->exponent_ = SavedVariable(exponent, false);"
GUARDED = "    if (grad_fn->should_compute_output(0)) {\n" + ALWAYS + "\n    }"


def test_a_variable_kernel_that_saves_all_the_arms_node_reads_serves_the_arm_and_one_that_saves_less_is_refused():
    def judged(release, arm):
        return generated_code.judged(generated_code.compared({"torch/VariableType_2.cpp": g(VARIABLE % release)},
                                                             {"torch/VariableType_2.cpp": g(VARIABLE % arm)}), True)
    served = judged(ALWAYS, GUARDED)  # pr32062 taken back on 1.5.0: the release saves it always
    assert not served.refusal and served.served == ["torch/VariableType_2.cpp"]
    assert "the autograd layer's Variable kernels" in judged(GUARDED, ALWAYS).refusal  # the arm's node would miss it
    assert judged(GUARDED, GUARDED.replace("output(0)", "output(1)")).refusal  # saved for another gradient
    assert judged(ALWAYS, ALWAYS.replace("exponent, false", "exponent, true")).refusal  # saved otherwise


# the generated backward nodes' file as 1.4's autograd generator writes it (abridged)
NODES = """#include "Functions.h"
#include <ATen/Utils.h>

namespace torch { namespace autograd { namespace generated {

namespace {

Tensor not_implemented(const char* name) {
  throw std::runtime_error(name);
}

double scale(double p) {
  return p;
}

Tensor cdist_backward_helper(const Tensor & grad, const Tensor & x1, double p) {
  return grad * scale(p);
}

}

variable_list AddBackward0::apply(variable_list&& grads) {
  return grads;
}

variable_list CdistBackward::apply(variable_list&& grads) {
  auto grad_result = _cdist_backward(%s, x1, x2, p, result);
  return {grad_result};
}

variable_list MulBackward0::apply(variable_list&& grads) {
  return grads;
}

}}} // namespace torch::autograd::generated
"""


def test_a_derivative_formula_is_its_backward_node_interposed_from_a_slice_of_the_generated_file():
    release, arm = (NODES % "grad.contiguous()").encode(), (NODES % "grad").encode()
    differ = generated_code.compared({"torch/Functions.cpp": release}, {"torch/Functions.cpp": arm})
    assert differ["torch/Functions.cpp"]["changed"] == ["def CdistBackward::apply(variable_list&&)"]
    judged = generated_code.judged(differ, fix_in_release=True)
    assert not judged.refusal and judged.nodes == ["def CdistBackward::apply(variable_list&&)"]
    assert judged.nodes_file == "torch/Functions.cpp" and not judged.operators
    sliced = generated_slices.sliced(arm.decode(), judged.nodes)
    assert "CdistBackward::apply" in sliced and "_cdist_backward(grad, x1" in sliced
    assert "AddBackward0" not in sliced and "MulBackward0" not in sliced  # the other nodes stay the release's
    assert "Tensor not_implemented(const char* name) {" in sliced and sliced.rstrip().endswith("generated")
    # its sibling header, found where the tree compiles it (the wheel ships it there)
    assert '#include "torch/csrc/autograd/generated/Functions.h"' in sliced
    assert sliced.count("{") == sliced.count("}")


def test_a_helper_changed_interposes_the_nodes_that_run_it_and_a_node_added_or_the_preamble_is_refused_named():
    release = (NODES % "cdist_backward_helper(grad, x1, p)").encode()

    def judged(arm):
        return generated_code.judged(generated_code.compared({"torch/Functions.cpp": release},
                                                             {"torch/Functions.cpp": arm}), True)
    # the template's own code: a helper the node calls through another helper
    helper = judged(release.replace(b"return p;", b"return p == 2 ? 2 : p;"))
    assert not helper.refusal and helper.nodes == ["def CdistBackward::apply(variable_list&&)"]
    assert "AddBackward0" not in generated_slices.sliced(release.decode(), helper.nodes)
    assert judged(release.replace(b"std::runtime_error", b"std::logic_error")).nodes == []  # no node runs it
    # the paper's pr32062: a comment above the helper, which takes another parameter
    overload = judged(release.replace(b"double scale(double p) {\n  return p;", b"// at p = 0: 0\ndouble scale(double p, "
                                      b"double q) {\n  return p * q;").replace(b"scale(p)", b"scale(p, 2)"))
    assert not overload.refusal and overload.nodes == ["def CdistBackward::apply(variable_list&&)"]
    added = judged(release.replace(b"variable_list MulBackward0", b"variable_list NewBackward::apply(variable_list&& "
                                                                  b"grads) {\n  return grads;\n}\n\nvariable_list MulBackward0"))
    assert "def NewBackward::apply(variable_list&&)" in added.refusal and "not a node added" in added.refusal
    preamble = judged(release.replace(b"namespace {", b"using at::Scalar;\nnamespace {"))
    assert "torch/Functions.cpp: other" in preamble.refusal and "the file's preamble" in preamble.refusal


def test_declarations_of_a_generated_header_are_placed_for_the_arms_own_files_and_cuda_is_left_out():
    release = {"NativeFunctions.h": g("CAFFE2_API Tensor & _abs_out_cpu(Tensor & result, const Tensor & self);\n"),
               "CUDAType.cpp": g("a\n"), "Declarations.yaml": g("a\n")}
    arm = {"NativeFunctions.h": g("CAFFE2_API Tensor & abs_out(Tensor & result, const Tensor & self);\n"
                                  "CAFFE2_API Tensor & abs_out(Tensor & result, const Tensor & self, Scalar s=1);\n"),
           "CUDAType.cpp": g("b\n"), "Declarations.yaml": g("b\n")}
    differ = generated_code.compared(release, arm)
    assert list(differ) == ["NativeFunctions.h"]  # an overload added: only the arm's own files see it
    assert generated_code.judged(differ, False).headers == ["NativeFunctions.h"]
    assert generated_code.left_out(release, arm) == ["CUDAType.cpp", "Declarations.yaml"]


def test_a_default_changed_on_a_declaration_both_sides_keep_is_code_its_callers_compile():
    section = parts.whole_file_section(b"Tensor f(const Tensor & s, int64_t d=0);\n",
                                       b"Tensor f(const Tensor & s, int64_t d=1);\n")
    assert parts.includer_code(section, own_files_only=True) == "a default argument, which each caller compiles"
    static_member = parts.whole_file_section(b"struct CPUType {\n  static Tensor & lt_(Tensor & self, Scalar o);\n};\n",
                                             b"struct CPUType {\n};\n")
    assert parts.includer_code(static_member) == ""


def test_the_arms_kernel_is_registered_under_the_key_the_releases_generated_code_calls():
    release = [{"name": "abs_", "schema": "abs_(Tensor(a!) self) -> Tensor(a!)", "cpp": "abs_", "cpu_dispatch": False,
                "composite": "implicit", "derivative": True, "manual": False}]
    arm = [{**release[0], "cpp": "_abs__cpu", "cpu_dispatch": True, "composite": None, "derivative": False}]
    keyed = keyed_as_the_release(arm, release)
    assert keyed[0]["cpp"] == "_abs__cpu" and keyed[0]["derivative"]
    assert registration_key(keyed[0], {"major": 1, "minor": 4}) == "CPUTensorId"
    chosen = [(keyed[0], "CPUTensorId", "at::Tensor&")]
    _every_generated_kernel({"operators": ["abs_"]}, chosen)
    with pytest.raises(BuildRefused, match="another kernel for abs.out, which no rebuilt file of the arm defines"):
        _every_generated_kernel({"operators": ["abs.out", "abs_"]}, chosen)


DISPATCH = """diff --git a/aten/src/ATen/native/native_functions.yaml b/aten/src/ATen/native/native_functions.yaml
--- a/aten/src/ATen/native/native_functions.yaml
+++ b/aten/src/ATen/native/native_functions.yaml
@@ -1,4 +1,2 @@
 - func: abs_(Tensor(a!) self) -> Tensor(a!)
   variants: function, method
-  dispatch:
-    CPU: _abs__cpu
"""
OP_FILE = """diff --git a/aten/src/ATen/native/UnaryOps.cpp b/aten/src/ATen/native/UnaryOps.cpp
--- a/aten/src/ATen/native/UnaryOps.cpp
+++ b/aten/src/ATen/native/UnaryOps.cpp
@@ -1,3 +1,3 @@
 namespace at { namespace native {
-Tensor& _abs__cpu(Tensor& self) { return self; }
+Tensor& abs_(Tensor& self) { return self.abs_(); }
 }}
"""
FORMULA = """diff --git a/tools/autograd/derivatives.yaml b/tools/autograd/derivatives.yaml
--- a/tools/autograd/derivatives.yaml
+++ b/tools/autograd/derivatives.yaml
@@ -1,2 +1,2 @@
 - name: abs(Tensor self) -> Tensor
-  self: grad * self.sign()
+  self: grad * self.sgn()
"""


def test_a_dispatch_entry_with_its_op_file_or_a_formula_is_a_kernel_fix_and_a_dispatch_entry_alone_is_refused():
    assert verdict(DISPATCH + OP_FILE) == "yes: kernels (op: aten/src/ATen/native/UnaryOps.cpp)"
    assert "no op file whose kernels its generated code would call" in verdict(DISPATCH)
    assert verdict(DISPATCH + FORMULA + OP_FILE) == "yes: kernels (op: aten/src/ATen/native/UnaryOps.cpp)"
    # a formula, or the autograd template's helpers, alone: the generated backward nodes decide
    assert verdict(FORMULA) == "yes: kernels (codegen: tools/autograd/derivatives.yaml)"
    template = FORMULA.replace("tools/autograd/derivatives.yaml", "tools/autograd/templates/Functions.cpp")
    assert verdict(template) == "yes: kernels (codegen: tools/autograd/templates/Functions.cpp)"
    # the bindings' template generates static functions of libtorch_python alone: refused by its diff
    binding = FORMULA.replace("tools/autograd/derivatives.yaml", "tools/autograd/templates/python_torch_functions.cpp")
    assert "the Python bindings' generator (tools/autograd/templates/python_torch_functions.cpp)" in verdict(
        binding + OP_FILE)
    added = FORMULA.replace("@@ -1,2 +1,2 @@\n", "@@ -1,2 +1,4 @@\n+- name: sgn(Tensor self) -> Tensor\n+  self: grad * 0\n")
    # a derivative (or an operator) added or taken away: which way the arm goes, and so whether
    # the release serves it, its generated code says (``judged``), not the diff
    assert verdict(added + OP_FILE) == "yes: kernels (op: aten/src/ATen/native/UnaryOps.cpp)"


FIXTURES = Path(__file__).parent / "fixtures"


def torch_1_5(tmp_path):
    """A git repository of torch 1.5's tree as ``bin/extract-release-tree`` ships it
    (``tests/fixtures/torch-1.5-tree.tar.xz``: the branch point's generators and their inputs,
    #34794 placed, and pr38262's own files): (its folder, its commit)."""
    import subprocess
    import tarfile

    from test_overrides import git
    repo = tmp_path / "torch"
    repo.mkdir()
    with tarfile.open(FIXTURES / "torch-1.5-tree.tar.xz") as tar:
        tar.extractall(repo, filter="data") if hasattr(tarfile, "data_filter") else tar.extractall(repo)
    git(repo, "init", "-q", "-b", "master")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "torch 1.5's branch point, its generators and their inputs")
    return repo, subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                                check=True).stdout.strip()


def test_the_real_generators_of_torch_1_5_judge_a_real_dispatch_change(tmp_path, monkeypatch):
    """torch 1.5's own generators (its branch point's ``gen.py``, autograd, TorchScript and binding
    generators and their inputs, as ``tests/fixtures/torch-1.5-tree.tar.xz`` ships them) made
    forwards with pr38262's generator inputs: the CPU key of ``scatter_add_`` calls another
    kernel; nothing else a CPU build compiles changes but declarations."""
    from bugimpact.framework import patch
    from bugimpact.framework.apply import direction_of
    from bugimpact.overrides import generated_headers
    repo, head = torch_1_5(tmp_path)
    diffs = [fd for fd in patch.parse((FIXTURES / "pr38262.diff").read_text())
             if fd.name.endswith(("native_functions.yaml", ".cwrap"))]
    inputs = {fd.name: (repo / fd.name).read_bytes() for fd in diffs}
    direction, arm_inputs, _ = direction_of(diffs, inputs)
    assert direction == "forward"
    monkeypatch.chdir(tmp_path)
    release = generated_headers.generate(repo, head, autograd=True)
    arm = generated_headers.generate(repo, head, files=arm_inputs, autograd=True)
    assert not release.get("error") and "torch/VariableType_0.cpp" in release["files"]
    differ = generated_code.compared(release["files"], arm["files"])
    judged = generated_code.judged(differ, fix_in_release=False)
    assert not judged.refusal and judged.operators == ["scatter_add_"]
    assert set(differ) <= {"CPUType.cpp", "CPUType.h", "NativeFunctions.h", "TypeDefault.h"}
    assert "LegacyTHFunctionsCUDA.cpp" in generated_code.left_out(release["files"], arm["files"])


def test_the_real_generators_of_torch_1_5_judge_a_derivative_formula_as_one_backward_node(tmp_path, monkeypatch):
    """pr26254's formula taken back on torch 1.5's own generators (``_cdist_forward``'s x1
    gradient without ``.contiguous()``): one backward node's ``apply`` changes, and its slice
    keeps the file's helpers and that node alone."""
    from bugimpact.overrides import generated_headers
    repo, head = torch_1_5(tmp_path)
    derivatives = "tools/autograd/derivatives.yaml"
    taken_back = (repo / derivatives).read_bytes().replace(b"x1: _cdist_backward(grad.contiguous(), x1",
                                                           b"x1: _cdist_backward(grad, x1")
    monkeypatch.chdir(tmp_path)
    release = generated_headers.generate(repo, head, autograd=True)["files"]
    arm = generated_headers.generate(repo, head, files={derivatives: taken_back}, autograd=True)["files"]
    judged = generated_code.judged(generated_code.compared(release, arm), fix_in_release=True)
    assert not judged.refusal and not judged.operators
    assert judged.nodes == ["def CdistBackward::apply(variable_list&&)"], judged.nodes
    sliced = generated_slices.sliced(arm[judged.nodes_file].decode(), judged.nodes)
    assert sliced.count("::apply(variable_list&& grads) {") == 1 and "_cdist_backward(grad, x1" in sliced
    assert "copy_range" in sliced  # the file's helpers, which the node calls


def test_the_real_generators_of_torch_1_5_judge_an_added_operator_as_slices_of_its_own(tmp_path, monkeypatch):
    """pr37337's generator inputs made forwards on torch 1.5's own generators (``cdist``'s p=2
    gradient through a new operator, ``_euclidean_dist``, with its derivative and its helper in
    the nodes' template): the arm adds the operator. Its kernel is registered, its Variable kernel
    compiled from a slice of its file that registers it alone, its node from the nodes' slice;
    the headers that declare them are placed, and its binding, its node's Python class, its entry
    of TorchScript's table and of the list of operators are left out, named."""
    from bugimpact.overrides import generated_headers
    repo, head = torch_1_5(tmp_path)
    native, derivatives, template = ("aten/src/ATen/native/native_functions.yaml", "tools/autograd/derivatives.yaml",
                                     "tools/autograd/templates/Functions.cpp")
    helper = b"Tensor norm_backward(const Tensor & grad, const Tensor & self, const optional<Scalar> & p_, "
    arm_inputs = {
        native: (repo / native).read_bytes().replace(b"- func: _cdist_forward(", b"- func: _euclidean_dist(Tensor x1, "
                                                     b"Tensor x2) -> Tensor\n  use_c10_dispatcher: full\n\n"
                                                     b"- func: _cdist_forward(", 1),
        derivatives: (repo / derivatives).read_bytes().replace(
            b"- name: _cdist_forward(", b"- name: _euclidean_dist(Tensor x1, Tensor x2) -> Tensor\n  x1, x2: "
            b"_euclidean_dist_backward(grad, x1, x2, result)\n\n- name: _cdist_forward(", 1),
        template: (repo / template).read_bytes().replace(helper, (
            b"std::tuple<Tensor, Tensor> _euclidean_dist_backward(const Tensor & grad, const Tensor & x1, "
            b"const Tensor & x2, const Tensor & res) {\n  Tensor ratio = grad / res;\n  ratio.masked_fill_(res == 0, 0);"
            b"\n  return std::tuple<Tensor, Tensor>{x1 * ratio.sum(-1, true) - ratio.matmul(x2), x2 * ratio.sum(-2, "
            b"false).unsqueeze(-1) - ratio.transpose(-2, -1).matmul(x1)};\n}\n\n") + helper, 1)}
    monkeypatch.chdir(tmp_path)
    release = generated_headers.generate(repo, head, autograd=True)["files"]
    arm = generated_headers.generate(repo, head, files=arm_inputs, autograd=True)["files"]
    judged = generated_code.judged(generated_code.compared(release, arm), False,
                                   (generated_code.registered(release), generated_code.registered(arm)))
    assert not judged.refusal and judged.added == ["_euclidean_dist"] == judged.operators
    assert judged.nodes == ["def EuclideanDistBackward::apply(variable_list&&)"]
    assert judged.headers == ["Functions.h", "NativeFunctions.h", "TypeDefault.h", "torch/Functions.h"]
    assert judged.added_left_out == ["core/OpsAlreadyMovedToC10.cpp", "torch/python_functions.cpp",
                                     "torch/python_torch_functions.cpp", "torch/register_aten_ops_1.cpp"]
    (name, keys), = judged.variable.items()
    assert name == "torch/VariableType_4.cpp" and keys == ["def _euclidean_dist(const Tensor &, const Tensor &)"]
    arms, releases = (generated_slices.sliced_kernels(side[name].decode(), keys, judged.added) for side in (arm, release))
    assert arms.count("RECORD_FUNCTION(") == 1 and 'RECORD_FUNCTION("_euclidean_dist"' in arms
    chain = arms[arms.index("torch::RegisterOperators()"):]
    assert chain.count(".op(") == 1 and '"aten::_euclidean_dist(Tensor x1, Tensor x2) -> Tensor"' in chain
    assert chain.split(";")[0].rstrip().endswith("))")  # the chain ends after its one entry
    assert "RECORD_FUNCTION(" not in releases and "torch::RegisterOperators();" in releases  # preamble alone
    # the artifact's part of it: the slices and headers placed where the build compiles them, on a
    # release whose registration defines the schema; refused, named, on one whose does not
    from types import SimpleNamespace

    from bugimpact.overrides import arm as arm_part
    source = SimpleNamespace(tree=SimpleNamespace(clone=str(repo), commit=head, changed={}), facts={}, yamls={})
    inputs = {p: (repo / p).read_bytes() for p in arm_inputs}
    generated, headers, slices, _ = arm_part.generated_for(source, inputs, arm_inputs, False, "1.5.1", {})
    assert generated["arm_adds"] == ["_euclidean_dist"] and generated["variable_kernels"] == ["_euclidean_dist"]
    assert "torch/csrc/autograd/generated/Functions.h" in headers and "aten/src/ATen/Functions.h" in headers
    assert sorted(slices) == ["torch/csrc/autograd/generated/Functions.cpp",
                              "torch/csrc/autograd/generated/VariableType_4.cpp"]
    with pytest.raises(parts.Refused) as refused:
        arm_part.generated_for(source, inputs, arm_inputs, False, "1.6.0", {})
    assert refusals.cause_of(str(refused.value)) == "an operator the arm adds, on a release whose schemas are not registered"
    # a node added for no added operator is still refused
    renamed = {**arm, "torch/Functions.cpp": arm["torch/Functions.cpp"].replace(b"EuclideanDistBackward::apply",
                                                                                b"OtherBackward::apply")}
    refused = generated_code.judged(generated_code.compared(release, renamed), False,
                                    (generated_code.registered(release), generated_code.registered(renamed)))
    assert "def OtherBackward::apply(variable_list&&)" in refused.refusal


def test_a_generated_arm_is_refused_where_the_release_takes_no_registration_or_no_clone_holds_its_tree():
    from types import SimpleNamespace

    from bugimpact.overrides.arm import generator_inputs_of
    from bugimpact.overrides.parts import Refused
    yaml = ["aten/src/ATen/native/native_functions.yaml"]
    archive = SimpleNamespace(tree=None, read_from="archive x.tar.xz")
    with pytest.raises(Refused, match="only registered kernels take over: torch 1.0.0: no override registration"):
        generator_inputs_of(archive, yaml, "1.0.0")
    with pytest.raises(Refused, match="whose generated code is made from the release's tree, and archive x.tar.xz is no clone"):
        generator_inputs_of(archive, yaml, "1.4.0")
    assert generator_inputs_of(archive, [], "1.0.0") == {}


def test_a_2019_generators_scratch_copy_of_the_core_headers_is_judged_as_the_checked_in_header():
    before, after = g("inline int f() { return 1; }\n"), g("inline int f() { return 2; }\n")
    differ = generated_code.compared({"core_tmp/TensorBody.h": before}, {"core_tmp/TensorBody.h": after})
    assert list(differ) == ["core/TensorBody.h"] and differ["core/TensorBody.h"]["header"].startswith("code")


def test_the_scope_says_which_operators_the_arm_registers_as_its_generated_code_calls_them():
    from bugimpact.artifacts import onefix
    kernels = {"rebuild": ["aten/src/ATen/native/TensorAdvancedIndexing.cpp"], "diff_sha256": "ee" * 32,
               "source": {"reconstructed": True}, "generated": {"operators": ["scatter_add_"]}}
    manifest = {"source": "onefix", "release": {"version": "1.5.1"}, "apply": "forward", "kernels": kernels}
    assert onefix.describe(manifest) == (
        "torch 1.5.1 with the fix's diff applied (diff sha256 eeeeeeeeeeee); kernels rebuilt from "
        "TensorAdvancedIndexing.cpp (reconstructed), registered as its generated code calls them for scatter_add_")
    # an operator the arm adds: said as such, its node not called interposed
    kernels["rebuild"] = ["aten/src/ATen/native/Distance.cpp"]
    kernels["generated"] = {"operators": ["_euclidean_dist"], "nodes": ["EuclideanDistBackward"],
                            "arm_adds": ["_euclidean_dist"], "left_out_for_added": ["torch/python_torch_functions.cpp"]}
    assert onefix.describe(manifest).endswith(
        "kernels rebuilt from Distance.cpp (reconstructed); the operator _euclidean_dist the arm adds registered with "
        "its schema, its Variable kernel and backward node compiled from slices of its generated code (what only "
        "Python or TorchScript reaches left out: torch/python_torch_functions.cpp)")


def test_other_code_of_a_kernel_file_is_refused_and_blank_lines_are_not_code():
    release = CPU_1_4 % "_abs__cpu"
    helper = release.replace("namespace CPUType {\n", "namespace CPUType {\nstatic int helper = 1;\n")
    refused = generated_code.judged(generated_code.compared({"CPUType.cpp": g(release)}, {"CPUType.cpp": g(helper)}),
                                    False).refusal
    assert "CPUType.cpp: other changes, and no registration names its operator" in refused
    spaced = release.replace("}\nTensor angle", "}\n\n\nTensor angle")
    assert generated_code.compared({"CPUType.cpp": g(release)}, {"CPUType.cpp": g(spaced)}) == {}


def test_a_registration_added_at_the_end_of_the_chain_names_its_operator_alone():
    release = CPU_1_5 % "_th_diag_out"
    arm = release.replace(", &CPUType::diag));", ", &CPUType::diag))\n"
                          '  .def("aten::triu(Tensor self, int diagonal=0) -> Tensor", torch::dispatch('
                          "DispatchKey::CPUTensorId, &CPUType::triu));")
    differ = generated_code.compared({"CPUType.cpp": g(release)}, {"CPUType.cpp": g(arm)})
    assert differ["CPUType.cpp"]["operators"] == ["diag", "triu"]  # the chain's last line lost its ";"
    one_line = "TORCH_LIBRARY_IMPL(aten, CPU, m) {\n  m.impl(\"abs_\", TORCH_FN(CPUType::abs_));\n}\n"
    more = one_line.replace("}\n", "  m.impl(\"sign_\", TORCH_FN(CPUType::sign_));\n}\n")
    assert generated_code.compared({"CPUType.cpp": g(one_line)}, {"CPUType.cpp": g(more)})["CPUType.cpp"]["operators"] \
        == ["sign_"]
