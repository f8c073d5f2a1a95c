"""Reach bounds beyond placed hunks: the legacy TH library through Declarations.cwrap, a Python
change the traced release no longer holds (placed by the fix's own files), and functions that run
while modules load, before any trace starts."""
import base64
import difflib
import re
import textwrap
import zlib

import pytest

from bugimpact.framework import patch
from bugimpact.framework.paths import kind_of
from bugimpact.framework.tables import DirTree, Tables
from bugimpact.reach.python_files import python_scopes
from bugimpact.reach.static import map_diff
from bugimpact.reach.verdict import judge

NATIVE = """\
- func: addmm(Tensor self, Tensor mat1, Tensor mat2) -> Tensor
  dispatch:
    CPU: legacy::cpu::_th_addmm

- func: histc(Tensor self, int bins=100) -> Tensor
  dispatch:
    CPU: legacy::cpu::_th_histc

- func: linear(Tensor input, Tensor weight) -> Tensor
"""
LINEAR = """\
namespace at { namespace native {
Tensor linear(const Tensor& input, const Tensor& weight) {
  return legacy::cpu::_th_addmm(input, input, weight);
}
}}
"""
CWRAP = """\
[[
  name: _th_addmm
  cname: addmm
  return: argument 0
]]
[[
  name: _th_histc
  cname: histc
  return: argument 0
]]
"""
TH = """\
static void THTensor_(addmmImpl)(THTensor *r_, THTensor *t)
{
  int64_t n = r_->size(0);
  r_->resize(n);
}

void THTensor_(addmm)(THTensor *r_, THTensor *t)
{
  THTensor_(addmmImpl)(r_, t);
}

void THTensor_(histc)(THTensor *hist, THTensor *tensor)
{
  int64_t bins = hist->size(0);
}
"""


def tree(root, files):
    for path, content in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(content)
    return DirTree(root)


def diff(path, old, new, at):
    """A one-line change of ``path`` at line ``at`` (1-based), with one line of context."""
    return (f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
            f"@@ -{at - 1},3 +{at - 1},3 @@\n {old[at - 2]}\n-{old[at - 1]}\n+{new}\n {old[at]}\n")


def test_a_th_change_maps_through_cwrap_to_the_operators_that_call_it(tmp_path):
    tables = Tables(tree(tmp_path, {"aten/src/ATen/native/native_functions.yaml": NATIVE,
                                    "aten/src/ATen/native/Linear.cpp": LINEAR,
                                    "aten/src/ATen/Declarations.cwrap": CWRAP,
                                    "aten/src/TH/generic/THTensorMath.cpp": TH}))
    lines = TH.splitlines()
    # a static helper: through THTensor_(addmm), the entry whose cname is addmm, _th_addmm, and
    # both what dispatches to it (addmm) and what calls it (linear)
    mapping = map_diff(diff("aten/src/TH/generic/THTensorMath.cpp", lines, "  r_->resize(n + 0);", 4),
                       tables)
    assert set(mapping.ops) == {"addmm", "linear"} and not mapping.unknown
    assert "TH addmmImpl" in mapping.ops["addmm"]
    mapping = map_diff(diff("aten/src/TH/generic/THTensorMath.cpp", lines, "  int64_t bins = 1;", 14),
                       tables)
    assert set(mapping.ops) == {"histc"}
    cwrap = CWRAP.splitlines()
    mapping = map_diff(diff("aten/src/ATen/Declarations.cwrap", cwrap, "  return: self", 9), tables)
    assert set(mapping.ops) == {"histc"}
    # a TH function no entry declares: unknown, never not reached
    orphan = TH + "\nvoid THTensor_(orphan)(THTensor *t)\n{\n  t->zero();\n}\n"
    tables = Tables(tree(tmp_path / "b", {"aten/src/ATen/native/native_functions.yaml": NATIVE,
                                          "aten/src/ATen/Declarations.cwrap": CWRAP,
                                          "aten/src/TH/generic/THTensorMath.cpp": orphan}))
    mapping = map_diff(diff("aten/src/TH/generic/THTensorMath.cpp", orphan.splitlines(), "  t->one();",
                            len(orphan.splitlines()) - 1), tables)
    assert not mapping.ops and "orphan" in mapping.unknown[0]


