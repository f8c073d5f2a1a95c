"""A compiled fix's CPU DispatchStub kernels (``native/cpu``) put into the release's stubs: the code
appended to a rebuilt kernel file that stores each kernel it registers into the release's own stub
object when the override library loads, and which stubs a library fills. The release's op code
then reaches the rebuilt kernel through its own stub (1.x: the stub's public CPU pointer)."""
import re
import subprocess

from ..framework.tables import REGISTER
from .release_build import BuildRefused

# What the release's cmake/Codegen.cmake (1.2 to 1.x, gcc) adds to a CPU DispatchStub kernel file
# (``native/cpu``), compiled once per capability: its optimisation, the capability's instruction
# set and the definitions that name the capability (``REGISTER_DISPATCH`` fills that capability's
# pointer); the faithful build's training, bit for bit, is what says they are the release's.
KERNEL_FLAGS = {"DEFAULT": ["-O3"], "AVX": ["-O3", "-mavx"],
                "AVX2": ["-O3", "-mavx2", "-mfma", "-mno-avx256-split-unaligned-load",
                         "-mno-avx256-split-unaligned-store"]}


def kernel_flags(settings):
    """The flags the release compiled its stub kernels for the capability it chooses here with
    (``settings['capability']``), or ``BuildRefused`` naming why none are known."""
    if settings["major"] >= 2:
        raise BuildRefused(f"torch {settings['version']}: its DispatchStub keeps the CPU kernel pointer "
                           "private (DispatchStubImpl); a rebuilt stub kernel is put in on 1.x only, "
                           "through the stub's public cpu_dispatch_ptr")
    capability = settings["capability"]
    if capability not in KERNEL_FLAGS:
        raise BuildRefused(f"torch {settings['version']} chooses its {capability} kernels here, for which "
                           "the release's kernel flags are not known (1.x: DEFAULT, AVX, AVX2)")
    return [*KERNEL_FLAGS[capability], f"-DCPU_CAPABILITY={capability}", f"-DCPU_CAPABILITY_{capability}"]


# appended to a rebuilt stub kernel file: its kernel, put into the release's stub when the library
# loads (after the release's own, which filled the pointer's capability slots when it loaded).
# A 1.x stub's CPU pointer is public (an atomic from 1.5, plain before); it is read only while
# null, so a call made before the library loaded has not fixed it either.
INSTALL = b"""
// bugimpact: this file's kernels put into the release's stubs when the library loads
namespace bugimpact_install {
template <typename P> bool set(std::atomic<P>& slot, P value) { slot.store(value); return true; }
template <typename P> bool set(P& slot, P value) { slot = value; return true; }
}
namespace at { namespace native {
%s
}}
"""


def release_stubs(libs):
    """The names of the stubs the release's libraries define and export (``at::native::abs_stub``
    as ``abs_stub``)."""
    out = set()
    for lib in libs:
        listing = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True).stdout
        out.update(m.group(2) for m in re.finditer(r" _ZN2at6native(\d+)(\w+?_stub)E$", listing, re.M)
                   if len(m.group(2)) == int(m.group(1)))
    return out


def installing(data, path, defined):
    """A stub kernel file's bytes with its kernels put into the release's stubs when the library
    loads (``INSTALL``); refused where it registers none for the capability it is compiled for.
    The stub object is reached by its symbol (an ``at::native`` variable's mangled name holds no
    type), as its base ``DispatchStub``: a kernel file need not include the header declaring it
    (seen: 1.5's ScatterGatherKernel.cpp). A registration of a stub the release does not define
    (``defined``: ``release_stubs``) fills nothing in the release either, and is left out (seen:
    1.3.0's UnaryOpsKernel.cpp registers ``trigamma_stub``, which no file of 1.3.0 defines)."""
    pairs = sorted(set(p for p in registered(data) if p[0] in defined))
    if not pairs:
        raise BuildRefused(f"{path} registers no kernel of its own (REGISTER_DISPATCH): nothing of it "
                           "can be put into the release's stubs")
    lines = []
    for stub, kernel in pairs:
        lines += [f"extern DispatchStub<decltype(&{kernel}), struct {stub}> bugimpact_stub_{stub} "
                  f'__asm__("_ZN2at6native{len(stub)}{stub}E");',
                  f"static const bool bugimpact_installed_{stub} = "
                  f"::bugimpact_install::set(bugimpact_stub_{stub}.cpu_dispatch_ptr, &{kernel});"]
    return data + INSTALL % "\n".join(lines).encode()


def filled(release, stub_files, defined):
    """The stubs each rebuilt kernel file puts its kernel into, as the release's file registers
    them (those the release defines: ``installing``)."""
    return [{"file": path, "stub": stub, "kernel": kernel}
            for path in stub_files for stub, kernel in registered((release / path).read_bytes()) if stub in defined]


def registered(data):
    """(stub, kernel) of each ``REGISTER_DISPATCH`` of a kernel file's bytes: the registrations
    that fill the stub's pointer for the capability the file is compiled for (the tables' pattern,
    without the per-capability and CUDA forms)."""
    return [(m.group(1), m.group(2)) for m in REGISTER.finditer(data.decode("utf-8", "replace"))
            if m.group(0).startswith("REGISTER_DISPATCH")]
