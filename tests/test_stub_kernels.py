"""CPU DispatchStub kernels (``native/cpu``) of compiled fixes, put into the release's stubs: the
code appended to a rebuilt kernel file that stores its kernel in the release's stub when the
library loads (on a small library standing in for a release, with 1.5's stub layout: real g++
and ctypes), the kernel flags of the capability the release chooses, the ``sleef.h`` its vector
code needs, and the check's outcome for a library with stub kernels. The route on real releases
and the paper's fixes are in ``test_compiled_study.py``."""
import ctypes
import subprocess
from pathlib import Path

import pytest

from bugimpact.overrides import check, interposed, release_build, stubs
from bugimpact.overrides.release_build import BuildRefused

# a stub as torch 1.5's DispatchStub.h declares it (public atomic CPU pointer, a static per
# capability), and the release's own definition of one stub and its op
STUB_H = r"""
#include <atomic>
namespace at { namespace native {
template <typename FnPtr, typename T> struct DispatchStub;
template <typename rT, typename T, typename... Args>
struct DispatchStub<rT (*)(Args...), T> {
  using FnPtr = rT (*)(Args...);
  rT operator()(Args... args) {
    if (!cpu_dispatch_ptr.load()) cpu_dispatch_ptr.store(AVX2);
    return (*cpu_dispatch_ptr)(args...);
  }
  std::atomic<FnPtr> cpu_dispatch_ptr{nullptr};
  static FnPtr AVX2;
};
#define DECLARE_DISPATCH(fn, name) struct name : DispatchStub<fn, name> {}; extern struct name name
#define DEFINE_DISPATCH(name) struct name name
#define REGISTER_ARCH_DISPATCH(name, arch, fn) template <> decltype(fn) DispatchStub<decltype(fn), struct name>::arch = fn;
#define REGISTER_DISPATCH(name, fn) REGISTER_ARCH_DISPATCH(name, CPU_CAPABILITY, fn)
using twice_fn = int (*)(int);
DECLARE_DISPATCH(twice_fn, twice_stub);
}}
"""
RELEASE = r"""
#include "stub.h"
namespace at { namespace native {
DEFINE_DISPATCH(twice_stub);
namespace { int twice(int x) { return 2 * x; } }
REGISTER_DISPATCH(twice_stub, &twice);
}}
extern "C" int op(int x) { return at::native::twice_stub(x); }
"""
KERNEL = r"""
#include "stub.h"
namespace at { namespace native {
namespace { int twice(int x) { return 2 * x + %d; } }
REGISTER_DISPATCH(twice_stub, &twice);
}}
"""


def test_a_rebuilt_kernel_goes_into_the_releases_stub_when_the_library_loads(tmp_path):
    (tmp_path / "stub.h").write_text(STUB_H)
    (tmp_path / "release.cpp").write_text(RELEASE)
    release = tmp_path / "librelease.so"
    subprocess.run(["g++", "-std=c++14", "-fPIC", "-shared", "-DCPU_CAPABILITY=AVX2", f"-I{tmp_path}",
                    str(tmp_path / "release.cpp"), "-o", str(release)], check=True)
    lib = ctypes.CDLL(str(release), mode=ctypes.RTLD_GLOBAL)
    assert lib.op(5) == 10  # the release's kernel, its pointer now fixed
    defined = stubs.release_stubs([release])
    assert defined == {"twice_stub"}
    # a registration of a stub the release never defines fills nothing there (1.3.0's
    # UnaryOpsKernel.cpp registers trigamma_stub, which no file of 1.3.0 defines): left out, as
    # reaching for it would leave the library an undefined symbol (pr25076's build was refused)
    dead = "\nnamespace at { namespace native {\nDECLARE_DISPATCH(twice_fn, thrice_stub);\n" \
           "namespace { int thrice(int x) { return 3 * x; } }\nREGISTER_DISPATCH(thrice_stub, &thrice);\n}}\n"
    data = stubs.installing((KERNEL % 1 + dead).encode(), "aten/src/ATen/native/cpu/TwiceKernel.cpp", defined)
    assert b"thrice_stub.cpu_dispatch_ptr" not in data
    (tmp_path / "kernel.cpp").write_bytes(data)
    assert [f["stub"] for f in stubs.filled(tmp_path, ["kernel.cpp"], defined)] == ["twice_stub"]
    override = tmp_path / "override.so"
    subprocess.run(["g++", "-std=c++14", "-fPIC", "-shared", "-DCPU_CAPABILITY=AVX2", f"-I{tmp_path}",
                    str(tmp_path / "kernel.cpp"), str(release), "-Wl,-Bsymbolic", "-o", str(override)], check=True)
    ctypes.CDLL(str(override))
    assert lib.op(5) == 11  # the release's op, through its own stub, now runs the rebuilt kernel
    # seen on 1.5's ScatterGatherKernel.cpp: a kernel file that does not include the header
    # declaring the stub object; the library reaches the object by its symbol
    (tmp_path / "bare.h").write_text(STUB_H.replace("DECLARE_DISPATCH(twice_fn, twice_stub);", ""))
    (tmp_path / "kernel2.cpp").write_bytes(stubs.installing((KERNEL % 2).replace("stub.h", "bare.h").encode(), "K.cpp",
                                                            defined))
    other = tmp_path / "other.so"
    subprocess.run(["g++", "-std=c++14", "-fPIC", "-shared", "-DCPU_CAPABILITY=AVX2", f"-I{tmp_path}",
                    str(tmp_path / "kernel2.cpp"), str(release), "-Wl,-Bsymbolic", "-o", str(other)], check=True)
    ctypes.CDLL(str(other))
    assert lib.op(5) == 12


