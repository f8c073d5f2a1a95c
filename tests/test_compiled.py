"""Compiled fixes isolated on a release wheel: what each kind of compiled change is, and which
kinds a release wheel can take as an override library."""
from pathlib import Path

import pytest
from conftest import config_with

from bugimpact.artifacts import onefix
from bugimpact.framework.declarations import operators
from bugimpact.overrides import generator_inputs, parts
from bugimpact.overrides.refusals import cause_of

# The compiled fixes of data/known_commits/pytorch.csv whose changed files were listed whole when
# they were classified by hand (shared/reference/compiled-fixes.md), with that kind. Two differ on
# purpose: pr28260's QuantizedOpKernels.cpp is a DispatchStub kernel file (so the fix is ``stub``),
# and pr29609's Quantizer.cpp change is a comment, which changes no binary (its diff is tested
# below).
BY_HAND = [
    ("study-pr31167", "codegen", ['aten/src/ATen/native/Distance.cpp', 'aten/src/ATen/native/native_functions.yaml', 'tools/autograd/derivatives.yaml']),
    ("study-pr31552", "jit", ['torch/csrc/jit/passes/onnx/prepare_inplace_ops_for_onnx.cpp']),
    ("study-pr31584", "not shipped", ['android/pytorch_android/src/androidTest/java/org/pytorch/PytorchTestBase.java', 'android/pytorch_android/src/main/cpp/pytorch_jni_common.cpp', 'android/pytorch_android/test_asset.jit']),
    ("study-pr32062", "codegen", ['tools/autograd/derivatives.yaml', 'tools/autograd/templates/Functions.cpp']),
    ("study-pr32350", "op", ['aten/src/ATen/native/ConstantPadNd.cpp']),
    ("study-pr32541", "stub", ['aten/src/ATen/native/cpu/BinaryOpsKernel.cpp', 'aten/src/ATen/native/cuda/BinaryCompareKernel.cu']),
    ("study-pr32829", "stub", ['aten/src/ATen/native/GridSampler.h', 'aten/src/ATen/native/cpu/GridSamplerKernel.cpp', 'aten/src/ATen/native/cuda/GridSampler.cuh']),
    ("study-pr32831", "cuda", ['aten/src/ATen/native/cuda/ReduceOpsKernel.cu']),
    ("study-pr32978", "op", ['aten/src/ATen/native/TensorCompare.cpp']),
    ("study-pr36820", "cuda", ['aten/src/ATen/native/cuda/DilatedMaxPool3d.cu']),
    ("study-pr36832", "header", ['aten/src/ATen/cpu/vec256/vec256_int.h', 'aten/src/ATen/native/cpu/BinaryOpsKernel.cpp', 'c10/util/TypeCast.h']),
    ("study-pr37214", "infra", ['aten/src/ATen/native/TensorIterator.cpp']),
    ("study-pr38945", "cuda", ['aten/src/ATen/native/cuda/PersistentSoftmax.cuh', 'aten/src/ATen/native/cuda/SoftMax.cu']),
    ("pr28812", "dist", ['torch/lib/c10d/FileStore.cpp', 'torch/lib/c10d/FileStore.hpp']),
    ("pr26984", "dist", ['torch/csrc/distributed/rpc/process_group_agent.cpp', 'torch/csrc/distributed/rpc/process_group_agent.h']),
    ("pr27284", "dist", ['torch/csrc/distributed/rpc/python_rpc_handler.cpp']),
    ("pr29781", "dist", ['torch/csrc/distributed/autograd/utils.cpp', 'torch/csrc/distributed/rpc/python_functions.cpp']),
    ("pr30172", "dist", ['torch/csrc/distributed/rpc/rref_context.cpp']),
    ("pr30083", "codegen", ['aten/src/ATen/native/TensorCompare.cpp', 'aten/src/ATen/native/native_functions.yaml', 'torch/_torch_docs.py', 'torch/functional.py']),
    ("pr28774", "cppapi", ['torch/csrc/api/include/torch/nn/modules/container/named_any.h', 'torch/csrc/api/include/torch/nn/modules/container/sequential.h', 'torch/csrc/api/src/nn/modules/container/named_any.cpp']),
    ("pr27948", "cppapi", ['torch/csrc/api/include/torch/nn/module.h', 'torch/csrc/api/src/nn/module.cpp']),
    ("pr30626", "cppapi", ['torch/csrc/api/include/torch/nn/cloneable.h', 'torch/csrc/api/include/torch/nn/module.h', 'torch/csrc/api/include/torch/nn/parallel/data_parallel.h', 'torch/csrc/api/src/nn/module.cpp']),
    ("pr28499", "cppapi", ['torch/csrc/api/include/torch/serialize/input-archive.h', 'torch/csrc/api/src/serialize/input-archive.cpp']),
    ("pr27606", "cppapi", ['torch/csrc/api/src/optim/lbfgs.cpp']),
    ("pr27933", "cppapi", ['torch/csrc/api/include/torch/nn/init.h', 'torch/csrc/api/src/nn/init.cpp']),
    ("pr29436", "jit", ['torch/csrc/jit/symbolic_script.cpp']),
    ("pr29577", "jit", ['torch/csrc/jit/register_prim_ops.cpp']),
    ("pr29826", "jit", ['torch/csrc/jit/script/concrete_module_type.cpp', 'torch/csrc/jit/script/concrete_module_type.h', 'torch/csrc/jit/script/init.cpp', 'torch/jit/_recursive.py']),
    ("pr29583", "jit", ['torch/csrc/jit/script/concrete_module_type.h']),
    ("pr29833", "jit", ['torch/csrc/jit/script/init.cpp']),
    ("pr29791", "jit", ['torch/csrc/jit/python_tracer.cpp']),
    ("pr29474", "jit", ['torch/csrc/jit/script/compiler.cpp', 'torch/csrc/jit/script/parser.cpp']),
    ("pr22700", "jit", ['torch/csrc/jit/register_prim_ops.cpp']),
    ("pr28616", "jit", ['torch/csrc/jit/register_special_ops.cpp']),
    ("pr28569", "jit", ['torch/csrc/jit/script/concrete_module_type.cpp', 'torch/csrc/jit/script/concrete_module_type.h', 'torch/csrc/jit/script/init.cpp', 'torch/jit/_recursive.py']),
    ("pr28057", "jit", ['torch/csrc/jit/pickler.cpp']),
    ("pr27511", "jit", ['torch/csrc/jit/script/compiler.cpp']),
    ("pr27261", "jit", ['torch/csrc/jit/script/compiler.cpp']),
    ("pr26856", "jit", ['torch/csrc/jit/pybind_utils.h']),
    ("pr27012", "jit", ['torch/csrc/jit/function.h']),
    ("pr27764", "jit", ['torch/csrc/jit/import_legacy.cpp']),
    ("pr26665", "jit", ['torch/csrc/jit/ir.cpp', 'torch/csrc/jit/pybind_utils.h']),
    ("pr29609", "op", ['aten/src/ATen/native/Copy.cpp']),
    ("pr28635", "header", ['aten/src/ATen/core/dispatch/DispatchTable.h']),
    ("pr28260", "stub", ['aten/src/ATen/native/quantized/cpu/kernels/QuantizedOpKernels.cpp', 'aten/src/ATen/native/quantized/cpu/q_avgpool.cpp']),
    ("pr29885", "infra", ['aten/src/ATen/ParallelNative.cpp', 'caffe2/utils/threadpool/ThreadPool.cc']),
    ("pr30067", "jit", ['torch/csrc/jit/profiling_graph_executor_impl.cpp']),
    ("pr28989", "cuda", ['aten/src/ATen/native/cuda/SortingRadixSelect.cuh']),
    ("pr27125", "infra", ['torch/csrc/generic/StorageMethods.cpp']),
    ("pr28274", "op", ['aten/src/ATen/native/TensorFactories.cpp']),
    ("pr27712", "th", ['aten/src/ATen/native/cuda/SummaryOps.cu', 'aten/src/TH/generic/THTensorMoreMath.cpp']),
    ("pr28546", "op", ['aten/src/ATen/native/Embedding.cpp']),
    ("pr28931", "cuda", ['aten/src/ATen/native/cuda/DilatedMaxPool2d.cu']),
    ("pr29873", "codegen", ['aten/src/ATen/Declarations.cwrap', 'aten/src/THC/generic/THCTensorMathReduce.cu']),
    ("pr29231", "cuda", ['aten/src/THC/THCAtomics.cuh']),  # THC is TH's CUDA half
    ("pr28613", "th", ['aten/src/TH/generic/THTensorMath.cpp', 'aten/src/THC/generic/THCTensorMathBlas.cu']),
    ("pr27460", "cuda", ['aten/src/ATen/native/cuda/LossCTC.cu']),
    ("pr27731", "cuda", ['aten/src/ATen/native/cuda/EmbeddingBackwardKernel.cu']),
    ("pr28196", "cuda", ['aten/src/ATen/native/cuda/layer_norm_kernel.cu']),
    ("pr28784", "op", ['aten/src/ATen/native/Convolution.cpp']),
    ("pr28637", "op", ['aten/src/ATen/native/Loss.cpp']),
    ("pr30793", "cuda", ['aten/src/ATen/native/cuda/AveragePool2d.cu']),
    ("pr28927", "cuda", ['aten/src/ATen/native/cuda/UpSampleNearest1d.cu', 'aten/src/ATen/native/cuda/UpSampleNearest2d.cu', 'aten/src/ATen/native/cuda/UpSampleNearest3d.cu']),
    ("pr29016", "cuda", ['aten/src/ATen/native/cuda/UpSampleNearest1d.cu', 'aten/src/ATen/native/cuda/UpSampleNearest2d.cu', 'aten/src/ATen/native/cuda/UpSampleNearest3d.cu']),
    ("pr27371", "codegen", ['tools/autograd/templates/python_variable_methods.cpp']),
    ("pr29003", "cuda", ['aten/src/ATen/native/cuda/BatchLinearAlgebra.cu']),
    ("pr28207", "header", ['aten/src/ATen/cpu/vec256/vec256.h']),
    ("pr38046", "cuda", ['aten/src/ATen/native/cuda/MultinomialKernel.cu']),
    ("pr37355", "infra", ['aten/src/ATen/core/VariableFallbackKernel.cpp']),
    ("pr37788", "infra", ['aten/src/ATen/native/TensorIterator.cpp']),
    ("pr38033", "codegen", ['tools/autograd/templates/python_torch_functions.cpp']),
    ("pr37221", "cppapi", ['torch/csrc/api/include/torch/nn/cloneable.h']),
    ("pr38674", "op", ['aten/src/ATen/native/Convolution.cpp']),
    ("pr38695", "codegen", ['tools/autograd/templates/python_variable_methods.cpp']),
    ("pr38512", "dist", ['torch/csrc/distributed/rpc/request_callback_impl.cpp', 'torch/testing/_internal/distributed/rpc/dist_autograd_test.py']),
]


