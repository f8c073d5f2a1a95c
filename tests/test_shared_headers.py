"""A fix's change to one of ATen's shared headers, judged by what it changes (issue 59, item 4): the
names its changed lines are in, the release's files that name them (a real git repository), and
the refusals where they are too many or where no library rebuilds one."""
import subprocess

import pytest

from bugimpact.artifacts import onefix
from bugimpact.overrides import shared_headers
from bugimpact.overrides.parts import Refused

HEADER = b"""#pragma once
#include <ATen/ATen.h>

namespace at {

enum class MemOverlap { NO, YES };

#define AT_CHECK_OVERLAP(t) \\
  check_overlap(t, 1)

CAFFE2_API std::vector<Dimname>
unify_from_right(DimnameList names, DimnameList other);

inline int64_t scaled(int64_t x) {
  return 2 * x;
}

inline int64_t twice_scaled(int64_t x) {
  return scaled(scaled(x));
}

static_assert(sizeof(int) == 4, "int");

} // namespace at
"""


def changed(old, new):
    return shared_headers.changed_names(HEADER, HEADER.replace(old, new))


def test_a_shared_headers_change_is_named_by_what_each_changed_line_is_in():
    # a body: the function, and the header's own inline functions that call it
    assert changed(b"return 2 * x;", b"return 3 * x;") == ({"scaled", "twice_scaled"}, [])
    assert changed(b"{ NO, YES }", b"{ NO, YES, PARTIAL }") == ({"MemOverlap"}, [])  # an enum
    assert changed(b"check_overlap(t, 1)", b"check_overlap(t, 2)") == ({"AT_CHECK_OVERLAP"}, [])  # a macro's body
    # a declaration over two lines, its return type changed
    assert changed(b"CAFFE2_API std::vector<Dimname>\n", b"CAFFE2_API optional<std::vector<Dimname>>\n") == \
        ({"unify_from_right"}, [])
    # an include, a comment, a namespace's brace: nothing of their own
    assert changed(b"#include <ATen/ATen.h>\n", b"#include <ATen/ATen.h>\n#include <c10/macros/Macros.h>\n") == \
        (set(), [])
    assert changed(b"} // namespace at", b"}  // namespace at, the end") == (set(), [])
    # pr26181: a class template's specialization added, its head on the line before its braces
    assert changed(b"static_assert(", b"template <typename T>\nstruct traits<T&> : public traits<T> {};\n"
                   b"static_assert(") == ({"traits"}, [])
    # pr37098: a macro added under each compiler's branch, which no file of the release names
    added = b"#define AT_SKIP_OVERFLOW __attribute__((no_sanitize(\"signed-integer-overflow\")))\n"
    assert changed(b"namespace at {\n", b"namespace at {\n#if defined(__clang__)\n" + added + b"#else\n"
                   b"#define AT_SKIP_OVERFLOW\n#endif\n") == ({"AT_SKIP_OVERFLOW"}, [])
    # a statement that declares nothing: which includers compile it cannot be said
    assert changed(b"sizeof(int) == 4", b"sizeof(int) == 8") == \
        (set(), ['static_assert(sizeof(int) == 4, "int");', 'static_assert(sizeof(int) == 8, "int");'])


@pytest.fixture
def release(tmp_path):
    """A release tree whose files name a shared header's functions: op and stub files, ATen's
    own .cpp, a test and a CUDA file (never rebuilt for a CPU run), another header's inline code
    and the autograd layer."""
    repo = tmp_path / "clone"
    files = {
        "aten/src/ATen/Overlap.h": HEADER.decode(),
        "aten/src/ATen/Overlap.cpp": "std::vector<Dimname> unify_from_right(DimnameList a, DimnameList b) {}\n",
        "aten/src/ATen/native/BinaryOps.cpp": "Tensor add(Tensor a) { return a * scaled(2); }\n",
        "aten/src/ATen/native/cpu/BinaryOpsKernel.cpp": "void k() { twice_scaled(1); }\n",
        "aten/src/ATen/test/overlap_test.cpp": "TEST(O, S) { scaled(1); }\n",
        "aten/src/ATen/native/cuda/BinaryOps.cu": "void g() { scaled(1); }\n",
        "aten/src/ATen/native/Unrelated.cpp": "Tensor sub(Tensor a) { return a; }\n",
        "aten/src/ATen/WrapScalar.h": "inline int w() { return AT_CHECK_OVERLAP(1); }\n",
        "torch/csrc/autograd/utils/wrap.cpp": "int u() { return MemOverlap::NO == MemOverlap::NO; }\n",
    }
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "release"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    return str(repo), commit