KERNELS = """\
// Kernels that use a macro and a constant of their file.
#include <ATen/ATen.h>
#define CHUNK 4
#ifdef FAST_PATH
#define UNROLL 8
#endif
static constexpr int64_t kGrain = 32768;
namespace at { namespace native {
Tensor histc(const Tensor& self, int64_t bins) {
  return self.view({CHUNK, -1});
}
Tensor addmm(const Tensor& self, const Tensor& a, const Tensor& b) {
  return at::empty({kGrain});
}
}}
"""
NATIVE_OWN = """\
- func: addmm(Tensor self, Tensor mat1, Tensor mat2) -> Tensor

- func: histc(Tensor self, int bins=100) -> Tensor
"""


def test_a_changed_macro_or_constant_is_the_functions_of_its_file_that_use_it(tmp_path):
    path = "aten/src/ATen/native/Kernels.cpp"
    tables = Tables(tree(tmp_path, {"aten/src/ATen/native/native_functions.yaml": NATIVE_OWN,
                                    path: KERNELS, "aten/src/ATen/native/Kernels.h": KERNELS}))
    lines = KERNELS.splitlines()
    # a macro and a constant run where they are used: histc uses CHUNK, addmm kGrain
    assert set(map_diff(diff(path, lines, "#define CHUNK 8", 3), tables).ops) == {"histc"}
    assert set(map_diff(diff(path, lines, "static constexpr int64_t kGrain = 1024;", 7),
                        tables).ops) == {"addmm"}
    # never silently nothing: a macro no function uses (changed, or chosen by a changed conditional
    # that only defines it) and a header's macro (used wherever it is included) are unknown
    for at, line, why in ((4, "#ifdef FASTER_PATH", "UNROLL (line 5), which no function of the file uses"),
                          (5, "#define UNROLL 16", "UNROLL (line 5), which no function of the file uses")):
        mapping = map_diff(diff(path, lines, line, at), tables)
        assert not mapping.ops and why in mapping.unknown[0], mapping.unknown
    header = map_diff(diff("aten/src/ATen/native/Kernels.h", lines, "#define CHUNK 8", 3), tables)
    assert not header.ops and "outside any function" in header.unknown[0]
    # an include or a comment changes nothing that runs
    mapping = map_diff(diff(path, lines, "#include <ATen/ATen.h>  // all of it", 2), tables)
    assert not mapping.ops and not mapping.unknown, mapping.unknown


RELEASE = textwrap.dedent("""\
    import torch
    REGISTERED = None


    def helper(x):
        y = x + 1
        return y


    def used_while_loading():
        return [1, 2]


    REGISTERED = used_while_loading()


    class Module:
        def forward(self, x):
            return helper(x)
    """)


def pack(text):
    return base64.b64encode(zlib.compress(text.encode())).decode()


def trace_of(ran):
    return {"sources": {"torch/m.py": pack(RELEASE)}, "lines": {"torch/m.py": ran}, "ops": {},
            "torch_version": "1.5.1", "device": "cpu"}