@pytest.mark.parametrize("fix, expected, paths", BY_HAND)
def test_each_compiled_fix_has_the_kind_found_by_hand(fix, expected, paths):
    code = [p for p in paths if onefix.classify(p) == "compiled"]
    assert (parts.fix_part(code)[0] if code else "not shipped") == expected, fix


def test_a_kernel_fix_with_a_cuda_half_is_a_cpu_kernel_fix_until_a_cuda_compiler_builds_it():
    kind, kinds = parts.fix_part(["aten/src/ATen/native/LossCTC.cpp", "aten/src/ATen/native/cuda/LossCTC.cu"])
    assert kind == "op" and kinds["cuda"] == ["aten/src/ATen/native/cuda/LossCTC.cu"]
    assert parts.refusal(kind, kinds) == ""
    stub = parts.fix_part(["aten/src/ATen/native/cpu/BinaryOpsKernel.cpp",
                              "aten/src/ATen/native/cuda/BinaryCompareKernel.cu"])
    assert stub[0] == "stub" and parts.refusal(*stub) == ""  # its kernel goes into the release's stub
    assert parts.Kernels(stub[0], stub[1], "").built == ["aten/src/ATen/native/cpu/BinaryOpsKernel.cpp"]
    only_cuda = parts.fix_part(["aten/src/ATen/native/cuda/LossCTC.cu"])
    assert parts.refusal(*only_cuda).startswith("cuda: CUDA kernels, which only a CUDA compiler")
    assert parts.refusal(*only_cuda, cuda_compiler=True) == ""
    jit = parts.fix_part(["torch/csrc/jit/ir.cpp", "aten/src/ATen/native/Loss.cpp"])
    assert parts.refusal(*jit) == "jit: TorchScript (torch/csrc/jit/ir.cpp)"


def test_a_change_to_comments_only_changes_no_binary():
    comment = ("diff --git a/aten/src/ATen/quantized/Quantizer.cpp b/aten/src/ATen/quantized/Quantizer.cpp\n"
               "--- a/aten/src/ATen/quantized/Quantizer.cpp\n+++ b/aten/src/ATen/quantized/Quantizer.cpp\n"
               "@@ -1,3 +1,3 @@\n int x;\n-// the old note\n+// the new note\n+\n int y;\n")
    path = "aten/src/ATen/quantized/Quantizer.cpp"
    assert parts.only_comments(path, comment)
    assert not parts.only_comments(path, comment.replace("+// the new note", "+int z;"))
    # a trailing comment, a block comment, a hunk within a doc comment, whitespace between tokens
    trailing = comment.replace("-// the old note\n+// the new note", "-int z = 1;  // old\n+int z =  1; /* new */")
    assert parts.only_comments(path, trailing)
    inside = comment.replace(" int x;\n", " * the doc of y\n").replace("-// the old note\n+// the new note",
                                                                          "- * old words\n+ * new words\n */")
    assert parts.only_comments(path, inside)
    # what is code: a dereference, a literal's text or spacing, a // inside a string
    assert not parts.only_comments(path, comment.replace("+// the new note", "+*p = 1;"))
    strings = comment.replace("-// the old note\n+// the new note", '-s = "a  b";\n+s = "a b";')
    assert not parts.only_comments(path, strings)
    assert not parts.only_comments(path, strings.replace('"a b"', '"a // b"'))
    # YAML's and CMake's comments are #: a preprocessor line of C++ is code
    yaml = "@@ -1 +1 @@\n-- func: relu(Tensor self) -> Tensor  # old\n+- func: relu(Tensor self) -> Tensor  # new\n"
    assert parts.only_comments("aten/src/ATen/native/native_functions.yaml", yaml)
    assert not parts.only_comments(path, "@@ -1 +1 @@\n-#define N 1\n+#define N 2\n")


def test_a_header_condition_taken_away_whole_or_only_another_platform_compiles_is_no_code():
    """Seen on real history: pr25857 took a declaration away with the ``#if`` around it, pr26923
    an MSVC-only inline function from THGeneral.h.in (a header CMake configures). Neither is code a
    Linux wheel's includers compile; a condition put around lines the diff keeps, or code under a
    branch Linux takes (``#else``, ``!defined(_MSC_VER)``), is."""
    path = "aten/src/TH/generic/THVector.h"
    whole = ("@@ -1,6 +1,2 @@\n #endif\n\n-#if defined(TH_REAL_IS_SHORT) || defined(TH_REAL_IS_INT)\n"
             "-TH_API void THVector_(abs)(scalar_t *y, const scalar_t *x, const ptrdiff_t n);\n-#endif\n-\n")
    assert parts.only_declarations(path, whole)
    assert not parts.only_declarations(path, whole.replace("-TH_API void", " TH_API void"))  # kept, now conditional
    assert not parts.only_declarations(path, whole.replace("-TH_API void THVector_(abs)(scalar_t *y, const scalar_t *x,"
                                                           " const ptrdiff_t n);", "-#define N 2"))  # its contents judged
    msvc = ("@@ -1,8 +1,2 @@\n #if (defined(_MSC_VER) || defined(__MINGW32__))\n-#if defined(_MSC_VER)\n"
            "-__inline double log1p(double x) { return THLog1p(x); }\n-#else\n"
            "-inline double log1p(double x) { return THLog1p(x); }\n-#endif\n #define snprintf _snprintf\n #endif\n")
    assert parts.only_declarations("aten/src/TH/THGeneral.h.in", msvc)
    linux = msvc.replace("#if (defined(_MSC_VER) || defined(__MINGW32__))", "#if !defined(_MSC_VER)")
    assert parts.includer_code(linux) == "code, not a declaration (inline double log1p(double x) {)"
    assert parts.includer_code(msvc.replace(" #if (defined(_MSC_VER) || defined(__MINGW32__))\n", "")) == \
        "code, not a declaration (inline double log1p(double x) {)"  # the #else of MSVC's: Linux's


