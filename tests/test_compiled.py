"""Compiled fixes isolated on a release wheel: what each kind of compiled change is, and which
kinds a release wheel can take as an override library."""
import pytest

from bugimpact.artifacts import compiled, onefix

# The compiled fixes of data/known_commits/pytorch.csv whose changed files were listed whole when
# they were classified by hand (shared/reference/compiled-fixes.md), with that kind. Two differ on
# purpose: pr28260's QuantizedOpKernels.cpp is a DispatchStub kernel file (so the fix is ``stub``),
# and pr29609's Quantizer.cpp change is a comment, which changes no binary (its diff is tested
# below).
BY_HAND = [
    ("study-pr31167", "codegen", ['aten/src/ATen/native/Distance.cpp', 'aten/src/ATen/native/native_functions.yaml', 'tools/autograd/derivatives.yaml']),
    ("study-pr31552", "jit", ['torch/csrc/jit/passes/onnx/prepare_inplace_ops_for_onnx.cpp']),
    ("study-pr31584", "other", ['android/pytorch_android/src/androidTest/java/org/pytorch/PytorchTestBase.java', 'android/pytorch_android/src/main/cpp/pytorch_jni_common.cpp', 'android/pytorch_android/test_asset.jit']),
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
    ("pr29231", "header", ['aten/src/THC/THCAtomics.cuh']),
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
    assert compiled.fix_kind(code)[0] == expected, fix


def test_a_kernel_fix_with_a_cuda_half_is_a_cpu_kernel_fix_until_a_cuda_compiler_builds_it():
    kind, kinds = compiled.fix_kind(["aten/src/ATen/native/cpu/BinaryOpsKernel.cpp",
                                     "aten/src/ATen/native/cuda/BinaryCompareKernel.cu"])
    assert kind == "stub" and kinds["cuda"] == ["aten/src/ATen/native/cuda/BinaryCompareKernel.cu"]
    assert compiled.refusal(kind, kinds) == ""
    only_cuda = compiled.fix_kind(["aten/src/ATen/native/cuda/LossCTC.cu"])
    assert compiled.refusal(*only_cuda).startswith("cuda: CUDA kernels, which only a CUDA compiler")
    assert compiled.refusal(*only_cuda, cuda_compiler=True) == ""
    jit = compiled.fix_kind(["torch/csrc/jit/ir.cpp", "aten/src/ATen/native/Loss.cpp"])
    assert compiled.refusal(*jit) == "jit: TorchScript (torch/csrc/jit/ir.cpp)"


def test_a_change_to_comments_only_changes_no_binary():
    comment = ("diff --git a/aten/src/ATen/quantized/Quantizer.cpp b/aten/src/ATen/quantized/Quantizer.cpp\n"
               "--- a/aten/src/ATen/quantized/Quantizer.cpp\n+++ b/aten/src/ATen/quantized/Quantizer.cpp\n"
               "@@ -1,3 +1,3 @@\n int x;\n-// the old note\n+// the new note\n+\n int y;\n")
    assert compiled.only_comments(comment)
    assert not compiled.only_comments(comment.replace("+// the new note", "+int z;"))