def test_a_change_the_release_no_longer_holds_is_placed_by_the_fixs_own_files(tmp_path):
    # the fix's own files: the changed line is in helper's body, in a form the release never had
    buggy = RELEASE.replace("    y = x + 1", "    y = x + 2  # the fix's parent")
    fixed = RELEASE.replace("    y = x + 1", "    y = x + 3  # the fix")
    old_tree = tree(tmp_path / "old", {"torch/m.py": buggy})
    new_tree = tree(tmp_path / "new", {"torch/m.py": fixed})
    change = diff("torch/m.py", buggy.splitlines(), "    y = x + 3  # the fix", 6)
    fd = patch.parse(change)[0]
    assert patch.locate(fd.hunks[0], RELEASE.splitlines()) is None  # not in the traced copy
    assert python_scopes(fd, old_tree, new_tree) == {0: [("body", "helper")]}
    mapping = map_diff(change, None, old_tree, new_tree)
    verdict = judge(mapping, trace_of([]))  # helper never ran
    assert verdict["verdict"] == "not reached"
    assert "are in functions that did not run: at lines 5, by the fix's own files" in verdict["not_reached"][0]
    verdict = judge(mapping, trace_of([19, 6, 7]))  # forward ran, and helper with it
    assert verdict["verdict"] == "unknown" and "its function helper ran" in verdict["unknown"][0]
    # without the fix's files nothing says where the lines were: unknown, never not reached
    assert judge(map_diff(change, None), trace_of([]))["verdict"] == "unknown"


RENAMED = textwrap.dedent("""\
    import inspect


    def infer_concrete_type_builder(nn_module):
        for name, item in nn_module.__dict__.items():
            if inspect.isfunction(item) and not inspect.ismethod(item):
                builder.add_function_attribute(name, item)


    class Module:
        def forward(self, x):
            return x
    """)


def test_a_change_in_a_function_the_release_renamed_is_not_reached_only_where_no_function_of_its_file_ran(tmp_path):
    """pr28569 and pr27514 (torch/jit/_recursive.py): 1.4.0 renamed the function the fix changed
    (infer_raw_concrete_type, infer_concrete_type_builder) and its lines moved on (concrete_type,
    concrete_type_builder), so nothing placed the change; but no function of the file ran, and its
    functions hold the change's other lines."""
    buggy = RENAMED.replace("infer_concrete_type_builder", "infer_raw_concrete_type").replace(
        "builder.add_function_attribute(name, item)", "item = torch.jit.script(item)")
    fixed = buggy.replace("item = torch.jit.script(item)", "concrete_type.add_function_attribute(name, item)")
    old_tree = tree(tmp_path / "old", {"torch/m.py": buggy})
    new_tree = tree(tmp_path / "new", {"torch/m.py": fixed})
    change = diff("torch/m.py", buggy.splitlines(), "            concrete_type.add_function_attribute(name, item)", 7)
    mapping = map_diff(change, None, old_tree, new_tree)

    def traced(ran, release=RENAMED):
        return {"sources": {"torch/m.py": pack(release)}, "lines": {"torch/m.py": ran}, "ops": {},
                "torch_version": "1.4.0", "device": "cpu"}
    verdict = judge(mapping, traced([]))
    assert verdict["verdict"] == "not reached"
    assert "at lines 6, in functions the release renamed: none of the file's functions ran" in verdict["not_reached"][0]
    # another function of the file ran: the renamed one may be what ran
    assert "its function infer_raw_concrete_type is not in it" in judge(mapping, traced([12]))["unknown"][0]
    # the file's functions do not hold the change's lines: the code may be in another file
    elsewhere = RENAMED.replace("if inspect.isfunction(item) and not inspect.ismethod(item):", "if item:")
    assert judge(mapping, traced([], elsewhere))["verdict"] == "unknown"


def test_a_function_called_while_modules_load_ran_before_the_trace(tmp_path):
    lines = RELEASE.splitlines()
    change = diff("torch/m.py", lines, "        return [1, 2, 3]", 11)
    verdict = judge(map_diff(change, None), trace_of([]))  # placed, and no traced line ran it
    assert verdict["verdict"] == "reached"
    assert "used_while_loading, called while modules load, before the trace" in verdict["reached"][0]