def test_a_kernel_file_that_registers_nothing_is_refused():
    with pytest.raises(BuildRefused, match="Helpers.cpp registers no kernel of its own"):
        stubs.installing(b"namespace at { int helper() { return 1; } }\n", "aten/src/ATen/native/cpu/Helpers.cpp",
                         {"twice_stub"})


def test_the_kernel_flags_are_the_capability_the_release_chooses_and_2x_is_refused_named():
    settings = {"version": "1.5.0", "major": 1, "capability": "AVX2"}
    flags = stubs.kernel_flags(settings)
    assert flags[:3] == ["-O3", "-mavx2", "-mfma"] and flags[-2:] == ["-DCPU_CAPABILITY=AVX2", "-DCPU_CAPABILITY_AVX2"]
    assert stubs.kernel_flags({**settings, "capability": "DEFAULT"}) == \
        ["-O3", "-DCPU_CAPABILITY=DEFAULT", "-DCPU_CAPABILITY_DEFAULT"]
    with pytest.raises(BuildRefused, match="chooses its AVX512 kernels here"):
        stubs.kernel_flags({**settings, "capability": "AVX512"})
    with pytest.raises(BuildRefused, match="keeps the CPU kernel pointer private"):
        stubs.kernel_flags({"version": "2.13.0", "major": 2, "capability": "AVX2"})


def test_sleef_h_declares_what_the_release_exports_with_each_ones_signature(tmp_path):
    source = ('#include <immintrin.h>\nextern "C" {\n__m256 Sleef_expf8_u10(__m256 x) { return x; }\n'
              "__m256d Sleef_atan2d4_u10(__m256d a, __m256d b) { return a; }\n"
              "__m256 Sleef_expf8_u10avx2(__m256 x) { return x; }\nint Sleef_getIntf8(int x) { return x; }\n"
              "struct P { __m256 x, y; };\nP Sleef_sincosf8_u10(__m256 x) { return P{x, x}; }\n}\n")
    (tmp_path / "sleef.cpp").write_text(source)
    lib = tmp_path / "libsleefy.so"
    subprocess.run(["g++", "-mavx2", "-fPIC", "-shared", str(tmp_path / "sleef.cpp"), "-o", str(lib)], check=True)
    header = release_build.sleef_header([str(lib)])
    assert "__m256 Sleef_expf8_u10(__m256);" in header and "__m256 Sleef_expf8_u10avx2(__m256);" in header
    assert "__m256d Sleef_atan2d4_u10(__m256d, __m256d);" in header
    assert "Sleef___m256_2 Sleef_sincosf8_u10(__m256);" in header  # both results, as SLEEF's struct
    assert "getInt" not in header  # no signature its name says: not declared
    (tmp_path / "sleef.h").write_text(header)
    (tmp_path / "use.cpp").write_text('#include "sleef.h"\n__m256 f(__m256 x) { return Sleef_sincosf8_u10(Sleef_expf8_u10(x)).y; }\n')
    subprocess.run(["g++", "-mavx2", "-c", str(tmp_path / "use.cpp"), "-o", str(tmp_path / "use.o")], check=True)
    (tmp_path / "plain.cpp").write_text("int g() { return 1; }\n")
    plain = tmp_path / "libplain.so"
    subprocess.run(["g++", "-fPIC", "-shared", str(tmp_path / "plain.cpp"), "-o", str(plain)], check=True)
    assert release_build.sleef_header([str(plain)]) is None


