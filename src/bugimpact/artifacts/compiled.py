"""What a fix changes in compiled code, by kind: which kinds a release wheel can take as an
override library (``kernels``), and, for the others, the kind named in the refusal.

A compiled fix is isolated on a release wheel by rebuilding the changed files as the release has
them (with the fix applied or reversed) and registering their operators over the release's. That
works for files that define operators: ATen's native op files (``op``). Their CPU DispatchStub
kernels (``stub``) also need the rebuilt kernel put into the release's stub object, not built yet;
CUDA kernels (``cuda``) a CUDA compiler matching the wheel's CUDA (designed the same way, not
driven yet: a CPU fix's CUDA half is left out of CPU runs, a CUDA-only fix is refused). Everything
else is compiled into code an override cannot replace (code generation, TorchScript, distributed,
the C++ frontend, headers inlined into many files, infrastructure, legacy TH): refused, its kind
named, and the docker source build stays its route. A change to comments only changes no binary
and is left out.
"""
import re
from dataclasses import dataclass

KERNEL_KINDS = ("op",)  # built on the host's compiler, for CPU runs
# Why each other kind cannot be taken, in a refusal's words.
WHY = {
    "stub": "a CPU DispatchStub kernel (native/cpu): putting a rebuilt kernel into the release's "
            "stub is not built yet (op files are)",
    "codegen": "code generation (native_functions.yaml, derivatives.yaml, tools/, the .cwrap "
               "declarations): the release's generated code would have to change",
    "jit": "TorchScript", "dist": "distributed (RPC, c10d, NCCL)",
    "cppapi": "the C++ frontend (torch/csrc/api), which Python does not reach",
    "header": "a shared header inlined into many files (vec256, c10, the dispatcher, TypeCast)",
    "infra": "infrastructure (TensorIterator, thread pools, backend fallbacks, CUDA context, "
             "storage bindings, the build)",
    "th": "legacy TH/THC code behind generated wrappers",
    "other": "code outside the Python package's reach (android, ios, binaries)",
    "cuda": "CUDA kernels, which only a CUDA compiler matching the wheel's CUDA builds (not yet "
            "driven here: a CPU kernel fix's CUDA half is left out of CPU runs)",
}
# A fix's kind is its first kind in this order: the hardest part decides, and a kernel fix with a
# CUDA half is a CPU kernel fix whose CUDA half only a CUDA compiler builds.
ORDER = ("codegen", "jit", "dist", "cppapi", "header", "infra", "th", "other", "stub", "op", "cuda")
INFRA_FILES = re.compile(r"^aten/src/ATen/native/(TensorIterator|TensorIteratorReduce|Resize|"
                         r"DispatchStub|TypeProperties)\.(cpp|h)$")
CUDA_PATH = re.compile(r"\.(cu|cuh)$|(^|/)(cuda|cudnn|miopen|hip)/")
RULES = (  # (kind, pattern), the first match wins
    ("codegen", re.compile(r"(^|/)(native_functions|derivatives)\.yaml$|\.cwrap$|^tools/|^torchgen/|"
                           r"^aten/src/ATen/(templates|function_wrapper|gen)")),
    ("jit", re.compile(r"^torch/csrc/jit/")),
    ("dist", re.compile(r"^torch/csrc/distributed/|^torch/lib/c10d/|(^|/)nccl[^/]*$|^torch/csrc/cuda/nccl")),
    ("cppapi", re.compile(r"^torch/csrc/api/")),
    ("other", re.compile(r"^(android|ios|binaries|modules|scripts)/")),
    ("th", re.compile(r"^aten/src/(TH|THNN|THCUNN)/|^aten/src/THC/generic/|^aten/src/THC/THC[^/]*\.cu$")),
    ("header", re.compile(r"^aten/src/ATen/cpu/vec256/|^c10/.*\.(h|hpp)$|^aten/src/ATen/core/.*\.h$|"
                          r"^aten/src/THC/[^/]*\.(h|cuh)$|^aten/src/ATen/[^/]*\.h$")),
    ("infra", INFRA_FILES),
    ("cuda", re.compile(r"^aten/src/ATen/native/(.*/)?(cuda|cudnn|miopen|hip)/|^aten/src/ATen/native/.*\.(cu|cuh)$")),
    ("stub", re.compile(r"^aten/src/ATen/native/(cpu|quantized/cpu/kernels)/[^/]*\.(cpp|h)$")),
    ("op", re.compile(r"^aten/src/ATen/native/.*\.(cpp|h)$")),
    ("infra", re.compile(r".")),  # the rest of what is compiled: ATen's core, torch/csrc, caffe2, c10, the build
)


@dataclass(frozen=True)
class Kernels:
    """The compiled part of a fix an override library takes: its kind (``fix_kind``), its files
    by kind (a CUDA half among them, built only by a CUDA compiler) and their diff sections."""
    kind: str
    files: dict
    diff: str

    @property
    def built(self):
        """The changed files an override rebuilds on the CPU (op and stub files, their headers)."""
        return sorted(p for k in KERNEL_KINDS for p in self.files.get(k, []))


def kind(path):
    """The kind of one compiled or build file the fix changes."""
    return next(k for k, pattern in RULES if pattern.search(path))


def only_comments(section):
    """Whether a file's diff section changes nothing but comments and blank lines (C-style)."""
    changed = [line[1:].strip() for line in section.splitlines()
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    return bool(changed) and all(not text or text.startswith(("//", "/*", "*", "*/")) for text in changed)


def fix_kind(paths):
    """The kind of a whole fix from its compiled files' kinds (``ORDER``), and the files of each."""
    kinds = {}
    for path in paths:
        kinds.setdefault(kind(path), []).append(path)
    return next(k for k in ORDER if k in kinds), kinds


def refusal(fix, kinds, cuda_compiler=False):
    """Why a fix of kind ``fix`` (``fix_kind``) cannot be isolated on a release wheel, naming its
    kind and files, or "" when its kernels can be built (a CUDA half too where ``cuda_compiler``)."""
    if fix in KERNEL_KINDS or (fix == "cuda" and cuda_compiler):
        return ""
    files = kinds[fix]
    return (f"{fix}: {WHY[fix]} ({', '.join(files[:3])}{', ...' if len(files) > 3 else ''})")
