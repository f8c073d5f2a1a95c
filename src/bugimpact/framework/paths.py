"""What a file of the framework's tree is, from its path alone: a file of its Python package, one
it does not ship (tests, docs, CI), its C++ frontend, a CUDA source, or the C++ of the rest."""
import re

PYTHON_PACKAGE = "torch/"
NOT_SHIPPED = re.compile(r"^(test|docs|benchmarks|scripts|\.github|\.circleci|\.jenkins|\.ci|"
                         r"android|ios|binaries)/|^[^/]+\.(md|rst|txt)$|^\.[^/]+$|(^|/)README[^/]*$|"
                         r"^(aten|c10|caffe2)/(.*/)?tests?/|_test\.(cc|cpp)$")
# The C++ frontend (libtorch's torch::nn, optim, data, serialize): a Python workload never calls it.
FRONTEND = re.compile(r"^torch/csrc/api/(src|include/torch/(nn|optim|data|serialize|detail))/|"
                      r"^torch/csrc/api/include/torch/(expanding_array|ordered_dict|enum|arg|"
                      r"serialize)\.h$")
CUDA = re.compile(r"\.(cu|cuh)$|(^|/)(cuda|cudnn|miopen|hip|THC|THCUNN|THCS|nccl)/|"
                  r"(^|/)[^/]*(cudnn|miopen|CUDA|Cuda|nccl)[^/]*$")


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
    if path.startswith(("tools/", "aten/src/ATen/templates", "torchgen/")) or \
            re.search(r"(^gen_|codegen)", path.split("/")[-1]):
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