def test_an_x_macro_lists_entries_added_or_taken_away_keep_the_releases_list():
    """Seen on real history: pr37337 and pr25665 add an operator's interned symbol to
    aten_interned_strings.h (``_(aten, _euclidean_dist) \\``). Every includer numbers the list
    alike, the release's libraries with the release's: the arm keeps it. Any other change of the
    list's header is code."""
    entry = "@@ -1,3 +1,4 @@\n _(aten, _cdist_forward) \\\n+_(aten, _euclidean_dist) \\\n _(aten, _fft_with_size) \\\n"
    assert parts.only_list_entries(entry)
    assert parts.only_list_entries(entry.replace("+_(aten", "-_(aten"))
    assert not parts.only_list_entries(entry.replace("+_(aten, _euclidean_dist) \\", "+#define X 1"))
    assert not parts.only_list_entries(entry.replace("+", " "))  # nothing changed


HEADER_HUNK = ("@@ -1,6 +1,6 @@\n namespace at {\n\n CAFFE2_API void assert_no_overlap(const Tensor& t);\n"
               "-void propagate_names_for_copy(Tensor& result, const Tensor& src);\n\n}\n")


def test_a_header_change_of_declarations_only_rebuilds_no_includer():
    """A declaration taken away (pr26829's NamedTensorUtils.h), added, forward-declared, or with
    its parameters renamed changes no includer's code; a body, a member, a default, a virtual
    function, a macro or an overload set changed does."""
    path = "aten/src/ATen/NamedTensorUtils.h"
    assert parts.only_declarations(path, HEADER_HUNK)
    added = HEADER_HUNK.replace("-void propagate", "+Tensor& propagate_names_if_nonempty(\n+    Tensor& result,\n"
                                "+    DimnameList names);\n+class Dimname;\n-void propagate")
    assert parts.only_declarations(path, added)
    renamed = HEADER_HUNK.replace("-void propagate_names_for_copy(Tensor& result, const Tensor& src);",
                                  "-void f(Tensor& a, bool check_internal_overlap = false);\n"
                                  "+void f(Tensor& a,\n+       bool check_mem_overlap = false);")
    assert parts.only_declarations(path, renamed)
    for code in ("+inline int twice(int x) { return 2 * x; }",  # a body
                 "+  bool check_mem_overlap_ = false;",  # a member: the layout
                 "+  virtual void f();", "+#define N 2", "+void (*hook)(int);",
                 "+static int counter(int);"):
        assert not parts.only_declarations(path, HEADER_HUNK.replace("-void propagate", f"{code}\n-void propagate")), code
    default = renamed.replace("check_mem_overlap = false", "check_mem_overlap = true")
    assert not parts.only_declarations(path, default)  # a default is compiled into each caller
    retyped = renamed.replace("+void f(Tensor& a,", "+int f(Tensor& a,")
    assert not parts.only_declarations(path, retyped)  # its callers would compile otherwise
    overload = HEADER_HUNK.replace("-void propagate_names_for_copy(Tensor& result, const Tensor& src);",
                                   "-void f(Tensor& a);\n-void f(TensorImpl* a);")
    assert not parts.only_declarations(path, overload)  # an overload set changed
    # TH's generic declarations, one name each (pr34875 took two away, pr23492 added one)
    generic = ("@@ -1,4 +1,3 @@\n #ifndef TH_GENERIC_FILE\n #else\n"
               "-TH_API void THTensor_(max)(THTensor *values_, THLongTensor *indices_, THTensor *t, int dimension);\n"
               "-TH_API void THTensor_(min)(THTensor *values_, THLongTensor *indices_, THTensor *t, int dimension);\n"
               "+TH_API void THTensor_(pow)(THTensor *r_, THTensor *t, scalar_t value);\n")
    assert parts.only_declarations("aten/src/TH/generic/THTensorMath.h", generic)
    # a C function has no overloads: pr25857 took THVector_(abs) away from both of its scalar
    # types' conditions; a C++ one declared twice is an overload set
    twice = generic.replace("THTensor_(min)", "THTensor_(max)")
    assert parts.only_declarations("aten/src/TH/generic/THTensorMath.h", twice)
    assert not parts.only_declarations("aten/src/TH/generic/THTensorMath.h", twice.replace("TH_API ", ""))
    assert not parts.only_declarations("aten/src/ATen/NamedTensorUtils.cpp", HEADER_HUNK)  # not a header
    # a hunk that begins within an inline function's body: a local made with a constructor reads
    # as a declaration in the hunk alone; the artifact reads the whole file (``arm.prepare``)
    release = b"namespace at {\ninline Tensor f(const Tensor& x) {\n  Tensor t(x);\n  return t;\n}\n}\n"
    fixed = release.replace(b"  Tensor t(x);", b"  Tensor t(other);")
    inside = "@@ -3,2 +3,2 @@\n-  Tensor t(x);\n+  Tensor t(other);\n   return t;\n"
    assert parts.only_declarations("aten/src/ATen/X.h", inside)  # a parameter renamed, it seems
    assert parts.includer_code(parts.whole_file_section(release, fixed)) == "code, not a declaration (Tensor t(x))"
    assert not parts.includer_code(parts.whole_file_section(b"void g(int a);\n", b"void g(int b);\n"))
    # with the fix's own files: placed for them, no part of its own, never rebuilt
    diff = (f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n{HEADER_HUNK}"
            "diff --git a/aten/src/ATen/native/Copy.cpp b/aten/src/ATen/native/Copy.cpp\n"
            "--- a/aten/src/ATen/native/Copy.cpp\n+++ b/aten/src/ATen/native/Copy.cpp\n"
            "@@ -1 +1 @@\n-int x = 1;\n+int x = 2;\n")
    _, kinds, kernels = onefix.isolate(diff)
    assert kinds["declarations"] == [path] and kernels.part == "op"
    assert kernels.built == ["aten/src/ATen/NamedTensorUtils.h", "aten/src/ATen/native/Copy.cpp"]
    with pytest.raises(onefix.Refused, match="declarations only in headers .*: nothing compiled or run differs"):
        onefix.isolate(diff[:diff.index("diff --git a/aten/src/ATen/native/Copy.cpp")])
    # the header's part would have refused the fix before
    assert parts.refusal(*parts.fix_part([path, "aten/src/ATen/native/Copy.cpp"])).startswith("header:")
    # a CUDA header's declarations belong to the CUDA half, left out of a CPU arm with it (pr25285's
    # THCTensorMathPointwise.h conflicted with 1.4.0's own, and refused the fix)
    cuda = diff.replace(path, "aten/src/THC/generic/THCTensorMathPointwise.h")
    _, kinds, kernels = onefix.isolate(cuda)
    assert kinds["declarations"] == [] and kernels.files["cuda"] == ["aten/src/THC/generic/THCTensorMathPointwise.h"]
    assert kernels.built == ["aten/src/ATen/native/Copy.cpp"]


def yaml_section(path, *hunk_lines, header=""):
    return (f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1,9 +1,9 @@{header}\n"
            + "\n".join(hunk_lines) + "\n")