def test_the_files_that_name_a_change_are_rebuilt_and_the_others_left_alone(release):
    clone, commit = release
    rebuilt = shared_headers.rebuilt_for({"aten/src/ATen/Overlap.h": (HEADER, HEADER.replace(b"2 * x", b"3 * x"))},
                                         clone, commit, {"aten/src/ATen/Overlap.cpp": b""}, "9.9.0")
    # the op file and the stub kernel that call it; not the test, the CUDA file or an unrelated op file
    assert rebuilt == {"aten/src/ATen/native/BinaryOps.cpp": ["scaled"],
                       "aten/src/ATen/native/cpu/BinaryOpsKernel.cpp": ["twice_scaled"]}
    added = HEADER.replace(b"namespace at {\n", b"namespace at {\n#define AT_SKIP_OVERFLOW\n")
    assert shared_headers.rebuilt_for({"aten/src/ATen/Overlap.h": (HEADER, added)}, clone, commit, {}, "9.9.0") == {}
    retyped = HEADER.replace(b"DimnameList other);", b"DimnameList other, bool strict);")
    assert shared_headers.rebuilt_for({"aten/src/ATen/Overlap.h": (HEADER, retyped)}, clone, commit, {}, "9.9.0") == \
        {"aten/src/ATen/Overlap.cpp": ["unify_from_right"]}  # ATen's own .cpp: interposed


def test_a_change_named_where_no_library_rebuilds_or_in_too_many_files_is_refused_with_the_count(release, monkeypatch):
    clone, commit = release
    for old, new, why in ((b"{ NO, YES }", b"{ NO, YES, PARTIAL }", "torch/csrc/autograd/utils/wrap.cpp names it, "
                                                                     "code no library rebuilds"),
                          (b"(t, 1)", b"(t, 2)", "aten/src/ATen/WrapScalar.h names it, a header whose includers"),
                          (b"== 4", b"== 8", "names nothing its includers use")):
        with pytest.raises(Refused, match=why):
            shared_headers.rebuilt_for({"aten/src/ATen/Overlap.h": (HEADER, HEADER.replace(old, new))}, clone, commit,
                                       {}, "9.9.0")
    monkeypatch.setattr(shared_headers, "MOST", 1)
    with pytest.raises(Refused, match=r"2 of torch 9.9.0's compiled files name it, more than the 1 a library "
                                      r"rebuilds: an ABI change with 2 includers"):
        shared_headers.rebuilt_for({"aten/src/ATen/Overlap.h": (HEADER, HEADER.replace(b"2 * x", b"3 * x"))},
                                   clone, commit, {}, "9.9.0")


def test_a_fix_of_a_shared_headers_code_and_an_op_file_is_a_kernel_fix_its_header_judged_at_the_build():
    """pr24921's shape: NamedTensorUtils.h's code and an op file. Its header's part refused it
    before, by name; the header is now carried to the build, where the tree says who names it; so
    is one of ATen/detail/, and (seen on the corpus: pr37098's c10/macros/Macros.h, pr28843's vec256
    and c10 headers, refused by their part before) one of c10, vec256, ATen/core or TH."""
    def section(path, old, new):
        return f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-{old}\n+{new}\n"
    diff = section("aten/src/ATen/NamedTensorUtils.h", "inline int f() { return 1; }", "inline int f() { return 2; }") \
        + section("aten/src/ATen/native/Copy.cpp", "int x = 1;", "int x = 2;")
    _, _, kernels = onefix.isolate(diff)
    assert kernels.part == "op" and kernels.files["shared"] == ["aten/src/ATen/NamedTensorUtils.h"]
    assert kernels.built == ["aten/src/ATen/NamedTensorUtils.h", "aten/src/ATen/native/Copy.cpp"]
    assert onefix.verdict(diff).startswith("yes: kernels (op: ")
    iterator = diff.replace("aten/src/ATen/NamedTensorUtils.h", "aten/src/ATen/native/TensorIterator.h").replace(
        "native/Copy.cpp", "native/TensorIterator.cpp")  # infrastructure's header: the same judgment
    assert onefix.verdict(iterator) == "yes: kernels (infra: aten/src/ATen/native/TensorIterator.cpp, " \
                                      "aten/src/ATen/native/TensorIterator.h)"
    detail = diff.replace("aten/src/ATen/NamedTensorUtils.h", "aten/src/ATen/detail/FunctionTraits.h")
    assert onefix.isolate(detail)[2].files["shared"] == ["aten/src/ATen/detail/FunctionTraits.h"]  # pr26181's
    for header in ("aten/src/ATen/cpu/vec256/vec256_base.h", "c10/macros/Macros.h", "aten/src/ATen/core/Dimname.h",
                   "aten/src/TH/THGeneral.h.in"):
        assert onefix.isolate(diff.replace("aten/src/ATen/NamedTensorUtils.h", header))[2].files["shared"] == [header]
    # a generator's header, a CUDA header, TorchScript's: still their part's
    for header in ("aten/src/ATen/core/TensorBody.h", "aten/src/ATen/cuda/CUDAContext.h"):
        assert "shared" not in onefix.isolate(diff.replace("aten/src/ATen/NamedTensorUtils.h", header))[2].files
    assert onefix.verdict(diff.replace("aten/src/ATen/NamedTensorUtils.h", "torch/csrc/jit/ir.h")).startswith("no: jit")