FLAGS = ["-O2", "-DHAVE_AVX2_CPU_DEFINITION"]
KERNEL_FLAGS = ["-O3", "-mavx2", "-DCPU_CAPABILITY=AVX2"]
STUB_OVERRIDE = {
    "registered": [], "stubs": [{"file": "aten/src/ATen/native/cpu/BinaryOpsKernel.cpp",
                                 "stub": "max_elementwise_stub", "kernel": "max_elementwise_kernel"}],
    "kernel_flags": KERNEL_FLAGS, "canary_flags": ["-finstrument-functions"],
    "changed_functions": [{"symbol": "_ZN2at6native12_GLOBAL__N_122max_elementwise_kernelERNS_14TensorIteratorE",
                           "name": "at::native::(anonymous namespace)::max_elementwise_kernel(at::TensorIterator&)",
                           "linkage": "internal"}],
    "compiled_with": {"arm kernels": [*FLAGS, *KERNEL_FLAGS], "faithful kernels": [*FLAGS, *KERNEL_FLAGS],
                      "canary kernels": [*FLAGS, *KERNEL_FLAGS, "-finstrument-functions"]}}


def stub_runs(faithful="a", entered=None):
    record = {"fingerprints": {k: "a" for k in check.FINGERPRINTS}, "ops": ["max", "conv2d"],
              "override": {"calls": {}, "entries": sum((entered or {}).values()), "functions": entered or {}}}
    runs = {b: {**record, "override": dict(record["override"])} for b in check.BUILDS}
    runs["faithful"]["fingerprints"] = {k: faithful for k in check.FINGERPRINTS}
    return runs


def test_a_stub_kernel_the_canary_entered_is_verified_and_one_never_entered_is_not_exercised():
    symbol = STUB_OVERRIDE["changed_functions"][0]["symbol"]
    verified = check.judge(stub_runs(entered={symbol: 64, "_Zother": 3}), STUB_OVERRIDE, FLAGS)
    assert verified["outcome"] == "verified" and verified["route"] == "registered"
    assert verified["changed_calls"] == {"at::native::(anonymous namespace)::max_elementwise_kernel": 64}
    idle = check.judge(stub_runs(entered={"_Zother": 3}), STUB_OVERRIDE, FLAGS)
    assert idle["outcome"] == "not exercised" and "stub kernels (max_elementwise_stub)" in idle["reason"]


def test_a_stub_kernel_compiled_without_its_capability_flags_or_trained_unlike_the_release_fails():
    symbol = STUB_OVERRIDE["changed_functions"][0]["symbol"]
    bare = {**STUB_OVERRIDE, "compiled_with": {**STUB_OVERRIDE["compiled_with"], "arm kernels": FLAGS}}
    failed = check.judge(stub_runs(entered={symbol: 64}), bare, FLAGS)
    assert failed["outcome"] == "failed" and "arm kernels build was not compiled with the release's flags" in \
        failed["reason"] and "-mavx2" in failed["reason"]
    unlike = check.judge(stub_runs(faithful="b", entered={symbol: 64}), STUB_OVERRIDE, FLAGS)
    assert unlike["outcome"] == "failed" and "faithful build" in unlike["reason"]