def test_without_a_clone_the_fixs_own_files_come_from_the_archive_beside_its_patch(tmp_path):
    import subprocess

    from bugimpact.artifacts.diffs import files_archive, fix_trees, write_fix_files
    from bugimpact.reach.run import map_fix
    # a real history: the fix changes a line the release no longer holds, and a test
    repo = tmp_path / "pytorch"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    (repo / "torch").mkdir(parents=True)
    (repo / "test").mkdir()
    commits = []
    for text, check in ((RELEASE.replace("    y = x + 1", "    y = x + 2"), "assert True\n"),
                        (RELEASE.replace("    y = x + 1", "    y = x + 3"), "assert 1\n")):
        (repo / "torch" / "m.py").write_text(text)
        (repo / "test" / "test_m.py").write_text(check)
        if not commits:
            subprocess.run(["git", "init", "-q", str(repo)], check=True)
        subprocess.run(git + ["add", "-A"], check=True)
        subprocess.run(git + ["commit", "-qm", "c"], check=True)
        commits.append(subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True,
                                      check=True).stdout.strip())
    change = subprocess.run(git + ["diff", "--full-index", *commits], capture_output=True, text=True,
                            check=True).stdout
    fix = tmp_path / "patches" / "pr1.diff"
    fix.parent.mkdir()
    fix.write_text(change)
    arm = {"patch": str(fix), "buggy_sha": commits[0], "corrected_sha": commits[1]}
    no_clone = {"fix_clone": None}
    # before the archive is shipped, nothing says where the changed line was
    assert fix_trees(no_clone, arm) == (None, None)
    assert judge(map_fix(change, no_clone, {}, arm, tmp_path), trace_of([]))["verdict"] == "unknown"
    # the archive holds the torch files at both commits (not the test), the same bytes each time
    assert write_fix_files(repo, *commits, change, files_archive(fix)) == 2
    first = files_archive(fix).read_bytes()
    write_fix_files(repo, *commits, change, files_archive(fix))
    assert files_archive(fix).read_bytes() == first and files_archive(fix).name == "pr1.files.tar.xz"
    old, new = fix_trees(no_clone, arm)
    assert "x + 2" in old.read("torch/m.py") and "x + 3" in new.read("torch/m.py")
    assert old.read("test/test_m.py") is None
    verdict = judge(map_fix(change, no_clone, {}, arm, tmp_path), trace_of([]))
    assert verdict["verdict"] == "not reached"
    assert "by the fix's own files" in " ".join(verdict["not_reached"])


PARALLEL_NATIVE = """\
#if AT_PARALLEL_NATIVE
#include <ATen/Parallel.h>

namespace at {
int num_threads() {
#ifndef C10_MOBILE
  return pool_size;
#else
  return 1;
#endif
}
} // namespace at
#endif
"""
SOMETIMES = """\
#include <ATen/Parallel.h>
#if AT_MKL_ENABLED()
int with_mkl() { return 1; }
#else
int with_mkl() { return 0; }
#endif
"""


def test_a_file_its_release_compiles_out_is_not_reached_and_the_build_decides_it(tmp_path):
    """ParallelNative.cpp is wrapped in ``#if AT_PARALLEL_NATIVE``, and the 1.x wheels are built
    with OpenMP: its changes cannot run there. Where the trace says nothing of its build (an older
    trace), or the build has the setting, it stays unknown; a change in the other branch of a
    setting's conditional is not under it."""
    path = "aten/src/ATen/ParallelNative.cpp"
    tables = Tables(tree(tmp_path, {"aten/src/ATen/native/native_functions.yaml": NATIVE,
                                   path: PARALLEL_NATIVE, "aten/src/ATen/MklOnly.cpp": SOMETIMES}))
    lines = PARALLEL_NATIVE.splitlines()
    mapping = map_diff(diff(path, lines, "  return pool_size + 0;", 7), tables)
    assert mapping.compiled_under == [[path, "AT_PARALLEL_NATIVE"]] and not mapping.unknown
    base = {"ops": {"conv2d": 1}, "lines": {}, "sources": {}, "torch_version": "1.4.0"}
    openmp = judge(mapping, dict(base, build={"parallel": "OpenMP", "mkl": True}))
    assert openmp["verdict"] == "not reached"
    assert any("compiled only under AT_PARALLEL_NATIVE, which torch 1.4.0 is built without" in n
               for n in openmp["not_reached"])
    assert judge(mapping, dict(base, build={"parallel": "native thread pool"}))["verdict"] == "unknown"
    assert judge(mapping, base)["verdict"] == "unknown"  # a trace that does not say its build
    mkl = SOMETIMES.splitlines()
    on = map_diff(diff("aten/src/ATen/MklOnly.cpp", mkl, "int with_mkl() { return 2; }", 3), tables)
    assert on.compiled_under == [["aten/src/ATen/MklOnly.cpp", "AT_MKL_ENABLED"]]
    assert judge(on, dict(base, build={"mkl": False}))["verdict"] == "not reached"
    off = map_diff(diff("aten/src/ATen/MklOnly.cpp", mkl, "int with_mkl() { return 3; }", 5), tables)
    assert not off.compiled_under and off.unknown  # the #else branch: compiled without MKL


