"""The interposed route of compiled fixes (TH and infrastructure files, ``overrides.parts``): which
files take it, how the functions a fix changes are found in the rebuilt objects, what refuses the
build (a changed function the release hides, a file that registers when it loads), the harness's
check that the library really was preloaded, and the check's outcomes. Real g++, nm and objdump on
small libraries standing in for a release; the route on a real release is in
``test_compiled_study.py`` (the interposed fault control)."""
import ctypes
import subprocess
import sys

import pytest

from bugimpact.artifacts import onefix
from bugimpact.harness import overrides as harness_overrides
from bugimpact.overrides import build, check, interposed, parts
from bugimpact.overrides.release_build import BuildRefused
from bugimpact.train import override_spec


def compile_so(tmp_path, name, source, *flags):
    src = tmp_path / f"{name}.cpp"
    src.write_text(source)
    out = tmp_path / f"{name}.so"
    subprocess.run(["g++", "-O2", "-fPIC", "-shared", *flags, str(src), "-o", str(out)], check=True)
    return out


def compile_o(tmp_path, name, source):
    src = tmp_path / f"{name}.cpp"
    src.write_text(source)
    subprocess.run(["g++", "-O2", "-fPIC", "-c", str(src), "-o", str(src) + ".o"], check=True)
    return str(src) + ".o"


# --- which fixes take the route -----------------------------------------------------------------

def test_th_and_atens_own_files_are_interposed_and_the_rest_of_infrastructure_is_refused_named():
    kind, kinds = parts.fix_part(["aten/src/TH/generic/THTensorMath.cpp", "aten/src/THC/generic/THCTensorMathBlas.cu"])
    assert kind == "th" and kinds["cuda"] == ["aten/src/THC/generic/THCTensorMathBlas.cu"]  # TH's CUDA half
    assert parts.refusal(kind, kinds) == ""
    assert str(parts.Kernels(kind, kinds, "").route_on(True)) == "interposed"
    assert str(parts.Kernels(*parts.fix_part(["aten/src/ATen/native/Loss.cpp"]), "").route_on(True)) == "registered"
    infra = parts.fix_part(["aten/src/ATen/native/TensorIterator.cpp"])
    assert infra[0] == "infra" and parts.refusal(*infra) == ""
    bindings = parts.fix_part(["torch/csrc/generic/StorageMethods.cpp"])
    assert parts.refusal(*bindings).startswith("infra: infrastructure outside ATen's and TH's own .cpp files")
    caffe2 = parts.fix_part(["aten/src/ATen/ParallelNative.cpp", "caffe2/utils/threadpool/ThreadPool.cc"])
    assert "caffe2/utils/threadpool/ThreadPool.cc" in parts.refusal(*caffe2)
    header = parts.fix_part(["aten/src/ATen/native/TensorIterator.h"])
    assert parts.refusal(*header).startswith("infra:")
    both = parts.fix_part(["aten/src/TH/generic/THTensorMath.cpp", "aten/src/ATen/native/Loss.cpp"])
    assert parts.refusal(*both) == ""  # one library takes both routes
    route = parts.Kernels(*both, "").route_on(True)
    assert str(route) == "registered+interposed" and route.registers and route.interposes
    assert str(parts.Kernels(*parts.fix_part(["aten/src/ATen/native/cpu/Activation.cpp"]), "").route_on(True)) == "registered"
    # a record of before routes were named is a registered library's
    assert parts.Route.read(None).registers and not parts.Route.read(None).interposes
    assert parts.Route.read("registered+interposed").interposes


def test_atens_cuda_sources_and_cpp_tests_are_never_interposed():
    """Seen on a corpus of the real history: ATen/cuda/CUDABlas.cpp (libtorch_cuda's) was taken as
    interposable infrastructure, and ATen/test/complex_test.cpp (a test binary's) as compiled."""
    assert parts.fix_part(["aten/src/ATen/cuda/CUDABlas.cpp"])[0] == "cuda"
    assert onefix.classify("aten/src/ATen/test/complex_test.cpp") == "not_shipped"
    assert onefix.classify("aten/src/ATen/core/Formatting.cpp") == "compiled"