def test_a_codegen_fix_is_refused_naming_what_it_changes_in_the_generators_inputs():
    """Read from the diff: the derivative formula of cdist's backward (the spike of
    compiled-fixes.md), a kernel moved between dispatch keys, a schema changed, added or taken
    away, the TH declarations and the generators themselves; the refusal says them, hardest first."""
    derivative = yaml_section("tools/autograd/derivatives.yaml",
                              " - name: cdist(Tensor x1, Tensor x2, float p=2) -> Tensor",
                              "-  x1: _cdist_backward(grad, x1, x2, p, result)",
                              "+  x1: _cdist_backward(grad.contiguous(), x1, x2, p, result)", "")
    assert generator_inputs.changes("tools/autograd/derivatives.yaml", derivative) == [("a derivative formula", "cdist")]
    moved = yaml_section("aten/src/ATen/native/native_functions.yaml",
                         "   dispatch:", "-    CPU: legacy::cpu::_th_sqrt_out", "+    CPU: sqrt_out",
                         header=" - func: sqrt.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)")
    assert generator_inputs.changes("aten/src/ATen/native/native_functions.yaml", moved) == \
        [("a dispatch entry or key", "sqrt.out")]
    schema = yaml_section("aten/src/ATen/native/native_functions.yaml",
                          "-- func: full_like(Tensor self, Scalar fill_value) -> Tensor",
                          "+- func: full_like(Tensor self, Scalar fill_value, *, MemoryFormat? memory_format=None) -> Tensor",
                          "+- func: bitwise_xor.Scalar(Tensor self, Scalar other) -> Tensor", "+  variants: function",
                          "-- func: _th_xor(Tensor self) -> Tensor")
    assert generator_inputs.changes("aten/src/ATen/native/native_functions.yaml", schema) == [
        ("an operator removed", "_th_xor"), ("an operator added", "bitwise_xor.Scalar"),
        ("an existing operator's schema changed", "full_like")]
    assert generator_inputs.changes("aten/src/ATen/Declarations.cwrap", "") == \
        [("TH declarations (cwrap, nn.yaml)", "aten/src/ATen/Declarations.cwrap")]
    assert generator_inputs.changes("tools/autograd/templates/Functions.cpp", "")[0][0] == "the generators"
    whole = schema.replace("@@ -1,9 +1,9 @@", "@@ -1,9 +1,9 @@") + derivative
    with pytest.raises(onefix.Refused) as refused:
        onefix.isolate(whole)
    said = str(refused.value)
    assert said.startswith("the fix touches codegen: ") and "(its generated code: an existing operator's schema " \
        "changed (full_like); an operator removed (_th_xor); an operator added (bitwise_xor.Scalar); a derivative " \
        "formula (cdist))" in said
    assert cause_of("no: " + said) == "an existing operator's schema changed"


# --- which operators a rebuilt file implements, under which key --------------------------------

NATIVE_FUNCTIONS = b"""
- func: _convolution(Tensor input, Tensor weight, Tensor? bias, int[] stride) -> Tensor
- func: convolution_overrideable(Tensor input, Tensor weight) -> Tensor
- func: embedding_renorm_(Tensor(a!) self, Tensor indices, float max_norm) -> Tensor(a!)
  dispatch:
    CPU: embedding_renorm_cpu_
    CUDA: embedding_renorm_cuda_
- func: relu(Tensor self) -> Tensor
  dispatch:
    CPU, CUDA: relu
- func: add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
  dispatch:
    CompositeExplicitAutograd: add
- func: add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor
  dispatch:
    CompositeExplicitAutograd: add
- func: conv2d(Tensor input, Tensor weight) -> Tensor
  dispatch:
    CompositeImplicitAutograd: conv2d
- func: div.Tensor(Tensor self, Tensor other) -> Tensor
- func: div_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)
- func: div.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)
- func: div_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)
- func: dropout_(Tensor(a!) self, float p, bool train) -> Tensor(a!)
- func: softplus(Tensor self, Scalar beta=1, Scalar threshold=20) -> Tensor
- func: sum(Tensor self, int[1] dim, bool keepdim=False) -> Tensor
- func: max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], bool ceil_mode=False) -> Tensor
"""
DERIVATIVES = b"""
- name: convolution_overrideable(Tensor input, Tensor weight) -> Tensor
  input: grad
- name: div.Scalar(Tensor self, Scalar other) -> Tensor
  self: grad / other
- name: div.Tensor(Tensor self, Tensor other) -> Tensor
  self: grad / other
- name: softplus(Tensor self, Scalar beta, Scalar threshold)
  self: softplus_backward(grad, self, beta, threshold, result)
- name: sum(Tensor self, IntArrayRef dim, bool keepdim)
  self: sum_backward(grad, self.sizes(), dim, keepdim)
"""


@pytest.mark.parametrize("version, op, key", [
    # 1.x: an op without dispatch: and without a derivative is called by VariableType directly
    ((1, 5), "_convolution", "VariableTensorId"),
    ((1, 5), "convolution_overrideable", "CPUTensorId"),  # a derivative: reached through the dispatcher
    ((1, 4), "embedding_renorm_", "CPUTensorId"),  # dispatch: CPU
    # an in-place or out variant has its function's derivative, as the generator finds it (its
    # signature without the trailing _ or the out arguments): VariableType unpacks and redispatches
    # (seen: div_.Scalar under the autograd key on 1.3 took that unpacking away, and dropout's
    # noise.div_ failed "Expected object of type Variable", pr26498)
    ((1, 3), "div_.Scalar", "CPUTensorId"),
    ((1, 4), "div.out", "CPUTensorId"),
    ((1, 4), "div_.Tensor", "CPUTensorId"),
    ((1, 4), "dropout_", "VariableTensorId"),  # dropout has no derivative: a composite
    ((1, 2), "softplus", "CPUTensorId"),  # 1.2's derivatives name no overload and no return
    # 1.1's derivatives name an operator with its C++ types (before: sum.dim went under the
    # autograd key on 1.1.0, where VariableType would have called the release's kernel past it)
    ((1, 1), "sum", "CPUTensorId"),
    ((1, 1), "max_pool2d", "VariableTensorId"),
    ((1, 6), "_convolution", "Autograd"),  # 1.6 renamed the autograd key and registers by TORCH_LIBRARY_IMPL
    ((1, 6), "convolution_overrideable", "CPU"),
    ((2, 13), "relu", "CPU"),
    ((2, 13), "add.Tensor", "CPU"),  # a CPU kernel takes precedence over CompositeExplicitAutograd
    ((2, 13), "conv2d", "CompositeImplicitAutograd"),  # reached above the CPU key
])
def test_an_operator_is_registered_under_the_key_the_releases_generated_code_calls(version, op, key):
    from bugimpact.overrides import registration
    ops = {o["name"]: o for o in operators(NATIVE_FUNCTIONS, DERIVATIVES)}
    settings = {"major": version[0], "minor": version[1]}
    assert registration.registration_key(ops[op], settings) == key
    assert ops["embedding_renorm_"]["cpp"] == "embedding_renorm_cpu_"