GRID_YAML = """\
- func: grid_sampler_2d(Tensor input, Tensor grid) -> Tensor
  dispatch:
    CPU: grid_sampler_2d_cpu

- func: addmm(Tensor self, Tensor mat1, Tensor mat2) -> Tensor
"""
GRID = """\
namespace at { namespace native {
DEFINE_DISPATCH(grid_sampler_2d_cpu_kernel);
Tensor grid_sampler_2d_cpu(const Tensor& input, const Tensor& grid) {
  return grid_sampler_2d_cpu_kernel(kCPU, input, grid);
}
}}
"""
GRID_KERNEL = """\
namespace at { namespace native { namespace {
Tensor grid_sampler_2d_cpu_kernel_impl(const Tensor& input, const Tensor& grid) {
  auto pair = vec256::interleave2(input, grid);
  return pair.first;
}
}
REGISTER_DISPATCH(grid_sampler_2d_cpu_kernel, &grid_sampler_2d_cpu_kernel_impl);
}}
"""
VEC = """\
namespace at { namespace vec256 { namespace {
template <typename T>
inline std::pair<T, T> interleave2(const T& a, const T& b) {
  return std::make_pair(a, b);
}
template <>
inline std::pair<double, double> interleave2<double>(const double& a, const double& b) {
  static constexpr int swap = 0 | (2 << 4);
  return std::make_pair(permute(a, swap), b);
}
inline double operator+(const double& a, const double& b) {
  return add(a, b);
}
constexpr int kLanes = 4;
}}}
"""
VEC_PATH = "aten/src/ATen/cpu/vec256/vec256.h"


def grid_tree(root, **more):
    return Tables(tree(root, {"aten/src/ATen/native/native_functions.yaml": GRID_YAML,
                              "aten/src/ATen/native/GridSampler.cpp": GRID,
                              "aten/src/ATen/native/cpu/GridSamplerKernel.cpp": GRID_KERNEL,
                              VEC_PATH: VEC, **more}))


def test_a_header_function_only_native_code_calls_is_bounded_by_its_callers(tmp_path):
    """vec256.h is included by every CPU kernel, but a change in ``interleave2`` (pr28207) runs
    only where it is called: every place the library's sources write its name is its own
    definition or a call the tables follow, so the operators of its callers bound it."""
    lines = VEC.splitlines()
    mapping = map_diff(diff(VEC_PATH, lines, "  return std::make_pair(permute(a, 32), b);", 9),
                       grid_tree(tmp_path))
    assert set(mapping.ops) == {"grid_sampler_2d"} and not mapping.unknown, mapping.unknown
    assert "interleave2 <- grid_sampler_2d_cpu_kernel_impl" in mapping.ops["grid_sampler_2d"]
    trace = {"ops": {"addmm": 3}, "lines": {}, "sources": {}, "torch_version": "1.4.0"}
    assert judge(mapping, trace)["verdict"] == "not reached"
    assert judge(mapping, dict(trace, ops={"grid_sampler_2d": 1}))["verdict"] == "reached"