GENERIC_TREE = {
    "aten/src/TH/THVector.cpp": b"#include <TH/generic/THVectorDispatch.cpp>\n"
                                b"#include <TH/generic/THVectorDefault.cpp>\n#include <TH/THGenerateAllTypes.h>\n",
    "aten/src/TH/THTensorMath.cpp": b"#include <TH/generic/THTensorMath.cpp>\n",
    "aten/src/TH/THTensorMoreMath.cpp": b"// #include <TH/generic/THVectorDefault.cpp>: not here\n",
    "aten/src/TH/generic/THVectorDefault.cpp": b"#include <TH/generic/THVectorDispatch.cpp>\n",
    "aten/src/TH/generic/THVectorDispatch.cpp": b"void f() {}\n",
    "aten/src/THNN/init.cpp": b'#include "THNN/generic/ELU.c"\n',
    "aten/src/ATen/native/TensorIterator.cpp": b"#include <ATen/native/TensorIterator.h>\n",
}


def test_a_generic_th_file_is_compiled_where_a_file_of_its_library_includes_it():
    """Seen on the corpus: pr25857, pr26923 and pr27372 change TH/generic/THVectorDefault.cpp,
    which THVector.cpp includes; taken for its namesake THVectorDefault.cpp, which no release has,
    each fix was refused ("not in torch 1.4.0's branch point")."""
    assert parts.compile_units("aten/src/TH/generic/THVectorDefault.cpp", GENERIC_TREE) == ["aten/src/TH/THVector.cpp"]
    assert parts.compile_units("aten/src/TH/generic/THTensorMath.cpp", GENERIC_TREE) == ["aten/src/TH/THTensorMath.cpp"]
    assert parts.compile_units("aten/src/THNN/generic/ELU.c", GENERIC_TREE) == ["aten/src/THNN/init.cpp"]
    assert parts.compile_units("aten/src/ATen/native/TensorIterator.cpp", GENERIC_TREE) == \
        ["aten/src/ATen/native/TensorIterator.cpp"]
    # no file of the release includes it (a generic file including another is not compiled itself)
    assert parts.compile_units("aten/src/TH/generic/THVectorDispatch.cpp",
                               {p: d for p, d in GENERIC_TREE.items() if p != "aten/src/TH/THVector.cpp"}) == []