def test_only_the_operators_a_rebuilt_file_defines_are_registered_and_overloads_by_their_arity():
    from bugimpact.overrides import registration
    nm = ["0000000000005a70 T at::native::_convolution(at::Tensor const&, at::Tensor const&, "
          "at::Tensor const&, c10::ArrayRef<long>)",
          "0000000000000aa0 T at::native::ConvParams::view1d_as_2d()",
          "0000000000000100 t at::native::(anonymous namespace)::helper(int)",
          "0000000000000200 T at::native::add(at::Tensor const&, at::Tensor const&, c10::Scalar)",
          "0000000000000300 T at::native::add(at::Tensor const&, c10::Scalar, c10::Scalar)"]
    defined = registration.defined_functions(nm)
    assert [name for name, _ in defined] == ["_convolution", "add", "add"]  # members and locals are not ops
    ops = operators(NATIVE_FUNCTIONS, DERIVATIVES)
    chosen, skipped = registration.registrations(defined, ops, {"major": 2, "minor": 13})
    assert [(op["name"], key) for op, key, _ in chosen] == [("_convolution", "CompositeImplicitAutograd"),
                                                             ("add.Tensor", "CPU"), ("add.Scalar", "CPU")]
    assert skipped == []
    source = registration.registration_source(chosen, {"major": 2, "minor": 13})
    assert 'm.impl("add.Scalar", TORCH_FN(bugimpact_w2::call));' in source
    assert "decltype(at::native::add(std::declval<at::Tensor const&>(), std::declval<c10::Scalar>(), " \
           "std::declval<c10::Scalar>()))(at::Tensor const&, c10::Scalar, c10::Scalar)" in source
    assert "TORCH_LIBRARY_IMPL(aten, CPU, m)" in registration.registration_source(chosen, {"major": 1, "minor": 6})
    # 1.5 and 1.6: an operator c10 does not box is registered unboxed only, as their generated code
    # does (a boxed one infers its schema: Tensor? read as Tensor refused bilinear on 1.6.0)
    boxed = [({**op, "c10_full": op["name"] == "add.Tensor"}, key, params) for op, key, params in chosen]
    on_16 = registration.registration_source(boxed, {"major": 1, "minor": 6})
    assert 'm.impl("add.Tensor", TORCH_FN(bugimpact_w1::call));' in on_16
    assert 'm.impl_UNBOXED("add.Scalar", &bugimpact_w2::call);' in on_16
    on_15 = registration.registration_source(boxed, {"major": 1, "minor": 5})
    assert 'torch::import()\n  .def("aten::_convolution(Tensor input, Tensor weight, Tensor? bias, int[] stride) ' \
           '-> Tensor", torch::dispatch(c10::DispatchKey::' in on_15
    assert '-> Tensor", torch::dispatch(c10::DispatchKey::CPU, &bugimpact_w1::call))' in on_15
    assert "c10::CppFunction::makeUnboxedOnly(&bugimpact_w2::call)" in on_15
    old = registration.registration_source(chosen[:1], {"major": 1, "minor": 4})
    assert ".impl_unboxedOnlyKernel<decltype(bugimpact_w0::call), &bugimpact_w0::call>(c10::TensorTypeId::" in old
    assert '.schema("aten::_convolution(Tensor input, Tensor weight, Tensor? bias, int[] stride) -> Tensor")' in old
    # 1.3: written into its ATen table, or registered with c10 where 1.3 had moved the operator
    table = registration.registration_source(chosen[:1], {"major": 1, "minor": 3})
    assert 'bugimpact::on_c10("aten::_convolution", "") ? (std::move(bugimpact_registry).op(' in table
    assert ('bugimpact::take("aten::_convolution(Tensor input, Tensor weight, Tensor? bias, int[] stride) -> Tensor", '
            f"c10::TensorTypeId::{chosen[0][1]}, reinterpret_cast<void*>(&bugimpact_w0::call))") in table
    assert "static_assert(sizeof(ATenOpTableLayout) == sizeof(at::ATenOpTable)" in table
    assert table.index("bugimpact_registry;") < table.index("bugimpact_quiet_at_exit;")  # destroyed first


def test_the_builds_flags_are_the_releases_own():
    from bugimpact.overrides import release_build as kernels
    settings = {"std": "c++14", "abi": 0, "cxx_flags": ["-DNDEBUG", "-O2", "-fopenmp"],
                "build_flags": ["-O3", "-DNDEBUG"], "major": 1, "minor": 5, "capability": "AVX2",
                "capability_flags": ["-DHAVE_AVX_CPU_DEFINITION", "-DHAVE_AVX2_CPU_DEFINITION"],
                "include": ["/t/include"], "parity": {}}
    flags = kernels.compile_flags(settings, includes=["/tree/release/aten/src"])
    assert flags[:2] == ["-std=c++14", "-D_GLIBCXX_USE_CXX11_ABI=0"]
    assert flags.index("-O3") > flags.index("-O2")  # the build type's optimisation comes last, as CMake's
    assert "-DHAVE_AVX2_CPU_DEFINITION" in flags  # a stub call chooses among the release's own kernels
    assert flags[-2:] == ["-I/tree/release/aten/src", "-I/t/include"]  # a changed header before the wheel's
    assert kernels.release_flags(settings) == ["-DHAVE_AVX2_CPU_DEFINITION", "-DHAVE_AVX_CPU_DEFINITION",
                                               "-DNDEBUG", "-O2", "-O3", "-fopenmp"]


def test_torch_1x_files_are_compiled_with_gnus_extensions_as_its_cmake_did(tmp_path):
    """Seen on a window of history (1.3.0): pr22808's faithful build of QuantizedLinear.cpp failed,
    "exponent has no digits", on the release's own file at its own commit: its hex float needs
    GNU's extensions, which torch 1.x's CMake left on (CMAKE_CXX_STANDARD alone)."""
    import subprocess

    from bugimpact.overrides.release_build import language
    assert language("  - C++ Version: 201402\n", "1.5.1") == "gnu++14"
    assert language("", "1.3.0") == "gnu++14"
    assert language("  - C++ Version: 201703\n", "2.13.0") == "c++17"
    source = tmp_path / "half.cpp"
    source.write_text("float half(unsigned short s) { return 1 + s * 0x1p-10; }\n")  # QuantizedLinear.cpp's
    for std, rc in (("c++14", 1), (language("", "1.3.0"), 0)):
        out = subprocess.run(["g++", f"-std={std}", "-c", str(source), "-o", str(tmp_path / "half.o")],
                             capture_output=True, text=True)
        assert out.returncode == rc and ("exponent has no digits" in out.stderr) == bool(rc), out.stderr


def test_the_host_compiler_is_made_to_compute_as_an_older_release_compiler_did():
    from bugimpact.overrides.release_build import parity
    newer = parity("GCC 7.3", "g++ (Debian 12.2.0-14) 12.2.0")
    assert list(newer) == ["-fno-tree-loop-vectorize"] and "FMA" in newer["-fno-tree-loop-vectorize"]
    assert parity("GCC 7.3", "g++ (Debian 12.2.0-14) 12.2.0 (switches)") == newer  # a wrapper's words after it
    assert parity("GCC 9.3", "g++ (Debian 12.2.0-14) 12.2.0") == {}  # a release of GCC 8 or newer
    assert parity("GCC 7.3", "gcc (GCC) 7.5.0") == {}  # a host as old as the release's
    assert parity("GCC 7.3", "Debian clang version 14.0.6") == {}  # another vendor: no rule known
    assert parity("", "g++ 12.2.0") == {}  # a release that does not say


# a float sum of squares, as torch 1.4's cdist kernel sums one distance (``tdist_calc``)
SUM_OF_SQUARES = """
extern "C" float squares(const float* a, const float* b, int m) {
  float agg = 0;
  for (int x = 0; x < m; x++) { float d = a[x] - b[x]; agg = agg + d * d; }
  return agg;
}
extern "C" float fused(const float* a, const float* b, int m) {
  float agg = 0;
  for (int x = 0; x < m; x++) { float d = a[x] - b[x]; agg = __builtin_fmaf(d, d, agg); }
  return agg;
}
"""


def test_the_parity_flag_makes_the_host_compiler_fuse_a_float_sum_as_gcc_7_did(tmp_path):
    """At torch 1.4's flags (-O3 -mavx2 -mfma) GCC 7.3 compiled this loop to one FMA per element;
    GCC 8 and newer vectorize it in order and multiply apart, which rounds differently: the
    parity flag gives the fused sum back."""
    import ctypes
    import random
    import subprocess

    from bugimpact.overrides.release_build import compiler, parity
    cxx, version = compiler()
    flag = list(parity("GCC 7.3", version))
    if not flag:
        pytest.skip(f"the host's compiler ({version}) is no GCC of 8 or newer")
    (tmp_path / "sum.cpp").write_text(SUM_OF_SQUARES)
    libraries = {}
    for name, extra in (("plain", []), ("parity", flag)):
        library = tmp_path / f"{name}.so"
        subprocess.run([cxx, "-O3", "-mavx2", "-mfma", "-fPIC", "-shared", *extra, str(tmp_path / "sum.cpp"),
                        "-o", str(library)], check=True)
        libraries[name] = ctypes.CDLL(str(library))
        for function in ("squares", "fused"):
            getattr(libraries[name], function).restype = ctypes.c_float
    rng, differ = random.Random(0), 0
    for _ in range(200):
        m = 16
        a, b = ((ctypes.c_float * m)(*[rng.gauss(0, 1) for _ in range(m)]) for _ in range(2))
        fused = libraries["parity"].fused(a, b, m)
        assert libraries["parity"].squares(a, b, m) == fused  # one FMA per element, as GCC 7.3's
        differ += libraries["plain"].squares(a, b, m) != fused
    assert differ > 0  # without it, the same source sums otherwise