def test_a_header_function_named_where_the_tables_do_not_follow_stays_unknown(tmp_path):
    lines, change = VEC.splitlines(), "  return std::make_pair(permute(a, 32), b);"
    # called from a macro at namespace level, from native code the tables cannot follow (a pointer
    # to it), or while the library loads: each could run anywhere
    for n, (path, text) in enumerate((
            ("c10/util/Mix.h", "#define MIX_ALL(a) \\\n  interleave2(a, a)\n"),
            ("aten/src/ATen/cpu/Macros.h", "#define MIX(a, b) \\\n  interleave2(a, b)\n"),
            ("aten/src/ATen/native/Pointer.cpp",
             "namespace at { namespace native {\nvoid take() { auto f = &vec256::interleave2<double>; f(1, 2); }\n}}\n"),
            ("aten/src/ATen/Loaded.cpp", "namespace at {\nstatic auto pair = vec256::interleave2(1.0, 2.0);\n}\n"))):
        mapping = map_diff(diff(VEC_PATH, lines, change, 9), grid_tree(tmp_path / str(n), **{path: text}))
        assert not mapping.ops and mapping.unknown == [
            f"{VEC_PATH}: interleave2(), changed there, is named at {path}:{text.count(chr(10)) - (n >= 2)}, "
            "which the operator tables do not follow"], mapping.unknown
    # a caller outside ATen/native is bounded the same way: by its own callers, which lead to the
    # operators; where nothing calls it, it is no operator's and stays unknown
    mixer = "namespace at {\ninline double mix(double a) {\n  return interleave2(a, a).first;\n}\n}\n"
    kernel = GRID_KERNEL.replace("vec256::interleave2(input, grid);", "vec256::interleave2(input, mix(1.0));")
    mapping = map_diff(diff(VEC_PATH, lines, change, 9), grid_tree(tmp_path / "m", **{
        "aten/src/ATen/cpu/Mix.h": mixer, "aten/src/ATen/native/cpu/GridSamplerKernel.cpp": kernel}))
    assert set(mapping.ops) == {"grid_sampler_2d"} and not mapping.unknown, mapping.unknown
    mapping = map_diff(diff(VEC_PATH, lines, change, 9), grid_tree(tmp_path / "u", **{"aten/src/ATen/cpu/Mix.h": mixer}))
    assert "aten/src/ATen/cpu/Mix.h: mix() implements no operator" in " ".join(mapping.unknown)
    mapping = map_diff(diff(VEC_PATH, lines, change, 9), grid_tree(tmp_path / "l", **{
        "aten/src/ATen/cpu/Mix.h": mixer, "c10/Loaded.cpp": "static double mixed = at::mix(2.0);\n"}))
    assert mapping.unknown == [f"{VEC_PATH}: mix(), which leads to the change, in aten/src/ATen/cpu/Mix.h, is named "
                               "at c10/Loaded.cpp:1, which the operator tables do not follow"], mapping.unknown
    # a comment, a declaration and a using-declaration naming it are not uses, nor is code that
    # no Python workload runs (a benchmark binary)
    mapping = map_diff(diff(VEC_PATH, lines, change, 9), grid_tree(tmp_path / "c", **{
        "c10/Note.h": "// interleave2 is in vec256\n",
        "binaries/bench_vec.cc": "int main() { interleave2(1.0, 2.0); }\n",
        "aten/src/ATen/cpu/Declared.h": "namespace at {\ntemplate <typename T>\nstd::pair<T, T> interleave2(const T& a,\n"
                                        "    const T& b);\nusing vec256::interleave2;\n}\n"}))
    assert set(mapping.ops) == {"grid_sampler_2d"}
    # an operator runs where its name is never written, and a line outside any function is the
    # whole header's: both as before
    for at, change in ((12, "  return add(b, a);"), (14, "constexpr int kLanes = 8;")):
        mapping = map_diff(diff(VEC_PATH, lines, change, at), grid_tree(tmp_path / f"op{at}"))
        assert not mapping.ops and mapping.unknown == [
            f"{VEC_PATH}: outside ATen's native kernels, which the operator tables do not map"]