def test_a_release_tree_gives_a_generic_files_includers_with_it(tmp_path):
    """The release's tree is searched for what compiles a generic file (a real git repository)."""
    from bugimpact.overrides.clone_tree import CloneTree
    from bugimpact.overrides.release_source import with_includers
    for path, data in GENERIC_TREE.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_bytes(data)
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "tree"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    tree = CloneTree(str(tmp_path), commit)
    # a folder is no file: TH's vector/ is not the compiler's <vector> (read by an include root)
    (tmp_path / "aten/src/TH/vector").mkdir()
    (tmp_path / "aten/src/TH/vector/AVX.h").write_bytes(b"void avx();\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "a folder"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    tree = CloneTree(str(tmp_path), commit)
    assert tree.read_bytes("aten/src/TH/vector") is None and tree.read("aten/src/TH/vector") is None
    assert tree.read_many(["aten/src/TH/vector"]) == {"aten/src/TH/vector": None}
    assert tree.read_bytes("aten/src/TH/vector/AVX.h") == b"void avx();\n"
    # a file that names it in a comment only is no includer, and is not rebuilt
    assert with_includers(tree, ["aten/src/TH/generic/THVectorDefault.cpp"]) == \
        ["aten/src/TH/THVector.cpp", "aten/src/TH/generic/THVectorDefault.cpp"]
    assert with_includers(tree, ["aten/src/THNN/generic/ELU.c"]) == ["aten/src/THNN/generic/ELU.c",
                                                                     "aten/src/THNN/init.cpp"]


# --- the functions a fix changes ------------------------------------------------------------------

GENERIC = b"""static void THTensor_(addmmImpl)(THTensor *r_, int n)
{
  if (n == 0)
    return;
  r_->x = n;
}

void THTensor_(addmv)(THTensor *r_, int n)
{
  r_->x = n;
}
"""


def test_the_changed_functions_of_a_generic_file_are_found_once_per_scalar_type():
    fixed = GENERIC.replace(b"  if (n == 0)\n    return;\n", b"")
    symbols = {"_ZL23THFloatTensor_addmmImplPv": "THFloatTensor_addmmImpl(void*)",
               "_ZL24THDoubleTensor_addmmImplPv": "THDoubleTensor_addmmImpl(void*)",
               "THFloatTensor_addmv": "THFloatTensor_addmv",
               "_ZL23THFloatTensor_addmmImplPv.cold": "THFloatTensor_addmmImpl(void*) [clone .cold]"}
    assert interposed.changed_functions([(GENERIC, fixed)], symbols) == ["_ZL23THFloatTensor_addmmImplPv",
                                                                   "_ZL24THDoubleTensor_addmmImplPv"]
    member = b"namespace at {\nvoid TensorIterator::compute_shape() {\n  x = 1;\n}\n}\n"
    symbols = {"_ZN2at14TensorIterator13compute_shapeEv": "at::TensorIterator::compute_shape()",
               "_ZN2at5otherEv": "at::other()"}
    assert interposed.changed_functions([(member, member.replace(b"x = 1", b"x = 2"))], symbols) == \
        ["_ZN2at14TensorIterator13compute_shapeEv"]


RELEASE = """
__attribute__((visibility("hidden"))) int hidden_scale(int x) { return 2 * x; }
int scale(int x) { return 2 * x; }
int entry(int x) { return scale(x) + hidden_scale(x); }
"""
REBUILT = """
int hidden_scale(int x) { return 2 * x; }
int scale(int x) { return 2 * x; }
"""


def test_a_changed_function_the_release_hides_refuses_the_build_naming_it(tmp_path):
    release = compile_so(tmp_path, "release", RELEASE)
    faithful = compile_o(tmp_path, "faithful", REBUILT)
    exported = compile_o(tmp_path, "exported", REBUILT.replace("int scale(int x) { return 2", "int scale(int x) { return 3"))
    changed_scale = [(REBUILT.encode(), REBUILT.replace("int scale(int x) { return 2", "int scale(int x) { return 3").encode())]
    changed, taken = interposed.interposition([faithful], [exported], [str(release)], changed_scale,
                                              [faithful, exported])
    assert [f["name"] for f in changed] == ["scale(int)"] and taken == 1 and changed[0]["interposed"]
    # the same objects registered, not interposed: nothing is taken over, nothing need be exported
    assert interposed.interposition([faithful], [exported], [str(release)], changed_scale)[1] == 0
    # the same file, the hidden function changed instead:
    hidden = REBUILT.replace("int hidden_scale(int x) { return 2", "int hidden_scale(int x) { return 3")
    with pytest.raises(BuildRefused, match=r"the release does not export 1 function\(s\) the fix changes "
                                           r"\(hidden_scale\(int\)\): hidden"):
        hidden_o = compile_o(tmp_path, "hidden", hidden)
        interposed.interposition([faithful], [hidden_o], [str(release)], [(REBUILT.encode(), hidden.encode())],
                                 [faithful, hidden_o])
    # a function the arm alone defines (an added operator's backward node) has no release copy to
    # take over: the library's own code calls it, and nothing is refused
    added = REBUILT + "int added_scale(int x) { return 4 * x; }\n"
    added_o = compile_o(tmp_path, "added", added)
    changed, _ = interposed.interposition([faithful], [added_o], [str(release)], [(REBUILT.encode(), added.encode())],
                                          [faithful, added_o])
    assert [f["name"] for f in changed] == ["added_scale(int)"]


INLINE = """
struct Box { int v; __attribute__((noipa)) int twice() const { return 2 * v; } };  // a weak copy
int scale(int x) { Box b{x}; return b.twice(); }
int own_helper(int x) { return x + 1; }
extern "C" { long long bugimpact_entries = 0; }
"""


def test_a_preloaded_library_exports_only_what_it_takes_over_and_the_counters(tmp_path):
    """Without its version script a preloaded library exports its weak copies of inline functions
    (``Box::twice`` here, ``Tensor::contiguous`` in a real one) and its other functions: each would
    take over the release's own copy in every library of the process."""
    obj = compile_o(tmp_path, "lib", INLINE)
    exported_by_release = {"_Z5scalei", "_ZNK3Box5twiceEv", "_Z10own_helperi"}

    def dynamic(library):
        listing = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True,
                                 check=True).stdout
        return {line.split()[-1] for line in listing.splitlines()}

    plain = tmp_path / "plain.so"
    subprocess.run(["g++", "-shared", "-o", str(plain), obj], check=True)
    assert {"_ZNK3Box5twiceEv", "_Z10own_helperi"} <= dynamic(plain)  # what the script stops
    takes = ["_Z5scalei"]  # the interposed file's function, as interposed.taken_over would give
    assert interposed.taken_over([obj], {"_Z5scalei"}) == takes
    # its weak copy of an inline function is its own, even where the release exports one
    assert interposed.taken_over([obj], exported_by_release) == ["_Z10own_helperi", "_Z5scalei"]
    scripted = tmp_path / "scripted.so"
    subprocess.run(["g++", "-shared", "-o", str(scripted), obj,
                    interposed.version_script(tmp_path / "lib.map", takes)], check=True)
    assert dynamic(scripted) == {"_Z5scalei", "bugimpact_entries"}