# --- the release's own source ---------------------------------------------------------------------

KERNEL = b'#include <ATen/ATen.h>\n#include <ATen/native/utils/ParamUtils.h>\n#include "nnpack.h"\n#include <vector>\nint f();\n'
PARAMS = b"#pragma once\n#include <ATen/native/Helper.h>\n"


def test_the_headers_a_rebuilt_file_needs_that_the_wheel_lacks_come_from_the_source_or_a_named_stand_in():
    from bugimpact.overrides.release_source import closure
    tree = {"aten/src/ATen/native/Convolution.cpp": KERNEL, "aten/src/ATen/native/utils/ParamUtils.h": PARAMS,
            "aten/src/ATen/native/Helper.h": b"int h();\n"}
    includes, standins = closure(tree.get, ["aten/src/ATen/native/Convolution.cpp"], {"ATen/ATen.h"})
    assert includes == {"ATen/native/utils/ParamUtils.h": PARAMS, "ATen/native/Helper.h": b"int h();\n"}
    assert standins == ["nnpack.h"]  # in no tree (a submodule's); <vector> is the compiler's
    # pr21213 on 1.3.0: THNN.h (not in the wheel) includes <THGenerateFloatTypes.h> by TH's own
    # include folder; a stand-in left accreal undeclared in the release's own init.cpp
    generate = b"#include <TH/THGenerateFloatType.h>\n"
    th = {"aten/src/THNN/init.cpp": b"#include <THNN/THNN.h>\n",
          "aten/src/THNN/THNN.h": b"#include <THNN/generic/THNN.h>\n#include <THGenerateFloatTypes.h>\n",
          "aten/src/TH/THGenerateFloatTypes.h": generate}
    includes, standins = closure(th.get, ["aten/src/THNN/init.cpp"], {"THNN/generic/THNN.h", "TH/THGenerateFloatType.h"})
    assert includes == {"THNN/THNN.h": th["aten/src/THNN/THNN.h"], "THGenerateFloatTypes.h": generate} and standins == []


def test_a_submodules_header_is_read_at_the_commit_the_release_pins_from_a_clone_of_it(tmp_path):
    """Seen on a window of history (1.3.0): pr25076's and pr19000's Distributions.cpp call
    ``cpuinfo_initialize``, pr22808's QuantizedLinear.cpp names fbgemm's namespace; their headers
    are submodules' (third_party/cpuinfo, third_party/fbgemm), which a clone of the framework holds
    as a commit alone, so each was an empty stand-in and the release's own file failed to compile.
    Given a clone of the submodule, the header is read at the commit the release's tree pins, from
    its include/ folder, as the release's build had it (not the clone's newest)."""
    from conftest import git

    from bugimpact.overrides.clone_tree import CloneTree, open_tree
    from bugimpact.overrides.release_source import closure
    cpuinfo = tmp_path / "cpuinfo"
    (cpuinfo / "include").mkdir(parents=True)
    git(tmp_path, "init", "-q", str(cpuinfo))
    pinned_header = b"#pragma once\nbool cpuinfo_initialize(void);\n"
    (cpuinfo / "include/cpuinfo.h").write_bytes(pinned_header)
    git(cpuinfo, "add", "-A")
    git(cpuinfo, "commit", "-qm", "the pinned one")
    pinned = git(cpuinfo, "rev-parse", "HEAD").strip()
    (cpuinfo / "include/cpuinfo.h").write_bytes(b"#pragma once\nbool cpuinfo_initialize(int later);\n")
    git(cpuinfo, "commit", "-qam", "a later one")
    framework = tmp_path / "framework"
    (framework / "aten/src/ATen/native").mkdir(parents=True)
    git(tmp_path, "init", "-q", str(framework))
    op = "aten/src/ATen/native/Distributions.cpp"
    (framework / op).write_bytes(b"#include <cpuinfo.h>\nbool f() { return cpuinfo_initialize(); }\n")
    git(framework, "add", "-A")
    git(framework, "update-index", "--add", "--cacheinfo", f"160000,{pinned},third_party/cpuinfo")
    git(framework, "commit", "-qm", "the release")
    release = git(framework, "rev-parse", "HEAD").strip()
    without = CloneTree(str(framework), release)
    assert closure(without.read_bytes, [op], set(), without.include_roots) == ({}, ["cpuinfo.h"])
    tree = CloneTree(str(framework), release, submodules={"third_party/cpuinfo": str(cpuinfo)})
    assert closure(tree.read_bytes, [op], set(), tree.include_roots) == ({"cpuinfo.h": pinned_header}, [])
    # the runtime step opens the tree again from the manifest, with its submodules
    assert open_tree(tree.where()).read_bytes("third_party/cpuinfo/include/cpuinfo.h") == pinned_header
    assert tree.read_bytes("third_party/cpuinfo/include/absent.h") is None


def test_a_support_file_is_one_the_release_compiles_not_a_generators_template(tmp_path):
    """Seen on the 1.3.0 window: pr19000's support build compiled ATen's templates/RegisterCPU.cpp
    (its ``${...}`` placeholders: "'$' does not name a type"), which names a function the rebuilt
    file needs; the generators read it, the release never compiles it."""
    from conftest import git

    from bugimpact.overrides.build import _defining_files
    from bugimpact.overrides.clone_tree import CloneTree
    repo = tmp_path / "framework"
    (repo / "aten/src/ATen/templates").mkdir(parents=True)
    git(tmp_path, "init", "-q", str(repo))
    (repo / "aten/src/ATen/templates/RegisterCPU.cpp").write_bytes(b"${includes}\nvoid helper() {}\n")
    (repo / "aten/src/ATen/Helper.cpp").write_bytes(b"void helper() {}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the release")
    tree = CloneTree(str(repo), git(repo, "rev-parse", "HEAD").strip())
    assert list(_defining_files(tree, ["helper()"], set())) == ["aten/src/ATen/Helper.cpp"]


def kernel_fix(tmp_path):
    """A git repository holding a release tag, and the fix's diff against it."""
    from conftest import git
    repo = tmp_path / "framework"
    (repo / "aten/src/ATen/native/utils").mkdir(parents=True)
    git(tmp_path, "init", "-q", str(repo))
    (repo / "aten/src/ATen/native/Convolution.cpp").write_bytes(KERNEL + b"int g() { return 1; }\n")
    (repo / "aten/src/ATen/native/utils/ParamUtils.h").write_bytes(b"#pragma once\n")
    (repo / "aten/src/ATen/native/native_functions.yaml").write_bytes(NATIVE_FUNCTIONS)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "release")
    git(repo, "tag", "v9.9.0")
    (repo / "aten/src/ATen/native/Convolution.cpp").write_bytes(KERNEL + b"int g() { return 2; }\n")
    diff = git(repo, "diff") + "\n"
    return repo, diff


def release_of(version, headers=(), sha256=""):
    """A release as the source finder sees it: its version, the headers its wheel ships and its
    wheel's sha256."""
    from bugimpact.overrides.release_source import Release
    return Release(version, "", sha256, {name: b"" for name in headers}, "")


def find(sources, arm, version, paths, headers, tmp_path, sha256=""):
    from bugimpact.overrides import release_source
    from bugimpact.overrides.arm import Fix
    return release_source.find(sources, arm, release_of(version, headers, sha256), paths, Fix([]),
                               tmp_path / "rec.json")


