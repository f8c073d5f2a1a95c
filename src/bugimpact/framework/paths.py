"""What a file of the framework's tree is, from its path alone: a file of its Python package, one
it does not ship (tests, docs, CI), its C++ frontend, a CUDA source, or the C++ of the rest
(``kind_of``, for reach); and, for compiled code, the part of the framework it belongs to
(``part_of``: an op file, a CPU stub kernel, TH, infrastructure, ..., for a one-fix arm)."""
import re

PYTHON_PACKAGE = "torch/"
# the C++ tests of ATen, c10 and caffe2: built into test binaries, never into the libraries
CPP_TESTS = re.compile(r"^(aten|c10|caffe2)/(.*/)?tests?/|_test\.(cc|cpp)$")
# what no wheel ships or runs: tests, docs, CI, the mobile and binary trees, the type stubs'
# generator, the mobile build's analyzer, the root's documents and dot files, READMEs anywhere,
# the Bazel and Buck build files (a wheel is built by CMake) (reach's ``not_shipped``, the one-fix
# arm's too)
NOT_SHIPPED = re.compile(r"^(test|docs|benchmarks|scripts|\.github|\.circleci|\.jenkins|\.ci|\.devcontainer|"
                         r"functorch/docs|android|ios|binaries|tools/pyi|tools/code_analyzer)/|^(?!CMakeLists\.txt$)[^/]+\.(md|rst|txt)$|"
                         r"^(LICENSE|NOTICE|CODEOWNERS)[^/]*$|^\.[^/]+$|(^|/)README[^/]*$|\.bzl$|(^|/)(BUILD\.bazel|BUCK|TARGETS)$|"
                         + CPP_TESTS.pattern)
# The C++ frontend (libtorch's torch::nn, optim, data, serialize): a Python workload never calls it.
FRONTEND = re.compile(r"^torch/csrc/api/(src|include/torch/(nn|optim|data|serialize|detail))/|"
                      r"^torch/csrc/api/include/torch/(expanding_array|ordered_dict|enum|arg|"
                      r"serialize)\.h$")
# CUDA (and ROCm) sources, which a CPU build never compiles: reach's "not reached on cpu", a one-fix
# arm's CUDA half, the part of a compiled file. The hooks' interfaces are not: every build compiles
# them, and a CPU run calls them (``at::hasCUDA``).
CUDA = re.compile(r"\.(cu|cuh)$|(^|/)(cuda|cudnn|miopen|hip|THC|THCUNN|THCS|nccl)(/|$)|"
                  r"(^|/)(?!(CUDA|HIP)HooksInterface)[^/]*((?i:cudnn|miopen|nccl)|CUDA|Cuda)[^/]*$")


def kind_of(path):
    """``python`` (a file of the package), ``not_shipped``, ``frontend``, ``unknown`` (Python
    outside the package that may be generated into it) or ``cpp``."""
    if path.startswith(PYTHON_PACKAGE) and path.endswith((".py", ".pyi")) and \
            not path.startswith("torch/csrc/"):
        return "python"
    if NOT_SHIPPED.search(path) and not path.startswith("torch/"):
        return "not_shipped"
    if FRONTEND.search(path):
        return "frontend"
    if path.endswith((".py", ".pyi")) and path.startswith(("caffe2/", "tools/")) and \
            not path.startswith(("tools/autograd/", "tools/codegen/", "tools/shared/")):
        return "not_shipped" if path.startswith("tools/") else "unknown"
    return "cpp"


def why_unbounded(path):
    """Why the operator tables cannot bound a change to the C++ file ``path``, in words."""
    if path.startswith("aten/src/TH"):
        return "TH/THNN legacy code, outside the operator tables"
    if part_of(path) == "codegen" or re.search(r"(^gen_|codegen)", path.split("/")[-1]):
        return "code generation, which can change every operator"
    if path.startswith("c10/") or "dispatch" in path.lower():
        return "the dispatcher or core tensor library, used by every operator"
    if path.startswith("torch/csrc/autograd"):
        return "the autograd engine, used by every backward"
    if path.startswith("torch/csrc/jit"):
        return "TorchScript, not bounded by the operator tables"
    if re.search(r"(^|/)(CMakeLists\.txt|setup\.py|[^/]+\.cmake|BUILD[^/]*)$", path):
        return "a build input, which can change every compiled file"
    return "outside ATen's native kernels, which the operator tables do not map"


INFRA_FILES = re.compile(r"^aten/src/ATen/native/(TensorIterator|TensorIteratorReduce|Resize|"
                         r"DispatchStub|TypeProperties)\.(cpp|h)$")
PARTS = (  # (part, pattern), the first match wins
    # the generators, their inputs, and the generated headers 2019-2020's tree also checks in
    ("codegen", re.compile(r"(^|/)(native_functions|derivatives|nn)\.yaml$|\.cwrap$|^tools/|^torchgen/|"
                           r"^aten/src/ATen/(templates|function_wrapper|gen)|"
                           r"^aten/src/ATen/core/(TensorBody|TensorMethods|Tensor)\.h$")),
    ("jit", re.compile(r"^torch/csrc/jit/")),
    ("dist", re.compile(r"^torch/csrc/distributed/|^torch/lib/c10d/|(^|/)nccl[^/]*$|^torch/csrc/cuda/nccl")),
    ("cppapi", re.compile(r"^torch/csrc/api/")),
    ("other", re.compile(r"^(android|ios|binaries|modules|scripts)/")),
    ("cuda", CUDA),  # TH's CUDA half (THC, THCUNN) among them
    ("th", re.compile(r"^aten/src/(TH|THNN)/")),
    ("header", re.compile(r"^aten/src/ATen/cpu/vec256/|^c10/.*\.(h|hpp)$|^aten/src/ATen/core/.*\.h$|"
                          r"^aten/src/ATen/[^/]*\.h$")),
    ("infra", INFRA_FILES),
    ("stub", re.compile(r"^aten/src/ATen/native/(cpu|quantized/cpu/kernels)/[^/]*\.(cpp|h)$")),
    ("op", re.compile(r"^aten/src/ATen/native/.*\.(cpp|h)$")),
    ("infra", re.compile(r".")),  # the rest of what is compiled: ATen's core, torch/csrc, caffe2, c10, the build
)


def part_of(path):
    """The part of the framework one compiled or build file the fix changes belongs to."""
    return next(k for k, pattern in PARTS if pattern.search(path))