def test_headers_no_source_holds_are_found_by_the_preprocessor_and_provided_or_refused_named(tmp_path):
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "sleef.h").write_text("/* a stand-in */\n")
    (tmp_path / "k.cpp").write_text("#include <sleef.h>\n#include <mkl.h>\n#include <vector>\nint k;\n")
    job = ("faithful", "k.cpp", ["g++", f"-I{tmp_path / 'include'}", "-c", str(tmp_path / "k.cpp"), "-o", "k.o"])
    assert release_build.missing_headers([job]) == ["mkl.h"]
    assert release_build.missing_headers([job], standins=["sleef.h"]) == ["mkl.h", "sleef.h"]
    settings = {"version": "1.5.0", "config": ""}
    with pytest.raises(BuildRefused, match="include nnpack.h, which neither torch 1.5.0's wheel nor the source at hand holds"):
        release_build.provide_headers(["nnpack.h"], settings, [], tmp_path / "third-party")
    with pytest.raises(BuildRefused, match="does not say which MKL it was built with"):
        release_build.provide_headers(["mkl.h"], settings, [], tmp_path / "third-party")
    with pytest.raises(BuildRefused, match="include sleef.h"):  # a release that exports no SLEEF function
        release_build.provide_headers(["sleef.h"], settings, [], tmp_path / "third-party")
    # seen in CI: nnpack.h's empty stand-in refused every op file of Convolution's (the stand-in
    # compiles where nnpack's code is compiled out; only a file that needs it fails, named)
    assert release_build.provide_headers(["nnpack.h"], settings, [], tmp_path / "third-party", ["nnpack.h"]) == {}


def test_changed_template_functions_and_members_are_found_by_their_source_names():
    """Seen on pr32829: GridSampler.h's static template helpers and GridSamplerKernel.cpp's members
    of class templates demangle with template arguments and a return type, which the source does
    not write, so none of them was found."""
    before = (b"template<typename scalar_t>\nstatic inline scalar_t clip(scalar_t in) {\n  return in < 0 ? 0 : in;\n}\n"
              b"template<typename scalar_t, bool align>\nstruct Loc {\n  inline scalar_t apply(scalar_t in) const {\n"
              b"    return in;\n  }\n};\n")
    after = before.replace(b"in < 0", b"in <= 0").replace(b"    return in;\n", b"    return clip(in);\n")
    symbols = {"_Z4clipIfET_S0_": "float at::native::(anonymous namespace)::clip<float>(float)",
               "_ZNK3LocIfLb1EE5applyEf": "at::native::(anonymous namespace)::Loc<float, true>::apply(float) const",
               "_Z5otherv": "at::native::other()"}
    assert interposed.changed_functions([(before, after)], symbols) == ["_Z4clipIfET_S0_", "_ZNK3LocIfLb1EE5applyEf"]


def test_the_releases_cpu_libraries_are_aten_where_each_release_keeps_it(tmp_path):
    # torch 1.1.0's folder: ATen, its stubs' AVX2 kernels among it, in libcaffe2.so (1.2 moved it to
    # libtorch.so); linked without it, a build misses every ATen symbol and its stubs no AVX2 kernel
    (tmp_path / "aten.cpp").write_text(
        "namespace at { namespace native {\ntemplate <typename F, typename T> struct DispatchStub { static F AVX2; };\n"
        "struct add_stub;\ntemplate <> void (*DispatchStub<void (*)(), add_stub>::AVX2)() = nullptr;\n} }\n")
    (tmp_path / "other.cpp").write_text("int other() { return 1; }\n")
    lib = tmp_path / "lib"
    lib.mkdir()
    for name, source in [("libc10.so", "other"), ("libcaffe2.so", "aten"), ("libcaffe2_gpu.so", "other"),
                         ("libtorch.so", "other"), ("libtorch_python.so", "other"), ("libgomp-4f651535.so.1", "other")]:
        subprocess.run(["g++", "-fPIC", "-shared", str(tmp_path / f"{source}.cpp"), "-o", str(lib / name)], check=True)
    assert [Path(p).name for p in release_build.torch_libs(lib)] == \
        ["libc10.so", "libcaffe2.so", "libgomp-4f651535.so.1", "libtorch.so"]
    assert release_build.capability_flags(lib) == ["-DHAVE_AVX2_CPU_DEFINITION"]