def test_the_release_source_comes_from_a_clone_at_the_releases_tag_before_anything_else(tmp_path):
    repo, _ = kernel_fix(tmp_path)
    found = find({"fix_clone": str(repo)}, {}, "9.9.0", ["aten/src/ATen/native/Convolution.cpp"], {"ATen/ATen.h"},
                 tmp_path)
    assert not found.reconstructed and found.origin == f"clone {repo} at tag v9.9.0"
    assert found.files["aten/src/ATen/native/Convolution.cpp"].endswith(b"return 1; }\n")
    assert found.includes == {"ATen/native/utils/ParamUtils.h": b"#pragma once\n"}
    assert found.standins == ["nnpack.h"] and "aten/src/ATen/native/native_functions.yaml" in found.yamls
    # no tag v9.9.1: its branch point is searched, by the headers its wheel ships, which this
    # history does not hold
    import zipfile
    wheel = tmp_path / "torch-9.9.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("torch/include/ATen/native/utils/ParamUtils.h", "#pragma once\nint other();\n")
    from bugimpact.overrides import release_source
    from bugimpact.overrides.arm import Fix
    with pytest.raises(LookupError, match=r"holds more than 0 of the 1 headers torch-9.9.1-py3-none-any.whl ships: "
                                          r"not the history the release was cut from"):
        release_source.find({"fix_clone": str(repo)}, {}, release_source.Release.of_wheel(wheel, "9.9.1"),
                            ["aten/src/ATen/native/Convolution.cpp"], Fix([]), tmp_path / "rec.json")


def test_the_release_source_comes_from_githubs_files_at_the_tag(httpserver, tmp_path):
    import base64

    served = {"aten/src/ATen/native/Convolution.cpp": KERNEL, "aten/src/ATen/native/utils/ParamUtils.h": PARAMS,
              "aten/src/ATen/native/Helper.h": b"int h();\n"}
    for path, data in served.items():
        httpserver.expect_request(f"/repos/pytorch/pytorch/contents/{path}", query_string="ref=v9.9.0") \
            .respond_with_json({"encoding": "base64", "content": base64.b64encode(data).decode()})
    import re
    httpserver.expect_request(re.compile("/repos/.*")).respond_with_data("", status=404)  # nothing else
    found = find({"fix_api": True, "api_url": httpserver.url_for(""), "repo": "pytorch/pytorch"},
                 {}, "9.9.0", ["aten/src/ATen/native/Convolution.cpp"], {"ATen/ATen.h"}, tmp_path)
    assert found.origin == "GitHub pytorch/pytorch at tag v9.9.0" and not found.reconstructed
    assert found.files == {"aten/src/ATen/native/Convolution.cpp": KERNEL}
    assert set(found.includes) == {"ATen/native/utils/ParamUtils.h", "ATen/native/Helper.h"}


def test_a_shipped_reconstruction_says_it_is_one(tmp_path):
    from bugimpact.overrides import release_source as release_files
    made_for = {"release": "9.9.0", "wheel_sha256": "a" * 64}
    source = release_files.ReleaseSource("reconstructed: a branch point", True,
                                         {"aten/src/ATen/native/Convolution.cpp": KERNEL},
                                         {"ATen/native/utils/ParamUtils.h": PARAMS}, ["nnpack.h"],
                                         {"tools/autograd/derivatives.yaml": b"[]\n"},
                                         {"branch_point": "c" * 40, **made_for})
    patch = tmp_path / "pr1.diff"
    patch.write_text("")
    archive = release_files.archive_of(patch)
    release_files.write_archive(archive, source)
    conv = ["aten/src/ATen/native/Convolution.cpp"]
    found = find({}, {"patch": str(patch)}, "9.9.0", conv, set(), tmp_path, "a" * 64)
    assert found.reconstructed and found.origin == f"reconstructed: a branch point (shipped: {archive})"
    assert found.describe()["branch_point"] == "c" * 40 and found.standins == ["nnpack.h"]
    assert found.files == source.files and found.includes == source.includes
    with pytest.raises(LookupError, match="does not hold aten/src/ATen/native/Loss.cpp"):
        find({}, {"patch": str(patch)}, "9.9.0", ["aten/src/ATen/native/Loss.cpp"], set(), tmp_path, "a" * 64)


def test_a_shipped_release_source_serves_only_the_release_it_was_made_for(tmp_path):
    """Seen: with a study's release changed from 1.5.1 to 1.5.0, the 1.5.1 archive shipped beside
    pr38674's patch was read as 1.5.0's source; the fix (not in 1.5.0) was taken as there already,
    both arms ran the bug, and the check said verified. An archive names the release and wheel it
    was made for (another wheel of that release, for another Python, ships the same headers)."""
    from bugimpact.overrides import release_source as release_files
    headers = {"ATen/ATen.h"}
    made_for = release_of("1.5.1", headers, "b" * 64).identity
    patch = tmp_path / "pr1.diff"
    patch.write_text("")
    archive = release_files.archive_of(patch)
    release_files.write_archive(archive, release_files.ReleaseSource(
        "reconstructed: 1.5.1's branch point", True, {"aten/src/ATen/native/Convolution.cpp": KERNEL},
        facts={"branch_point": "c" * 40, **made_for}))
    conv = ["aten/src/ATen/native/Convolution.cpp"]
    assert find({}, {"patch": str(patch)}, "1.5.1", conv, headers, tmp_path, "b" * 64).files  # its own wheel
    assert find({}, {"patch": str(patch)}, "1.5.1", conv, headers, tmp_path, "d" * 64).files  # same headers
    with pytest.raises(LookupError) as other_release:
        find({}, {"patch": str(patch)}, "1.5.0", conv, headers, tmp_path, "b" * 64)
    assert f"{archive} is not torch 1.5.0's: it is torch 1.5.1's source, not torch 1.5.0's" in str(other_release.value)
    with pytest.raises(LookupError, match="it was made from another wheel of torch 1.5.1 .sha256 bbbbbbbbbbbb."):
        find({}, {"patch": str(patch)}, "1.5.1", conv, {"ATen/Other.h"}, tmp_path, "d" * 64)
    release_files.write_archive(archive, release_files.ReleaseSource("made before archives named theirs", True,
                                                                     {conv[0]: KERNEL}))
    with pytest.raises(LookupError, match="it names no release it was made for"):
        find({}, {"patch": str(patch)}, "1.5.1", conv, headers, tmp_path, "b" * 64)


def test_every_shipped_kernel_fix_has_its_release_source_and_it_holds_the_files_it_rebuilds(tmp_path):
    from conftest import ROOT

    from bugimpact.artifacts import onefix
    from bugimpact.io import read_csv
    from bugimpact.overrides import release_source as release_files
    rows = [r for r in read_csv(ROOT / "data/known_commits/pytorch.csv")[1] if r["onefix"].startswith("yes: kernels")]
    shipped = [r for r in rows if release_files.archive_of(ROOT / "data/patches/pytorch" / f"{r['id']}.diff").exists()]
    # not shipped: a fix whose generated code is made from the release's tree (a clone's), one that
    # builds on changes 1.5.1 lacks (bin/release-sources names the commits), one of 1.6.0, whose cut
    # the mirror does not hold (its reconstruction matches 1116 of the wheel's 1308 headers), and
    # two of TH's generic files, which an archive holds as its unit's include, not as a file
    assert len(rows) == 17 and {r["id"] for r in rows} - {r["id"] for r in shipped} == {
        "study-pr32062", "pr37355", "study-pr37214", "pr27712", "pr28613"}
    for row in shipped:
        patch = ROOT / "data/patches/pytorch" / f"{row['id']}.diff"
        _, _, kernels = onefix.isolate(patch.read_text())
        # each names the wheel it was made for, of its row's release
        made_for = release_files.read_archive(release_files.archive_of(patch)).facts["wheel_sha256"]
        found = find({}, {"patch": str(patch)}, row["release"].lstrip("v"), kernels.built, set(), tmp_path, made_for)
        facts = found.describe()
        assert found.reconstructed and facts["release"] == row["release"].lstrip("v"), row["id"]
        assert facts["files_same_in_ties"] and facts["headers_matched"][0] > 0.9 * facts["headers_matched"][1]
        assert set(release_files.YAMLS) <= set(found.yamls)


# --- a fix with Python and kernel changes: both in one arm ------------------------------------------