def test_a_file_that_registers_when_it_loads_is_refused(tmp_path):
    path = "aten/src/ATen/core/VariableFallbackKernel.cpp"
    (tmp_path / path).parent.mkdir(parents=True)
    (tmp_path / path).write_text("static auto registry = c10::Dispatcher::singleton().registerBackendFallbackKernel();\n")
    with pytest.raises(BuildRefused, match="registers at load time .*: preloaded, the registrations would be made twice"):
        interposed.no_load_time_registrations([path], tmp_path)
    (tmp_path / path).write_text("namespace at { void f() {} }\n")
    interposed.no_load_time_registrations([path], tmp_path)  # nothing registered: no refusal


# --- the harness: a library that was to be preloaded and was not ---------------------------------

COUNTERS = build.NO_REGISTRATIONS + build.HOOKS + "int entered() { return 1; }\n"


def test_the_harness_refuses_an_interposed_library_that_was_not_preloaded(tmp_path):
    library = compile_so(tmp_path, "late", COUNTERS)
    with pytest.raises(RuntimeError, match="is interposed and must be preloaded"):
        harness_overrides.load(str(library), preloaded=True)
    handle = harness_overrides.load(str(library))  # a registered library is loaded here, as before
    assert harness_overrides.counts(handle)["entries"] == 0
    preloaded = subprocess.run([sys.executable, "-c", "import sys; from bugimpact.harness import overrides; "
                                "overrides.load(sys.argv[1], preloaded=True); print('ok')", str(library)],
                               env={"LD_PRELOAD": str(library), "PATH": "/usr/bin:/bin",
                                    "PYTHONPATH": str(__import__("bugimpact").__path__[0].rsplit("/", 1)[0])},
                               capture_output=True, text=True)
    assert preloaded.stdout.strip() == "ok", preloaded.stderr


def test_the_canary_counts_entries_per_function_by_offset(tmp_path):
    source = COUNTERS.replace("int entered() { return 1; }\n", "") + \
        "extern \"C\" int twice(int x) { return 2 * x; }\nextern \"C\" int once(int x) { return twice(x) + 1; }\n"
    src = tmp_path / "canary.cpp"
    src.write_text(source)
    library = tmp_path / "canary.so"
    # -Bsymbolic as every override library: glibc has a __cyg_profile_func_enter of its own
    subprocess.run(["g++", "-O0", "-fPIC", "-shared", "-finstrument-functions", "-Wl,-Bsymbolic", str(src), "-o",
                    str(library)], check=True)
    handle = ctypes.CDLL(str(library))
    for _ in range(3):
        handle.once(1)
    counted = harness_overrides.counts(handle)
    from bugimpact.steps.override import named
    assert counted["entries"] == 6 and named(str(library), counted["functions"]) == {"once": 3, "twice": 3}


def test_the_calls_of_kernels_registered_under_one_name_add_up(tmp_path):
    """torch 1.2's schemas name no overload: a library registers ``sum`` three times, and the
    harness read only the last one's calls (pr16686: a ``sum`` called through the first was 0)."""
    library = compile_so(tmp_path, "alike", 'extern "C" { int bugimpact_op_count = 3; '
                         'long long bugimpact_calls[3] = {4, 0, 1}; '
                         'const char* bugimpact_ops[3] = {"sum", "mean", "sum"}; }\n')
    assert harness_overrides.counts(harness_overrides.load(str(library)))["calls"] == {"sum": 5, "mean": 0}