def test_a_patch_alone_is_read_at_the_commits_the_clone_says_it_was_made_between(tmp_path):
    """A fix given as a patch file (``bugs.fixes.<id>.patch``) with a clone: the blobs its index
    lines name find the commit that made it, and the operator tables are read there. Before, its
    reach was ``unknown`` ("no operator tables: set resolve.clone", with the clone set): pr28613
    and pr37788 in a VGG-X study."""
    from conftest import git

    from bugimpact.artifacts.diffs import landed_commits
    from bugimpact.reach.run import map_fix
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    path = "aten/src/ATen/native/cpu/GridSamplerKernel.cpp"
    tree(repo, {"aten/src/ATen/native/native_functions.yaml": GRID_YAML,
                "aten/src/ATen/native/GridSampler.cpp": GRID, path: GRID_KERNEL})
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    buggy = git(repo, "rev-parse", "HEAD")
    (repo / path).write_text(GRID_KERNEL.replace("pair.first", "pair.second"))
    git(repo, "commit", "-qam", "the fix")
    corrected = git(repo, "rev-parse", "HEAD")
    (repo / "aten/src/ATen/native/GridSampler.cpp").write_text(GRID + "// later\n")
    git(repo, "commit", "-qam", "after it")
    fix = tmp_path / "fix.diff"
    fix.write_text(git(repo, "diff", buggy, corrected) + "\n")
    assert landed_commits(repo, fix.read_text()) == (buggy, corrected)
    mapping = map_fix(fix.read_text(), {"fix_clone": str(repo)}, {}, {"patch": str(fix)}, tmp_path / "tables")
    assert set(mapping.ops) == {"grid_sampler_2d"} and corrected[:12] in mapping.tables
    # a patch whose blobs the clone lacks (made by hand, or from another history): no commits,
    # and the error says what to give
    other = fix.read_text().replace("pair.second", "pair.third")
    other = re.sub(r"(?m)^index [0-9a-f]+\.\.[0-9a-f]+", "index 1234567..89abcde", other)
    assert landed_commits(repo, other) is None
    with pytest.raises(LookupError, match="holds no commit that makes this patch"):
        map_fix(other, {"fix_clone": str(repo)}, {}, {"patch": str(fix)}, tmp_path / "tables")


CMAKE = """\
if (NOT INTERN_BUILD_MOBILE)
  list(APPEND TORCH_SRCS
    ${TORCH_SRC_DIR}/csrc/autograd/engine.cpp
    ${TORCH_SRC_DIR}/csrc/cuda/comm.cpp)
endif()

add_library(torch ${TORCH_SRCS})
"""
NCCL_BLOCK = """
if (USE_NCCL)
  list(APPEND TORCH_SRCS ${TORCH_SRC_DIR}/csrc/cuda/nccl.cpp)  # moved from torch_python
  target_link_libraries(torch PRIVATE __caffe2_nccl)
  target_compile_definitions(torch PRIVATE USE_NCCL)
endif()
"""


def udiff(path, old, new):
    lines = difflib.unified_diff(old.splitlines(), new.splitlines(), f"a/{path}", f"b/{path}", lineterm="", n=1)
    return f"diff --git a/{path} b/{path}\n" + "\n".join(lines) + "\n"


def build_change(tmp_path, old, new, sources):
    """A change of caffe2/CMakeLists.txt from ``old`` to ``new``, mapped with the tables of a tree
    that holds ``new`` and ``sources``."""
    path = "caffe2/CMakeLists.txt"
    files = {"aten/src/ATen/native/native_functions.yaml": GRID_YAML, **sources}
    tables = Tables(tree(tmp_path / "new", {**files, path: new}))
    return map_diff(udiff(path, old, new), tables, tree(tmp_path / "old", {**files, path: old}), tables.tree)


