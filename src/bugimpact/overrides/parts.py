"""What a fix changes in compiled code, by the part of the framework each file belongs to
(``framework.paths.part_of``): which parts a release wheel can take as an override library
(``REBUILT_PARTS``), and, for the others, the part named in the refusal.

A compiled fix is isolated on a release wheel by rebuilding the changed files as the release has
them (with the fix applied or reversed) and registering their operators over the release's. That
works for files that define operators: ATen's native op files (``op``). Their CPU DispatchStub
kernels (``stub``) also need the rebuilt kernel put into the release's stub object, not built yet;
CUDA kernels (``cuda``) a CUDA compiler matching the wheel's CUDA (designed the same way, not
driven yet: a CPU fix's CUDA half is left out of CPU runs, a CUDA-only fix is refused). Everything
else is compiled into code an override cannot replace (code generation, TorchScript, distributed,
the C++ frontend, headers inlined into many files, infrastructure, legacy TH): refused, its part
named, and the docker source build stays its route. A change to comments only changes no binary
and is left out.
"""
from dataclasses import dataclass

from ..framework.paths import part_of


class Refused(Exception):
    """The fix cannot be isolated on a release wheel; the message says why."""


REBUILT_PARTS = ("op",)  # built on the host's compiler, for CPU runs
# Why each other part cannot be taken, in a refusal's words.
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
# A fix's part is the first of its files' parts in this order: the hardest decides, and a kernel fix
# with a CUDA half is a CPU kernel fix whose CUDA half only a CUDA compiler builds.
ORDER = ("codegen", "jit", "dist", "cppapi", "header", "infra", "th", "other", "stub", "op", "cuda")
@dataclass(frozen=True)
class Kernels:
    """The compiled part of a fix an override library takes: its part (``fix_part``), its files
    by part (a CUDA half among them, built only by a CUDA compiler) and their diff sections."""
    part: str
    files: dict
    diff: str

    @property
    def built(self):
        """The changed files an override rebuilds on the CPU (op and stub files, their headers)."""
        return sorted(p for k in REBUILT_PARTS for p in self.files.get(k, []))


def only_comments(section):
    """Whether a file's diff section changes nothing but comments and blank lines (C-style)."""
    changed = [line[1:].strip() for line in section.splitlines()
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    return bool(changed) and all(not text or text.startswith(("//", "/*", "*", "*/")) for text in changed)


def fix_part(paths):
    """The part of a whole fix from its compiled files' parts (``ORDER``), and the files of each."""
    kinds = {}
    for path in paths:
        kinds.setdefault(part_of(path), []).append(path)
    return next(k for k in ORDER if k in kinds), kinds


def refusal(fix, kinds, cuda_compiler=False):
    """Why a fix of part ``fix`` (``fix_part``) cannot be isolated on a release wheel, naming its
    part and files, or "" when its kernels can be built (a CUDA half too where ``cuda_compiler``)."""
    if fix in REBUILT_PARTS or (fix == "cuda" and cuda_compiler):
        return ""
    files = kinds[fix]
    return (f"{fix}: {WHY[fix]} ({', '.join(files[:3])}{', ...' if len(files) > 3 else ''})")