def test_a_runs_spec_says_to_preload_an_interposed_library_only():
    libraries = {"arm": {"library": "/x/arm.so"}}
    assert override_spec({"route": "interposed", "libraries": libraries}, "arm") == {"override": "/x/arm.so", "preload": True}
    assert override_spec({"route": "registered", "libraries": libraries}, "arm") == {"override": "/x/arm.so"}
    both = {"route": "registered+interposed", "libraries": libraries}
    assert override_spec(both, "arm") == {"override": "/x/arm.so", "preload": True}
    assert override_spec(None, "arm") == {}


# --- the check's outcomes -------------------------------------------------------------------------

FLAGS = ["-O2", "-fopenmp"]
INTERPOSED = {"route": "interposed", "registered": [], "interposed": 40,
              "changed_functions": [{"symbol": "_ZL5gemmf", "name": "THFloatBlas_gemm(float)"},
                                    {"symbol": "_ZL5gemmd", "name": "THDoubleBlas_gemm(double)"}],
              "compiled_with": {b: ["-std=c++14", "-fPIC", *FLAGS] for b in ("arm", "faithful")},
              "canary_flags": ["-finstrument-functions"]}
INTERPOSED["compiled_with"]["canary"] = [*INTERPOSED["compiled_with"]["faithful"], "-finstrument-functions"]


def interposed_runs(faithful="a", arm="b", entered=None):
    entered = {"_ZL5gemmf": 12, "other": 3} if entered is None else entered
    prints = {b: {"fingerprints": {k: p for k in check.FINGERPRINTS}, "override": {"calls": {}}}
              for b, p in (("release", "a"), ("faithful", faithful), ("canary", faithful), ("arm", arm))}
    prints["canary"]["override"].update(entries=sum(entered.values()), functions=entered)
    return prints


def test_an_interposed_library_whose_changed_function_ran_is_verified():
    result = check.judge(interposed_runs(), INTERPOSED, FLAGS)
    assert result["outcome"] == "verified" and result["workload_calls"] == ["THFloatBlas_gemm"]
    assert result["changed_calls"] == {"THFloatBlas_gemm": 12} and result["route"] == "interposed"


def test_an_interposed_library_whose_changed_functions_never_ran_is_not_exercised():
    result = check.judge(interposed_runs(entered={"other": 3}), INTERPOSED, FLAGS)
    assert result["outcome"] == "not exercised" and result["passed"]
    assert "runs none of the 2 functions the fix changes (3 entries into the library's other functions)" in result["reason"]


def test_an_interposed_library_that_trains_unlike_the_release_or_with_other_flags_fails():
    assert "trains differently from the release" in check.judge(interposed_runs(faithful="c"), INTERPOSED, FLAGS)["reason"]
    lacking = check.judge(interposed_runs(), INTERPOSED, FLAGS + ["-mavx2"])
    assert lacking["outcome"] == "failed" and "-mavx2 left out" in lacking["reason"]


BOTH = {**INTERPOSED, "route": "registered+interposed", "overloads": {"max_pool2d": ["max_pool2d"]},
        "registered": [{"op": "max_pool2d", "key": "Variable"}]}


def both_runs(pooled=5, entered=None):
    runs = interposed_runs(entered=entered)
    runs["release"]["ops"] = {"max_pool2d": 5, "addmm": 10}
    for build_name in ("faithful", "arm"):
        runs[build_name]["override"]["calls"] = {"max_pool2d": pooled}
    return runs


def test_a_library_of_both_routes_counts_its_operators_and_its_interposed_functions():
    result = check.judge(both_runs(), BOTH, FLAGS)
    assert result["outcome"] == "verified" and result["route"] == "registered+interposed"
    assert result["workload_calls"] == ["max_pool2d", "THFloatBlas_gemm"] and result["interposed"] == 40
    # the interposed half alone ran: verified by it
    alone = check.judge(both_runs(pooled=0), BOTH, FLAGS)
    assert alone["outcome"] == "failed" and "never through the library" in alone["reason"]
    # neither half ran: not exercised, both named
    idle = check.judge({**both_runs(pooled=0, entered={"other": 3}),
                        "release": {**both_runs()["release"], "ops": {"addmm": 10}}}, BOTH, FLAGS)
    assert idle["outcome"] == "not exercised", idle
    assert "calls none of the 1 operators" in idle["reason"] and "none of those it changes in the files it interposes" in idle["reason"]