def test_a_build_file_changed_only_under_a_cuda_option_is_not_reached_on_cpu(tmp_path):
    """pr27124 moves nccl.cpp into libtorch under ``if (USE_NCCL)``, links NCCL there and defines
    USE_NCCL for it: every source, library and macro it names is CUDA-only code, so a CPU run runs
    none of it. Before, any build file was unknown."""
    cuda = {"torch/csrc/cuda/nccl.cpp": "#ifdef USE_NCCL\nvoid broadcast() {}\n#endif\n"}
    mapping = build_change(tmp_path, CMAKE, CMAKE + NCCL_BLOCK, cuda)
    assert mapping.cuda == ["caffe2/CMakeLists.txt (every change under USE_NCCL)"] and not mapping.unknown
    trace = {"ops": {"addmm": 1}, "lines": {}, "sources": {}, "torch_version": "1.4.0", "device": "cpu"}
    assert judge(mapping, trace)["verdict"] == "not reached on cpu"
    assert judge(mapping, dict(trace, device="cuda"))["verdict"] == "unknown"
    # a source taken out of a list inside the block: the same
    removed = build_change(tmp_path / "r", CMAKE + NCCL_BLOCK,
                           CMAKE + NCCL_BLOCK.replace("  list(APPEND TORCH_SRCS ${TORCH_SRC_DIR}/csrc/cuda/nccl.cpp)"
                                                      "  # moved from torch_python\n", ""), cuda)
    assert removed.cuda and not removed.unknown


def test_a_build_file_change_a_cpu_build_runs_or_cpu_code_reads_stays_unknown(tmp_path):
    cuda = {"torch/csrc/cuda/nccl.cpp": "#ifdef USE_NCCL\nvoid broadcast() {}\n#endif\n"}
    cases = (
        # the macro it defines is tested by a CPU source too
        (CMAKE + NCCL_BLOCK, {"aten/src/ATen/Context.cpp": "#if defined(USE_NCCL)\nint n = 1;\n#endif\n"},
         "target_compile_definitions defines USE_NCCL, which code outside CUDA tests"),
        # a CPU build runs it: not under the option, under its negation, or in its else branch
        (CMAKE + NCCL_BLOCK.replace("if (USE_NCCL)", "if (NOT USE_NCCL)"), {}, "runs in builds without CUDA too"),
        (CMAKE + NCCL_BLOCK.replace("if (USE_NCCL)", "if (USE_NCCL OR USE_GLOO)"), {}, "runs in builds without CUDA"),
        (CMAKE + "if (USE_CUDA)\nelse()\n  list(APPEND TORCH_SRCS ${TORCH_SRC_DIR}/csrc/cuda/comm.cpp)\nendif()\n",
         {}, "runs in builds without CUDA too"),
        # a source that is not CUDA-only, and a flag of every file
        (CMAKE + NCCL_BLOCK.replace("csrc/cuda/nccl.cpp", "csrc/autograd/engine.cpp"), {},
         "list() names ${TORCH_SRC_DIR}/csrc/autograd/engine.cpp, not CUDA-only"),
        (CMAKE + "if (USE_CUDA)\n  set(CMAKE_CXX_FLAGS \"${CMAKE_CXX_FLAGS} -O0\")\nendif()\n", {},
         "set(), which can change what every file is built with"))
    for n, (new, sources, why) in enumerate(cases):
        mapping = build_change(tmp_path / str(n), CMAKE, new, {**cuda, **sources})
        assert not mapping.cuda and len(mapping.unknown) == 1 and why in mapping.unknown[0], (n, mapping.unknown)
    # a changed condition inside the option changes which commands of its block run
    nested = CMAKE + "if (USE_CUDA)\n  if (CUDNN_STATIC_LINKAGE)\n    set(CMAKE_CXX_FLAGS \"-O0\")\n  endif()\nendif()\n"
    mapping = build_change(tmp_path / "nested", nested, nested.replace("CUDNN_STATIC_LINKAGE", "CUDNN_STATIC"), cuda)
    assert not mapping.cuda and "set(), which can change what every file is built with (line 10, in its block)" \
        in mapping.unknown[0], mapping.unknown
    # the top-level CMakeLists.txt is a build input, not a document
    assert kind_of("CMakeLists.txt") == "cpp" and kind_of("README.txt") == "not_shipped"