def mixed_fix(tmp_path, kernel_in_release=True):
    """A fix that changes torch/x.py and an op file; a wheel-shaped release holding x.py with the
    fix, and the release's source of the op file beside the patch (with or without the fix)."""
    import zipfile

    from bugimpact.overrides import release_source as release_files
    old_py, new_py = "def f(x):\n    return x + 1\n", "def f(x):\n    return x + 2\n"
    old_cc, new_cc = b"int g() { return 1; }\n", b"int g() { return 2; }\n"
    patch = tmp_path / "pr9.diff"
    patch.write_text(
        "diff --git a/torch/x.py b/torch/x.py\n--- a/torch/x.py\n+++ b/torch/x.py\n"
        "@@ -1,2 +1,2 @@\n def f(x):\n-    return x + 1\n+    return x + 2\n"
        "diff --git a/aten/src/ATen/native/Foo.cpp b/aten/src/ATen/native/Foo.cpp\n"
        "--- a/aten/src/ATen/native/Foo.cpp\n+++ b/aten/src/ATen/native/Foo.cpp\n"
        "@@ -1 +1 @@\n-int g() { return 1; }\n+int g() { return 2; }\n")
    wheel = tmp_path / "torch-9.9.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("torch/x.py", new_py)
        archive.writestr("torch/include/ATen/ATen.h", "")
    release_files.write_archive(release_files.archive_of(patch), release_files.ReleaseSource(
        "reconstructed: for a test", True, {"aten/src/ATen/native/Foo.cpp": new_cc if kernel_in_release else old_cc},
        yamls={p: b"[]\n" for p in release_files.YAMLS},
        facts=release_files.Release.of_wheel(wheel, "9.9.0").identity))
    return patch, wheel, old_py, old_cc


def test_a_fix_with_python_and_kernel_changes_gets_both_in_one_arm(tmp_path):
    from bugimpact import steps
    patch, wheel, old_py, old_cc = mixed_fix(tmp_path)
    config = config_with(**{"artifacts.wheel_cache": str(tmp_path / "cache")})
    spec = {"source": "onefix", "arm": "buggy", "patch": str(patch), "release": {"source": "wheel", "wheel": str(wheel)}}
    manifest = steps.artifact(steps.artifact_sources(config), spec, tmp_path / "buggy" / "manifest.json")
    assert manifest["status"] == "ok", manifest
    assert manifest["fix_in_release"] is True and manifest["apply"] == "reverse"
    assert (Path(manifest["overlay_dir"]) / "torch" / "x.py").read_text() == old_py  # its Python half
    kernels = manifest["kernels"]  # and its kernel half, in the same arm
    assert kernels["rebuild"] == ["aten/src/ATen/native/Foo.cpp"] and kernels["source"]["reconstructed"]
    assert (Path(kernels["tree"]) / "arm" / "aten/src/ATen/native/Foo.cpp").read_bytes() == old_cc
    assert manifest["files_changed"] == ["torch/x.py", "aten/src/ATen/native/Foo.cpp"]
    release = steps.artifact(steps.artifact_sources(config), dict(spec, arm="corrected"),
                             tmp_path / "corrected" / "manifest.json")
    assert release["apply"] is None and release["kernels"] is None and release["overlay"] == {}


def test_a_fix_whose_python_and_kernel_halves_disagree_about_the_release_is_refused(tmp_path):
    from bugimpact import steps
    patch, wheel, _, _ = mixed_fix(tmp_path, kernel_in_release=False)
    config = config_with(**{"artifacts.wheel_cache": str(tmp_path / "cache")})
    spec = {"source": "onefix", "arm": "buggy", "patch": str(patch), "release": {"source": "wheel", "wheel": str(wheel)}}
    manifest = steps.artifact(steps.artifact_sources(config), spec, tmp_path / "m.json")
    assert manifest["status"] == "failed" and manifest["failure_class"] == "refused"
    assert "disagree on whether the release holds it" in manifest["error"]


def test_a_shipped_release_source_cut_short_is_a_corrupt_file_named_in_the_manifest_the_runtime_and_the_log(
        tmp_path, caplog):
    """Seen: pr38674.release.tar.xz cut to half gave "artifact failed (download): Compressed file
    ended before the end-of-stream marker was reached", naming no file, in the wrong class."""
    from bugimpact import steps
    from bugimpact.overrides import release_source as release_files
    patch, wheel, _, _ = mixed_fix(tmp_path)
    archive = release_files.archive_of(patch)
    archive.write_bytes(archive.read_bytes()[:archive.stat().st_size // 2])
    config = config_with(**{"artifacts.wheel_cache": str(tmp_path / "cache")})
    spec = {"source": "onefix", "arm": "buggy", "patch": str(patch), "release": {"source": "wheel", "wheel": str(wheel)}}
    manifest = steps.artifact(steps.artifact_sources(config), spec, tmp_path / "m" / "manifest.json")
    assert manifest["status"] == "failed" and manifest["failure_class"] == "corrupt file"
    assert manifest["file"] == str(archive) and "cut short" in manifest["error"]
    assert f"artifact onefix failed (corrupt file): {archive} does not read" in caplog.text
    runtime = steps.runtime("venv", tmp_path / "m" / "manifest.json", tmp_path / "r" / "runtime.json")
    assert runtime["reason"].startswith(f"artifact failed (corrupt file): {archive} does not read (")
    from bugimpact.recovery import of_artifacts
    [finding] = of_artifacts([tmp_path / "m" / "manifest.json"])
    assert finding.state == "failed" and str(archive) in finding.why


def test_an_unforeseen_exception_making_an_artifact_is_an_internal_error_with_its_traceback(tmp_path, monkeypatch):
    """Seen in review: any exception making an artifact was recorded as `download`, without its
    traceback."""
    from bugimpact import steps
    from bugimpact.artifacts import onefix
    patch, wheel, _, _ = mixed_fix(tmp_path)
    monkeypatch.setattr(onefix, "make_overlay", lambda *a, **k: {}["no such key"])
    config = config_with(**{"artifacts.wheel_cache": str(tmp_path / "cache")})
    spec = {"source": "onefix", "arm": "buggy", "patch": str(patch), "release": {"source": "wheel", "wheel": str(wheel)}}
    manifest = steps.artifact(steps.artifact_sources(config), spec, tmp_path / "m.json")
    assert manifest["failure_class"] == "internal error" and manifest["error"] == "KeyError: 'no such key'"
    assert "Traceback (most recent call last)" in manifest["traceback"] and "make_overlay" in manifest["traceback"]


def test_a_faithful_compile_failing_on_a_stand_in_header_names_that_header_not_the_source():
    """pr25076 on torch 1.4.0: Distributions.cpp includes cpuinfo.h (a submodule's), which neither
    the wheel nor the source holds; its empty stand-in leaves cpuinfo_initialize undeclared, in
    the release's own file too. The cause is the header, not a source that is not the release's."""
    from bugimpact.overrides.release_build import NOT_AS_BUILT, NOT_THE_RELEASE, stand_in_named
    failed = ("compiling aten/src/ATen/native/Distributions.cpp failed for the release's own file too (the faithful "
              "build): Distributions.cpp:169:7: error: \u2018cpuinfo_initialize\u2019 was not declared in this scope: "
              + NOT_THE_RELEASE)
    named = stand_in_named(failed, ["cpuinfo.h", "nnpack.h"])
    assert "cpuinfo_initialize is cpuinfo.h's, a third-party header" in named and NOT_THE_RELEASE not in named
    assert cause_of(named) == "a third-party header"
    assert stand_in_named(failed, ["nnpack.h"]) == failed  # no stand-in declares it: the source is named
    assert cause_of(failed) == "the reconstruction is not the release there"
    # the release's own commit (pr22808 on 1.3.0): not a reconstruction, the host's compile is named
    own = failed.replace(NOT_THE_RELEASE, NOT_AS_BUILT)
    assert cause_of(own) == "the host does not compile the release's own file"
    assert NOT_AS_BUILT not in stand_in_named(own, ["cpuinfo.h"])
    # pr22808 on 1.3.0: QuantizedLinear.cpp, under the release's USE_FBGEMM, names fbgemm's namespace
    fbgemm = own.replace("\u2018cpuinfo_initialize\u2019", "\u2018fbgemm\u2019")
    assert "fbgemm is fbgemm/Fbgemm.h's, a third-party header" in stand_in_named(fbgemm, ["fbgemm/Fbgemm.h"])
    assert stand_in_named(fbgemm, ["nnpack.h"]) == fbgemm
