"""A compiled fix's override arm on fixes the project has never seen: the release's own source from
any clone (its tag, its commit, or its branch point found by the wheel's headers), the fix made on
it the one way it goes, the build closure, and a check that cannot pass by accident, with its
failures recovered and shown. Real git repositories, made here; no torch is needed."""
import argparse
import io
import json
import re
import subprocess
import zipfile
from pathlib import Path

import pytest
from conftest import git

from bugimpact import steps
from bugimpact.framework import patch
from bugimpact.framework.apply import NoDirection, NotPlaced, direction_of, merged
from bugimpact.overrides import arm as override_arm
from bugimpact.overrides import check, reconstruct, release_source
from bugimpact.overrides.parts import Refused

OP = "aten/src/ATen/native/Foo.cpp"
HEADER = "aten/src/ATen/native/Foo.h"
RELEASE_HEADER = b"#pragma once\nint foo_version();\n"


def commit(repo, files, message, when):
    for path, data in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_bytes(data)
    git(repo, "add", "-A")
    stamp = {"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
    git(repo, "commit", "-qm", message, env=stamp)
    return git(repo, "rev-parse", "HEAD")


def kernel(body):
    return (b'#include <ATen/ATen.h>\n#include "Foo.h"\nnamespace at { namespace native {\n'
            b"Tensor foo(const Tensor& self) {\n" + body + b"\n}\n}}\n")


def mirror(tmp_path):
    """A master history's first commit: the op file, its header and the YAML tables. Returns the repo."""
    repo = tmp_path / "mirror"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "master")
    commit(repo, {OP: kernel(b"  return self * 1;"), HEADER: b"#pragma once\n", "aten/src/ATen/ATen.h": b"",
                  "aten/src/ATen/native/native_functions.yaml": b"- func: foo(Tensor self) -> Tensor\n",
                  "tools/autograd/derivatives.yaml": b"[]\n"}, "base", "2020-01-01T00:00:00")
    return repo


@pytest.fixture
def history(tmp_path):
    """A master history without tags: the release is cut at ``cut`` (the wheel ships its header);
    ``before`` is a fix that landed before the cut, ``after`` one that landed after it."""
    repo = mirror(tmp_path)
    shas = {"base": git(repo, "rev-parse", "HEAD")}
    shas["before"] = commit(repo, {OP: kernel(b"  return self * 2;  // fixed before the cut")},
                            "Fix foo before the cut (#1)", "2020-02-01T00:00:00")
    shas["cut"] = commit(repo, {HEADER: RELEASE_HEADER}, "the release is cut here", "2020-02-10T00:00:00")
    shas["after"] = commit(repo, {OP: kernel(b"  return self * 3;  // fixed after the cut"),
                                  HEADER: b"#pragma once\nint foo_version();\nint later();\n"},
                           "Fix foo after the cut (#2)", "2020-02-20T00:00:00")
    return repo, shas


def wheel(tmp_path, version="9.9.0", commit_sha="0" * 40, headers=None):
    """A wheel-shaped zip: the headers the release ships and its version stamp, made after the cut."""
    path = tmp_path / f"torch-{version}-cp37-cp37m-linux_x86_64.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in (headers or {"ATen/native/Foo.h": RELEASE_HEADER, "ATen/ATen.h": b""}).items():
            archive.writestr(zipfile.ZipInfo(f"torch/include/{name}", (2020, 3, 5, 0, 0, 0)), data)
        archive.writestr(zipfile.ZipInfo("torch/version.py", (2020, 3, 5, 0, 0, 0)),
                         f"__version__ = '{version}'\ngit_version = '{commit_sha}'\n")
    return path


def fix_of(repo, sha):
    parent = git(repo, "rev-parse", f"{sha}^")
    diff = git(repo, "diff", "--full-index", parent, sha) + "\n"
    return override_arm.Fix(patch.parse(diff), str(repo), parent, sha), parent


def found(repo, tmp_path, sha, arm=None, record="rec.json", **wheel_kw):
    fix, parent = fix_of(repo, sha)
    release = release_source.Release.of_wheel(wheel(tmp_path, **wheel_kw), "9.9.0")
    spec = {"buggy_sha": parent, "corrected_sha": sha, **(arm or {})}
    return release_source.find({"fix_clone": str(repo)}, spec, release, [OP], fix, tmp_path / record)


# --- 1. the release's source from any clone -------------------------------------------------------

def test_a_clone_without_the_release_tag_gives_its_source_by_the_branch_point_of_its_headers(history, tmp_path):
    """Before: "no source of torch 9.9.0's own ...: clone ... has no tag v9.9.0", and nothing named a
    way out. Now the branch point is found by the wheel's headers and the fix's history places it."""
    repo, shas = history
    source = found(repo, tmp_path, shas["before"])
    facts = source.describe()
    assert source.reconstructed and facts["branch_point"] == shas["cut"] and facts["fix"] == "in the branch point"
    assert facts["headers_matched"] == [2, 2] and source.origin.startswith("reconstructed: torch 9.9.0's branch point")
    assert source.files[OP] == kernel(b"  return self * 2;  // fixed before the cut")
    assert "aten/src/ATen/native/native_functions.yaml" in source.yamls
    assert facts["tree"] == {"clone": str(repo), "commit": shas["cut"], "changed": []}


def test_the_branch_point_is_searched_once_per_release_and_shared_by_its_fixes(history, tmp_path, monkeypatch):
    repo, shas = history
    found(repo, tmp_path, shas["before"])
    record = json.loads((tmp_path / "rec.json").read_text())
    assert record["branch_point"] == shas["cut"] and record["version"] == "9.9.0"

    def searched_again(*args, **kwargs):
        raise AssertionError("the branch point was searched again")
    monkeypatch.setattr(reconstruct, "branch_point", searched_again)
    again = found(repo, tmp_path, shas["after"])  # another fix of the same release reads the record
    assert again.describe()["branch_point"] == shas["cut"]


def test_a_release_source_record_edited_to_name_another_commit_is_searched_again_and_named(history, tmp_path, caplog):
    """Seen: a reconstruction record edited to name master's head was used as is: master's
    Convolution.cpp was rebuilt, its origin line repeated the record's date and header count, and
    the check said verified. A record is read again against its commit's headers."""
    repo, shas = history
    found(repo, tmp_path, shas["before"])
    record = tmp_path / "rec.json"
    made = json.loads(record.read_text())
    for edit, says in (({"branch_point": shas["after"]}, f"its branch point {shas['after'][:12]} was made "),
                       ({"branch_point": "f" * 40}, f"its branch point ffffffffffff is not a commit of {repo}"),
                       ({"branch_point": shas["base"], "branch_point_date": "2020-01-01T00:00:00+00:00"},
                        f"its branch point {shas['base'][:12]} holds 1 of the wheel's 2 headers, not the [2, 2]")):
        record.write_text(json.dumps({**made, **edit}))
        caplog.clear()
        source = found(repo, tmp_path, shas["before"])
        assert source.describe()["branch_point"] == json.loads(record.read_text())["branch_point"] == shas["cut"]
        assert f"{record}: {says}" in caplog.text and "searched again" in caplog.text


def test_a_fix_after_the_cut_is_in_the_release_only_where_its_notes_list_it(history, tmp_path):
    repo, shas = history
    listed = found(repo, tmp_path, shas["after"])  # no other release named: this release's notes list it
    assert listed.describe()["fix"].startswith("cherry-picked")
    assert listed.files[OP] == kernel(b"  return self * 3;  // fixed after the cut")
    assert listed.describe()["tree"]["changed"] == [OP]
    other = found(repo, tmp_path, shas["after"], {"notes_release": "v9.10.0"})
    assert other.describe()["fix"] == "not in the release: landed after the branch point, listed in v9.10.0's notes"
    assert other.files[OP] == kernel(b"  return self * 2;  // fixed before the cut")


def test_a_clone_holding_the_releases_own_commit_gives_the_files_there(history, tmp_path):
    repo, shas = history
    source = found(repo, tmp_path, shas["after"], commit_sha=shas["cut"])
    assert not source.reconstructed and source.origin.startswith(f"clone {repo} at the release's commit")
    assert source.files[OP] == kernel(b"  return self * 2;  // fixed before the cut")
    assert not (tmp_path / "rec.json").exists()  # nothing to reconstruct


def test_with_no_source_the_refusal_names_the_settings_that_would_give_one(tmp_path):
    fix = override_arm.Fix([])
    release = release_source.Release.of_wheel(wheel(tmp_path), "9.9.0")
    with pytest.raises(LookupError) as refused:
        release_source.find({}, {}, release, [OP], fix, tmp_path / "rec.json")
    text = str(refused.value)
    assert "no source of torch 9.9.0's own aten/src/ATen/native/Foo.cpp: no clone, no API, no patch file" in text
    for way in ("artifacts.onefix.clone", "resolve.clone", "artifacts.onefix.api: true", "bin/release-sources"):
        assert way in text


def test_the_artifact_step_studies_an_unseen_fix_from_a_plain_clone(history, tmp_path, monkeypatch):
    """The whole kernel part of an arm, as the artifact step makes it from a clone without tags."""
    repo, shas = history
    monkeypatch.chdir(tmp_path)  # the reconstruction's record goes under results/
    fix, parent = fix_of(repo, shas["before"])
    kernels = override_arm.parts.Kernels("op", {"op": [OP]}, git(repo, "diff", "--full-index", parent, shas["before"]) + "\n")
    spec = {"arm": "buggy", "buggy_sha": parent, "corrected_sha": shas["before"]}
    in_release, apply, part = override_arm.prepare(kernels, {"fix_clone": str(repo)}, spec, wheel(tmp_path),
                                                   "9.9.0", tmp_path / "artifact")
    assert in_release and apply == "reverse"
    assert (Path(part["tree"]) / "arm" / OP).read_bytes() == kernel(b"  return self * 1;")  # the fix taken back
    assert (Path(part["tree"]) / "release" / OP).read_bytes() == kernel(b"  return self * 2;  // fixed before the cut")
    assert part["placement"] == [{"file": OP, "line": 1, "placed": "three-way merge of the fix's own file"}]
    assert list(Path("results/release-sources").glob("torch-9.9.0-*.json"))


# --- 2. placement that tells the directions apart --------------------------------------------------

WRAPPED = ("diff --git a/x.cpp b/x.cpp\n--- a/x.cpp\n+++ b/x.cpp\n@@ -1,5 +1,7 @@\n"
           " void f(Tensor& t) {\n   auto n = t.numel();\n-  t.zero_();\n+  if (n > 0) {\n+  t.zero_();\n+  }\n"
           "   t.resize_({n});\n }\n")


def test_a_removed_line_that_reappears_inside_the_added_block_does_not_make_forwards_apply():
    """Seen twice on unseen fixes: "the diff applies both forwards and in reverse". Forwards, the
    removed line is found inside the added block, without the context around it; in reverse, the
    whole change and its context stand: the release holds the fix."""
    holds = b"void f(Tensor& t) {\n  auto n = t.numel();\n  if (n > 0) {\n  t.zero_();\n  }\n  t.resize_({n});\n}\n"
    direction, files, _ = direction_of(patch.parse(WRAPPED), {"x.cpp": holds})
    assert direction == "reverse"
    assert files["x.cpp"] == b"void f(Tensor& t) {\n  auto n = t.numel();\n  t.zero_();\n  t.resize_({n});\n}\n"


def test_a_diff_that_places_both_ways_on_equal_evidence_is_refused():
    diff = ("diff --git a/x.cpp b/x.cpp\n--- a/x.cpp\n+++ b/x.cpp\n@@ -1,3 +1,3 @@\n a();\n-b();\n+c();\n d();\n")
    both = b"a();\nb();\nd();\na();\nc();\nd();\n"
    with pytest.raises(NoDirection, match="applies both forwards and in reverse .* 3 lines agreeing either way"):
        direction_of(patch.parse(diff), {"x.cpp": both})


def test_a_three_way_merge_keeps_what_the_release_changed_around_the_fix():
    old, new = b"a\nb\nc\nd\ne\n", b"a\nb\nC\nd\ne\n"
    release = b"a0\nb\nc\nd\ne\nf\n"  # the release edited a line near the fix and added another
    assert merged(release, old, new, "old", "x") == b"a0\nb\nC\nd\ne\nf\n"
    assert merged(b"a0\nb\nC\nd\ne\nf\n", old, new, "new", "x") == release
    with pytest.raises(NotPlaced, match=r"x: 1 of the fix's changes conflict with the release's own lines \(near line 3\)"):
        merged(b"a\nb\nK\nd\ne\n", old, new, "old", "x")


def test_a_fix_whose_lines_the_release_changed_after_it_is_refused_naming_those_commits(history, tmp_path):
    repo, shas = history
    commit(repo, {OP: kernel(b"  return self * 4;  // changed again")}, "Rework foo (#3)", "2020-03-02T00:00:00")
    head = git(repo, "rev-parse", "HEAD")
    fix, _ = fix_of(repo, shas["before"])
    files = {OP: (repo / OP).read_bytes()}
    with pytest.raises(NotPlaced) as refused:
        fix.made(files, "new", head)
    assert "the release changed them after the fix: 2 commit(s) to Foo.cpp" in str(refused.value)
    assert "Rework foo (#3)" in str(refused.value)


def test_test_helpers_no_training_imports_never_refuse_a_fix_and_are_named():
    from bugimpact.artifacts import onefix
    diff = ("diff --git a/torch/testing/_internal/common_nn.py b/torch/testing/_internal/common_nn.py\n"
            "--- a/torch/testing/_internal/common_nn.py\n+++ b/torch/testing/_internal/common_nn.py\n"
            "@@ -1 +1 @@\n-x = 1\n+x = 2\n"
            f"diff --git a/{OP} b/{OP}\n--- a/{OP}\n+++ b/{OP}\n@@ -1 +1 @@\n-int a;\n+int b;\n")
    python, kinds, kernels = onefix.isolate(diff)
    assert python == "" and kinds["not_imported"] == ["torch/testing/_internal/common_nn.py"]
    assert kernels.built == [OP] and onefix.verdict(diff).startswith("yes: kernels (op")


# --- 3. the build closure -------------------------------------------------------------------------

def test_headers_that_the_wheels_own_headers_include_are_found_in_the_source():
    """Seen on an unseen fix: a header the wheel ships includes one it does not ship, and the
    search did not follow it: a compile error."""
    tree = {OP: b'#include <ATen/native/Shipped.h>\n', "aten/src/ATen/native/Missing.h": b"int m();\n"}
    shipped = {"ATen/native/Shipped.h": b'#pragma once\n#include <ATen/native/Missing.h>\n'}
    includes, standins = release_source.closure(tree.get, [OP], shipped)
    assert includes == {"ATen/native/Missing.h": b"int m();\n"} and standins == []


def test_what_the_release_keeps_to_itself_is_taken_from_its_own_symbol_table():
    from bugimpact.overrides import release_locals
    stub = "_ZN2at6native12DispatchStubIPFvRNS_14TensorIteratorEN3c106ScalarEENS0_15leaky_relu_stubEE4AVX2E"
    missing_stub = stub.replace("4AVX2E", "6AVX512E")
    table = {"_ZN2at6native18get_cpu_capabilityEv": ("libtorch_cpu.so", "t", 0xBC8380),
             stub: ("libtorch_cpu.so", "d", 0xE6C7950), "_ZN2at6native5stateE": ("libtorch_cpu.so", "b", 0x10)}
    entries, rest = release_locals.resolve(["_ZN2at6native18get_cpu_capabilityEv", stub, missing_stub,
                                            "_ZN2at6native5stateE", "_ZN2at6native6hiddenEi"], table)
    assert [(e["symbol"], e["how"]) for e in entries] == [
        ("at::native::get_cpu_capability()", "call"),
        ("at::native::DispatchStub<void (*)(at::TensorIterator&, c10::Scalar), at::native::leaky_relu_stub>::AVX2", "value"),
        ("at::native::DispatchStub<void (*)(at::TensorIterator&, c10::Scalar), at::native::leaky_relu_stub>::AVX512", "null")]
    assert rest == ["at::native::state", "at::native::hidden(int)"]  # state is not copied; neither is unknown
    source = release_locals.source(entries)
    assert "jmp *bugimpact_local_slots+0(%rip)" in source and f"+ {0xBC8380}u" in source
    so = subprocess.run(["g++", "-x", "c++", "-fPIC", "-c", "-o", "/dev/null", "-"], input=source, text=True,
                        capture_output=True)
    assert so.returncode == 0, so.stderr


def test_a_helper_another_file_calls_gets_that_file_rebuilt_too(tmp_path):
    """Before, nothing compared what reach says the fix can change with what the library replaces:
    a changed exported helper of A.cpp, called by B.cpp's kernel, kept the release's behaviour."""
    from bugimpact.framework.tables import DirTree, Tables
    native = tmp_path / "aten/src/ATen/native"
    native.mkdir(parents=True)
    (native / "native_functions.yaml").write_text("- func: bar(Tensor self) -> Tensor\n- func: baz(Tensor self) -> Tensor\n")
    helper = "namespace at { namespace native {\nint scale(int x) {\n  return x * 2;\n}\n}}\n"
    (native / "A.cpp").write_text(helper)
    (native / "B.cpp").write_text("namespace at { namespace native {\nTensor bar(const Tensor& s) {\n  return s * scale(1);\n}\n"
                                  "Tensor baz(const Tensor& s) {\n  return s;\n}\n}}\n")
    tables = Tables(DirTree(tmp_path))
    a = "aten/src/ATen/native/A.cpp"
    need = override_arm.caller_files(tables, {a: helper.encode()}, {a: helper.replace("* 2", "* 3").encode()})
    assert need == {"aten/src/ATen/native/B.cpp": {"bar"}}
    (native / "cpu").mkdir()
    (native / "cpu/BKernel.cpp").write_text("namespace at { namespace native {\nvoid kern(int y) {\n  scale(y);\n}\n"
                                            "REGISTER_DISPATCH(bar_stub, &kern);\n}}\n")
    (native / "B.cpp").write_text("namespace at { namespace native {\nTensor bar(const Tensor& s) {\n  bar_stub(kCPU, 1);\n}\n}}\n")
    # a stub kernel that calls it: that kernel file is rebuilt (its kernel goes into the stub), not
    # the op file calling the stub, which reaches the library's kernel through the stub
    need = override_arm.caller_files(Tables(DirTree(tmp_path)), {a: helper.encode()},
                                     {a: helper.replace("* 2", "* 3").encode()})
    assert need == {"aten/src/ATen/native/cpu/BKernel.cpp": {"bar_stub"}}
    # two ways to one operator: each way's files are rebuilt (before, the second way to a function
    # already walked was dropped, and its caller kept calling the release's helper)
    (native / "B.cpp").write_text("namespace at { namespace native {\nint f(int x) {\n  return scale(x);\n}\n"
                                  "Tensor bar(const Tensor& s) {\n  return s * k(1);\n}\n}}\n")
    (native / "C.cpp").write_text("namespace at { namespace native {\nint g(int x) {\n  return scale(x) + 1;\n}\n}}\n")
    (native / "D.cpp").write_text("namespace at { namespace native {\nint k(int x) {\n  return f(x) + g(x);\n}\n}}\n")
    (native / "cpu/BKernel.cpp").unlink()
    need = override_arm.caller_files(Tables(DirTree(tmp_path)), {a: helper.encode()},
                                     {a: helper.replace("* 2", "* 3").encode()})
    assert need == {f"aten/src/ATen/native/{n}.cpp": {"bar"} for n in "BCD"}


# --- 4. a check that cannot pass by accident --------------------------------------------------------

FLAGS = ["-O2", "-fopenmp", "-DHAVE_AVX2_CPU_DEFINITION"]
OVERRIDE = {"registered": [{"op": "conv2d", "key": "VariableTensorId"}, {"op": "conv3d", "key": "VariableTensorId"}],
            "compiled_with": {b: ["-std=c++14", "-fPIC", "-w", *FLAGS] for b in ("arm", "faithful")},
            "canary_flags": ["-finstrument-functions"]}
OVERRIDE["compiled_with"]["canary"] = [*OVERRIDE["compiled_with"]["faithful"], "-finstrument-functions"]


def record(prints="a", calls=None, entries=None, ops=None):
    out = {"fingerprints": {k: prints for k in check.FINGERPRINTS}}
    if calls is not None:
        out["override"] = {"calls": calls, **({"entries": entries} if entries is not None else {})}
    if ops is not None:
        out["ops"] = ops
    return out


def runs(faithful="a", faithful_calls=5, entries=9, arm="a", ops=("conv2d",)):
    return {"release": record(ops=dict.fromkeys(ops, 1)),
            "faithful": record(faithful, {"conv2d": faithful_calls, "conv3d": 0}),
            "canary": record(faithful, {"conv2d": faithful_calls}, entries),
            "arm": record(arm, {"conv2d": faithful_calls})}


def test_a_faithful_live_override_is_verified():
    result = check.judge(runs(arm="b"), OVERRIDE, FLAGS)
    assert result["outcome"] == "verified" and result["passed"] and result["workload_calls"] == ["conv2d"]
    assert not result["arm_identical"] and result["canary_entries"] == 9
    assert result["changed_calls"] == {} and result["changed_functions"] == 0  # no function named changed
    # the canary says which of the functions the fix changes ran: the workload may call an op
    # file's other operators only, still verified (the library's code ran), which reach is held to
    changed = {**OVERRIDE, "changed_functions": [{"symbol": "_ZN2at6native11conv2d_cpuEv", "name": "at::native::conv2d_cpu()"},
                                                 {"symbol": "_ZN2at6native11conv3d_cpuEv", "name": "at::native::conv3d_cpu()"}]}
    entered = runs(arm="b")
    entered["canary"]["override"]["functions"] = {"_ZN2at6native11conv2d_cpuEv": 7, "_ZN2at6native5otherEv": 2}
    result = check.judge(entered, changed, FLAGS)
    assert result["outcome"] == "verified" and result["workload_calls"] == ["conv2d"]
    assert result["changed_calls"] == {"at::native::conv2d_cpu": 7} and result["changed_functions"] == 2
    assert check.contradiction(result) is None


@pytest.mark.parametrize("case, reason", [
    (dict(faithful="b"), "the faithful build (the release's own files) trains differently from the release (its init differ)"),
    (dict(faithful_calls=0), "the workload calls conv2d, but never through the library"),
    (dict(entries=0), "the canary (the rebuilt code, instrumented) never ran"),
    (dict(ops=()), "the release run's profile names no operator"),
])
def test_each_part_of_the_check_fails_it(case, reason):
    result = check.judge(runs(**case), OVERRIDE, FLAGS)
    assert result["outcome"] == "failed" and not result["passed"] and reason in result["reason"]


def test_a_run_that_failed_fails_the_check():
    result = check.judge({**runs(), "faithful": "exit 1: ['Segmentation fault']"}, OVERRIDE, FLAGS)
    assert result == {"outcome": "failed", "passed": False, "reason": "the faithful run failed: exit 1: ['Segmentation fault']"}


def test_flags_other_than_the_releases_fail_the_check():
    """Seen: -O0 -ffp-contract=off added to an arm's flags were accepted (recorded, compared with nothing)."""
    edited = json.loads(json.dumps(OVERRIDE))
    edited["compiled_with"]["arm"] += ["-O0", "-ffp-contract=off"]
    edited["compiled_with"]["faithful"].remove("-fopenmp")
    result = check.judge(runs(), edited, FLAGS)
    assert result["outcome"] == "failed"
    assert "the arm build was not compiled with the release's flags: -O0 -ffp-contract=off added" in result["reason"]
    assert "the faithful build was not compiled with the release's flags: -fopenmp left out" in result["reason"]
    unrecorded = {k: v for k, v in OVERRIDE.items() if k != "compiled_with"}
    assert "does not say which flags" in check.judge(runs(), unrecorded, FLAGS)["reason"]


def test_a_workload_that_calls_none_of_the_librarys_operators_is_not_exercised():
    """Before: 0 calls, 2 canary entries, and the verdict a plain "not triggered"."""
    result = check.judge(runs(faithful_calls=0, entries=2, ops=("linear",)), OVERRIDE, FLAGS)
    assert result["outcome"] == "not exercised" and result["passed"] and result["workload_calls"] == []
    assert result["reason"] == "the workload calls none of the 2 operators the library replaces: for it the arm is the release"
    assert check.judge(runs(faithful="b", ops=("linear",)), OVERRIDE, FLAGS)["outcome"] == "failed"


@pytest.mark.parametrize("text, why", [
    ("{}", "no outcome (verified, not exercised, failed): not a check record"),
    ('{"outcome": "verified", "passed": false}', "outcome 'verified' with passed False"),
    ('{"outcome": "failed", "passed": true}', "outcome 'failed' with passed True"),
    ("[1]", "a list, not a check record"),
    ('{"outcome": "verif', "not valid JSON"),
])
def test_a_check_without_its_outcome_or_unreadable_is_broken_never_a_pass(tmp_path, text, why):
    from bugimpact.io import InputError
    path = tmp_path / "check.json"
    path.write_text(text)
    with pytest.raises(InputError, match=why.replace("(", r"\(").replace(")", r"\)")):
        check.read(path)


def gate_files(tmp_path, check_text, reach=None, override=OVERRIDE):
    runtime = {"status": "ok", "artifact": {"source": "onefix"}, "override": override, "python": "/p"}
    for arm in ("buggy", "corrected"):
        (tmp_path / f"{arm}.json").write_text(json.dumps(runtime if arm == "buggy" else {"status": "ok", "artifact": {}}))
    (tmp_path / "check.json").write_text(check_text)
    if reach:
        (tmp_path / "reach.json").write_text(json.dumps(reach))
    return steps.arms("b", {arm: tmp_path / f"{arm}.json" for arm in ("buggy", "corrected")}, tmp_path / "gate.json",
                      tmp_path / "reach.json" if reach else None, checks={"buggy": tmp_path / "check.json"})


def test_a_broken_check_closes_the_arms_gate(tmp_path):
    """Seen: a check file replaced by {} opened the arms gate (override_checks: {})."""
    gate = gate_files(tmp_path, "{}")
    assert not gate["runnable"] and gate["reason"].startswith("no runs: buggy: override check broken")
    failed = gate_files(tmp_path, json.dumps({"outcome": "failed", "passed": False, "reason": "the canary never ran"}))
    assert failed["reason"] == "no runs: buggy: override check failed: the canary never ran"


def test_one_fix_arms_on_different_releases_close_the_gate(tmp_path):
    """Seen on real history: pr25665's buggy arm, refused on 1.4.0 by its generated code, walked to
    1.3.0 as released, while its corrected arm, 1.4.0 as released, was not refused: the bug
    compared two releases. Now both arms are judged alike; and the gate refuses arms apart."""
    def runtime(version):
        return {"status": "ok", "artifact": {"source": "onefix", "release": {"source": "pypi", "version": version}}}
    for arm, version in (("buggy", "1.3.0"), ("corrected", "1.4.0")):
        (tmp_path / f"{arm}.json").write_text(json.dumps(runtime(version)))
    paths = {arm: tmp_path / f"{arm}.json" for arm in ("buggy", "corrected")}
    gate = steps.arms("b", paths, tmp_path / "gate.json")
    assert not gate["runnable"] and gate["reason"] == (
        "no runs: its arms ended on different releases (buggy: torch 1.3.0, corrected: torch 1.4.0): not one fix isolated")
    (tmp_path / "buggy.json").write_text(json.dumps(runtime("1.4.0")))
    assert steps.arms("b", paths, tmp_path / "gate.json")["runnable"]


# a check record whose fields agree: verified, the faithful build identical, conv2d called through the library
VERIFIED = {"outcome": "verified", "passed": True, "reason": "", "route": "registered", "workload_calls": ["conv2d"],
            "faithful_identical": True, "faithful_calls": {"conv2d": 90}, "canary_entries": 1352}


def test_an_operator_reach_runs_through_the_changed_code_that_the_library_leaves_out_closes_the_gate(tmp_path):
    verified = json.dumps(VERIFIED)
    reach = {"verdict": "reached", "reached": ["operator linear (scale <- linear)"],
             "mapping": {"ops": {"linear": "scale <- linear", "conv2d": "scale <- conv2d"}}}
    gate = gate_files(tmp_path, verified, reach)
    assert not gate["runnable"]
    assert "reach says the workload runs linear (scale <- linear) through the changed code, and the library " \
           "does not replace it" in gate["reason"]
    reach["reached"] = ["operator conv2d (scale <- conv2d)"]
    opened = gate_files(tmp_path, verified, reach)
    assert opened["runnable"] and opened["override_checks"]["buggy"]["outcome"] == "verified"
    # a stub kernel the library puts into the release's stub replaces every operator reached through it
    reach = {"verdict": "reached", "reached": ["operator max (max_kernel <- max_stub <- max_out <- max)"],
             "mapping": {"ops": {"max": "max_kernel <- max_stub <- max_out <- max"}}}
    stubbed = {**OVERRIDE, "registered": [], "stubs": [{"file": "cpu/K.cpp", "stub": "max_stub", "kernel": "max_kernel"}]}
    assert gate_files(tmp_path, verified, reach, stubbed)["runnable"]
    elsewhere = {**stubbed, "stubs": [{"file": "cpu/K.cpp", "stub": "min_stub", "kernel": "min_kernel"}]}
    assert "runs max (max_kernel <- max_stub" in gate_files(tmp_path, verified, reach, elsewhere)["reason"]
    # a library of both routes replaces an operator reached through a function it interposes, and
    # only those: a changed function of its registered op files is reached through its operator
    both = {**elsewhere, "route": "registered+interposed",
            "changed_functions": [{"symbol": "m", "name": "max_kernel(float)", "interposed": True}]}
    assert gate_files(tmp_path, verified, reach, both)["runnable"]
    registered_only = {**both, "changed_functions": [{"symbol": "m", "name": "max_kernel(float)"}]}
    assert "runs max (max_kernel <- max_stub" in gate_files(tmp_path, verified, reach, registered_only)["reason"]


def test_failed_and_broken_checks_and_a_runtime_whose_library_is_gone_are_recovered(tmp_path, monkeypatch):
    """Seen: retry-failed never looked at results/checks/; with override/arm.so deleted every new
    run failed while status said "the next run trains it again"."""
    from bugimpact import recovery
    monkeypatch.chdir(tmp_path)
    checks = Path("results/checks/k")
    checks.mkdir(parents=True)
    (checks / "onefix-buggy-1.json").write_text("{}")
    (checks / "onefix-buggy-2.json").write_text(json.dumps({"outcome": "failed", "passed": False, "reason": "x"}))
    (checks / "onefix-buggy-3.json").write_text(json.dumps(VERIFIED))
    library = tmp_path / "arm.so"
    runtime = Path("results/runtimes/venv-x/onefix-buggy-1/runtime.json")
    runtime.parent.mkdir(parents=True)
    runtime.write_text(json.dumps({"kind": "venv", "python": "/bin/sh",
                                   "override": {"libraries": {"arm": {"library": str(library)}}}}))
    library.write_bytes(b"")
    assert recovery.of_runtimes([runtime]) == []
    library.unlink()
    found = {f.path.name: (f.state, f.why) for f in recovery.under()}
    assert found["onefix-buggy-1.json"][0] == "broken" and found["onefix-buggy-2.json"] == ("failed", "x")
    assert found["runtime.json"] == ("stale", f"{library} gone")
    assert "onefix-buggy-3.json" not in found
    out = subprocess.run(["bugimpact", "retry-failed", "--all"], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0 and "3 removed" in out.stdout, out
    assert sorted(p.name for p in checks.iterdir()) == ["onefix-buggy-3.json"] and not runtime.exists()


def test_verify_names_a_broken_check(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("results/runs").mkdir(parents=True)
    Path("results/checks/k").mkdir(parents=True)
    Path("results/checks/k/a.json").write_text("{}")
    out = subprocess.run(["bugimpact", "verify"], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 1 and "results/checks/k/a.json: no outcome" in out.stdout


def test_a_not_exercised_arm_is_its_own_verdict_never_a_plain_not_triggered():
    from bugimpact.stats import tables, verdicts
    checks = {"buggy": {"outcome": "not exercised", "reason": "the workload calls none of the 4 operators"}}
    why = tables.not_exercised(checks)
    assert why == "the buggy arm's override check: the workload calls none of the 4 operators"
    info = {"n_ok": {"buggy": 2, "corrected": 2}, "required_runs": 2, "skipped": 0, "pairs": 2,
            "identical_pairs": 2, "failed": "", "within_identical": True, "not_exercised": why}
    label, reason = verdicts.decided_without_test(info)
    assert label == "not exercised" and "nothing was learned about the fix" in reason
    assert tables.not_exercised({**checks, "corrected": {"outcome": "verified"}}) == ""
    assert "not exercised" in tables.VERDICTS


def test_the_report_shows_each_arms_check_and_the_builds_table_a_refused_build(tmp_path):
    from bugimpact.stats.report import render
    tables = {}
    for name, text in {"verdicts": "bug,verdict\n", "pvalues": "bug,verdict\n", "summary": "section,name,count\n",
                       "builds": "bug,arm,artifact,status,failure_class,build_seconds,log_tail\n"
                                 "s-pr1,buggy,onefix-buggy-1,refused,override build,3,compiling x failed: error: y\n",
                       "checks": "bug,arm,outcome,faithful_identical,workload_calls,canary_entries,arm_identical,"
                                 "reason,source\ns-pr2,buggy,not exercised,True,,2,True,the workload calls none,"
                                 "reconstructed: torch 1.5.1's branch point abc\n"}.items():
        tables[name] = tmp_path / f"{name}.csv"
        tables[name].write_text(text)
    png = tmp_path / "std.png"
    png.write_bytes(b"\x89PNG\r\n")
    render("s", {}, tables, {"bugs": [], "std": png}, tmp_path / "report.html", {"stats": {"correction": "holm"}})
    page = (tmp_path / "report.html").read_text()
    assert "Override checks of compiled fixes" in page and "not exercised" in page
    assert "reconstructed: torch 1.5.1&#39;s branch point abc" in page
    assert "<td>refused</td>" in page and "override build" in page


def test_the_builds_status_tells_a_refused_override_build_from_a_made_one(tmp_path):
    manifest = tmp_path / "a" / "manifest.json"
    manifest.parent.mkdir()
    manifest.write_text(json.dumps({"status": "ok", "build_seconds": 2.0}))
    runtime = tmp_path / "runtime.json"
    runtime.write_text(json.dumps({"status": "failed", "reason": "override build refused: compiling x failed: error: y"}))
    steps.build_status("b", "buggy", manifest, tmp_path / "s.json", runtime_json=runtime)
    status = json.loads((tmp_path / "s.json").read_text())
    assert status["status"] == "refused" and status["failure_class"] == "override build"
    runtime.write_text(json.dumps({"status": "ok", "override": {"build_seconds": 40.0}}))
    steps.build_status("b", "buggy", manifest, tmp_path / "s.json", runtime_json=runtime)
    status = json.loads((tmp_path / "s.json").read_text())
    assert status["status"] == "ok" and status["build_seconds"] == 42.0


def test_a_definition_of_a_kernels_name_that_fits_no_schema_is_named_not_dropped():
    """Before, a rebuilt function that fit no schema was left out without a word."""
    from bugimpact.framework.declarations import operators
    from bugimpact.overrides import registration
    ops = operators(b"- func: foo(Tensor self) -> Tensor\n", b"[]\n")
    defined = [("foo", "at::Tensor const&"), ("foo", "at::Tensor const&, long")]
    chosen, skipped = registration.registrations(defined, ops, {"major": 1, "minor": 5})
    assert [op["name"] for op, _, _ in chosen] == ["foo"]
    assert skipped == ["foo(at::Tensor const&, long): fits none of its operators' schemas"]


def test_a_sheet_rows_release_says_where_its_fix_is_listed_when_the_study_isolates_it_on_another(tmp_path):
    """A fix listed in 1.6.0's notes, studied on 1.5.1: its arms say so (a reconstruction of 1.5.1
    then takes the fix as not cherry-picked into it), and their artifacts are their own; a row
    studied on the release that lists it keeps the arms it always had (finished studies stay)."""
    from conftest import config_with

    from bugimpact.config import SHEET_SCHEMA
    from bugimpact.plan import Plan
    sheet = tmp_path / "sheet.csv"
    sheet.write_text("id,release,decision,reason,buggy_sha,corrected_sha\n"
                     f"pr1,v1.6.0,accept,,{'a' * 40},{'b' * 40}\npr2,v1.5.1,accept,,{'a' * 40},{'b' * 40}\n")
    base = {"sheet": str(sheet), "runtime.kind": "venv", "runtime.python": "3.7", "bugs.controls": {},
            "artifacts.source": "onefix", "artifacts.onefix.release": {"source": "pypi", "version": "1.5.1"}}
    plan = Plan(config_with(**base), SHEET_SCHEMA)
    assert plan.bug("pr1").arm("buggy")["notes_release"] == "v1.6.0"
    assert "notes_release" not in plan.bug("pr2").arm("buggy")
    assert plan.bug("pr1").arm("buggy")["artifact"] != plan.bug("pr2").arm("buggy")["artifact"]


def test_status_says_whole_why_a_bug_cannot_run(tmp_path, monkeypatch):
    """Before: the status table cut a compile error before its cause."""
    from bugimpact import status
    reason = ("no runs: buggy: override build refused: compiling aten/src/ATen/native/TensorShape.cpp (arm "
              "build) failed: TensorShape.cpp:531:50: error: 'class at::Tensor' has no member named 'is_complex'")
    monkeypatch.setattr(status, "rows", lambda plan: [{"bug": "pr1", "sheet": "accept", "arms": reason, "runs": "0/4",
                                                      "failed": "", "verdict": "-", "next": ""}])
    monkeypatch.setattr(status, "of_plan", lambda plan: [])

    class Study:
        report = str(tmp_path / "report.html")
    plan = type("P", (), {"study": Study, "sheet_rows": [], "config": {"sheet": "s.csv"}, "sheet_missing": None})()
    text = status.summary(plan)
    assert "has no member named 'is_complex'" in text.split("why these cannot run:")[1]


def test_an_out_variant_without_a_dispatch_entry_is_registered_as_its_out_kernel():
    """Found on the corpus: ``matmul.out`` was matched to LinearAlgebra.cpp's own three-argument
    ``matmul`` helper (not the operator's kernel, and declared nowhere the registration sees), and
    the build failed; ATen's code generation names the kernel ``matmul_out``."""
    from bugimpact.framework.declarations import operators
    ops = {o["name"]: o["cpp"] for o in operators(
        b"- func: matmul(Tensor self, Tensor other) -> Tensor\n"
        b"- func: matmul.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)\n"
        b"- func: softshrink_backward.grad_input(Tensor grad_output, Tensor self, Scalar lambd, *, "
        b"Tensor(a!) grad_input) -> Tensor(a!)\n"
        b"- func: add_(Tensor(a!) self, Tensor other) -> Tensor(a!)\n", b"[]\n")}
    assert ops == {"matmul": "matmul", "matmul.out": "matmul_out",
                   "softshrink_backward.grad_input": "softshrink_backward_out", "add_": "add_"}


def test_an_overload_the_workload_may_not_call_is_unconfirmed_not_a_failure():
    """Found on the corpus: a profile says "empty", not which overload. TensorFactories.cpp's
    library registers ``empty.out`` only; the workload's ``empty`` calls are the release's other
    overload, so 0 calls through the library said nothing about the key. Where the library
    registers every overload of a name, 0 calls still fail the check (the key)."""
    override = {**OVERRIDE, "registered": [{"op": "empty.out", "key": "VariableTensorId"},
                                           {"op": "clone", "key": "VariableTensorId"}],
                "overloads": {"empty": ["empty.memory_format", "empty.out"], "clone": ["clone"]}}
    workload = runs(ops=("empty", "clone"))
    for build in ("faithful", "canary", "arm"):
        workload[build]["override"]["calls"] = {"empty.out": 0, "clone": 4}
    result = check.judge(workload, override, FLAGS)
    assert result["outcome"] == "verified" and result["workload_calls"] == ["clone"]
    assert result["unconfirmed"] == ["empty.out"]
    for build in ("faithful", "canary", "arm"):
        workload[build]["override"]["calls"] = {"empty.out": 0, "clone": 0}
    only_other = check.judge(workload, {**override, "overloads": {"empty": ["empty.memory_format", "empty.out"],
                                                                  "clone": ["clone"]}}, FLAGS)
    assert only_other["outcome"] == "failed" and "the workload calls clone, but never through" in only_other["reason"]
    del workload["faithful"]["override"]["calls"]["clone"]
    override["registered"] = override["registered"][:1]
    alone = check.judge(workload, override, FLAGS)
    assert alone["outcome"] == "not exercised" and alone["unconfirmed"] == ["empty.out"]
    # an operator the release's autograd implements by hand may never reach the native kernel
    by_hand = {**override, "registered": [{"op": "detach", "key": "CPUTensorId", "manual": True}],
               "overloads": {"detach": ["detach"]}}
    workload = runs(ops=("detach",))
    for build in ("faithful", "canary", "arm"):
        workload[build]["override"]["calls"] = {"detach": 0}
    manual = check.judge(workload, by_hand, FLAGS)
    assert manual["outcome"] == "not exercised" and manual["unconfirmed"] == ["detach"]
    by_hand["registered"][0].pop("manual")
    assert check.judge(workload, by_hand, FLAGS)["outcome"] == "failed"


def test_overloads_a_release_names_alike_are_counted_not_collapsed():
    """Found on a window kept back (pr16686 on 1.2.0): 1.2's schemas name no overload, so
    ReduceOps.cpp's library registers three kernels named ``sum`` of the five 1.2 declares; read
    as a set, "every overload registered" held, and a workload whose ``sum`` went to another
    overload failed the check as a wrong key."""
    override = {**OVERRIDE, "registered": [{"op": "sum", "key": "CPUTensorId"}] * 3,
                "overloads": {"sum": ["sum"] * 5}}
    workload = runs(ops=("sum",))
    for build in ("faithful", "canary", "arm"):
        workload[build]["override"]["calls"] = {"sum": 0}
    result = check.judge(workload, override, FLAGS)
    assert result["outcome"] == "not exercised" and result["unconfirmed"] == ["sum"]
    every = {**override, "registered": [{"op": "sum", "key": "CPUTensorId"}] * 5}
    assert "the workload calls sum, but never through" in check.judge(workload, every, FLAGS)["reason"]


def test_an_operator_the_releases_autograd_implements_by_hand_keeps_that_kernel():
    """Found on the corpus: TensorProperties.cpp's library registered 1.4.0's native ``detach`` (a
    placeholder that raises) over the autograd layer's own kernel under the autograd key, and every
    run failed "detach is not implemented for Tensor"; left out, Copy.cpp's library had nothing
    to register, though 1.4's hand-written ``copy_`` calls on to the native one. 1.4 names such
    operators in its VariableType generator, 1.5 on in native_functions.yaml: their rebuilt kernel
    goes under the backend key."""
    from bugimpact.framework.declarations import manual_operators, operators
    from bugimpact.overrides import registration
    generator = b"MANUAL_IMPLEMENTATIONS = {\n    'resize_', 'detach', 'copy_',\n}\n"
    assert manual_operators(generator) == {"resize_", "detach", "copy_"}
    native = (b"- func: detach(Tensor self) -> Tensor\n- func: is_set_to(Tensor self, Tensor tensor) -> bool\n"
              b"- func: copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)\n"
              b"  manual_kernel_registration: True\n")
    defined = [("detach", "at::Tensor const&"), ("is_set_to", "at::Tensor const&, at::Tensor const&"),
               ("copy_", "at::Tensor&, at::Tensor const&, bool")]
    keys = {op["name"]: key for op, key, _ in registration.registrations(
        defined, operators(native, b"[]\n", manual_operators(generator)), {"major": 1, "minor": 4})[0]}
    assert keys == {"detach": "CPUTensorId", "is_set_to": "VariableTensorId", "copy_": "CPUTensorId"}
    without = {op["name"]: key for op, key, _ in registration.registrations(  # 1.5: the yaml's flag alone
        defined, operators(native, b"[]\n"), {"major": 1, "minor": 5})[0]}
    assert without == {"detach": "VariableTensorId", "is_set_to": "VariableTensorId", "copy_": "CPUTensorId"}


def test_a_file_the_release_moved_is_refused_naming_the_commit_that_moved_it(tmp_path):
    """Seen on the corpus (pr24885, pr24028 on 1.3.0): "aten/src/ATen/NamedTensor.cpp not at the
    release's commit ... in clone ...", which no cause of the table matched (unnamed); the file had
    moved to ATen/core before the release."""
    from bugimpact.overrides.refusals import cause_of
    repo = mirror(tmp_path)
    old = "aten/src/ATen/native/Old.cpp"
    commit(repo, {old: kernel(b"  return self;")}, "Add Old (#8)", "2020-01-10T00:00:00")
    fix = commit(repo, {old: kernel(b"  return self + 0;")}, "Fix Old (#9)", "2020-01-20T00:00:00")
    (repo / "aten/src/ATen/core").mkdir()
    git(repo, "mv", old, "aten/src/ATen/core/Old.cpp")
    commit(repo, {}, "Move Old to core (#10)", "2020-02-01T00:00:00")
    commit(repo, {HEADER: RELEASE_HEADER}, "the release is cut here", "2020-02-10T00:00:00")
    commit(repo, {"aten/src/ATen/ATen.h": b"// later\n"}, "a header changed after the cut", "2020-02-12T00:00:00")
    fixed, parent = fix_of(repo, fix)
    release = release_source.Release.of_wheel(wheel(tmp_path), "9.9.0")
    with pytest.raises(LookupError) as refused:
        release_source.find({"fix_clone": str(repo)}, {"buggy_sha": parent, "corrected_sha": fix}, release,
                            [old], fixed, tmp_path / "rec.json")
    assert re.match(r"aten/src/ATen/native/Old.cpp \(taken away or moved by [0-9a-f]{7,} Move Old to core \(#10\)\) "
                    r"not in torch 9.9.0's branch point [0-9a-f]{12}: the release does not ship it", str(refused.value))
    assert cause_of(str(refused.value)) == "placement"
    # the release moved it after the fix: a release before the move may take the fix back
    # (``other_side``; seen: pr24885 and pr24028 were refused here, on 1.4.0 and 1.3.0 alike)
    why = override_arm.why_not_shipped(refused.value, fixed)
    assert isinstance(why, override_arm.Entangled) and why.fix_in_release
    assert cause_of(str(why)) == "the release changed the fix's lines after it"


def test_a_fix_to_a_file_the_release_does_not_have_or_a_listed_fix_that_does_not_go_on_it_is_refused(history, tmp_path):
    from bugimpact.overrides.refusals import cause_of
    repo, shas = history
    new_file = "aten/src/ATen/native/Later.cpp"
    commit(repo, {new_file: kernel(b"  return self;")}, "Add Later (#4)", "2020-03-03T00:00:00")
    fix = commit(repo, {new_file: kernel(b"  return self + 0;")}, "Fix Later (#5)", "2020-03-04T00:00:00")
    fixed, parent = fix_of(repo, fix)
    release = release_source.Release.of_wheel(wheel(tmp_path), "9.9.0")
    with pytest.raises(LookupError, match=r"Later.cpp not in torch 9.9.0's branch point [0-9a-f]{12}: the release does not ship it") \
            as refused:
        release_source.find({"fix_clone": str(repo)}, {"buggy_sha": parent, "corrected_sha": fix}, release,
                            [new_file], fixed, tmp_path / "rec.json")
    # the file came after the release: a release after the fix may take it back
    why = override_arm.why_not_shipped(refused.value, fixed)
    assert isinstance(why, override_arm.Entangled) and not why.fix_in_release
    assert cause_of(str(why)) == "the fix builds on changes the release lacks"
    # a file the fix itself adds: no release before the fix has it, and no arm takes a file away
    adds = commit(repo, {"aten/src/ATen/native/New.cpp": kernel(b"  return self;")}, "Fix by adding New (#8)",
                  "2020-03-04T12:00:00")
    added, before = fix_of(repo, adds)
    with pytest.raises(LookupError) as lacks:
        release_source.find({"fix_clone": str(repo)}, {"buggy_sha": before, "corrected_sha": adds}, release,
                            ["aten/src/ATen/native/New.cpp"], added, tmp_path / "rec.json")
    assert not isinstance(override_arm.why_not_shipped(lacks.value, added), override_arm.Entangled)
    # a fix this release's notes list, made on lines the branch point does not hold as the fix found them
    commit(repo, {OP: kernel(b"  return self * 5;  // reworked")}, "Rework (#6)", "2020-03-05T00:00:00")
    listed = commit(repo, {OP: kernel(b"  return self * 6;  // fixed again")}, "Fix foo again (#7)", "2020-03-06T00:00:00")
    with pytest.raises(LookupError, match="torch 9.9.0's notes list the fix, but it does not apply to the branch "
                                          "point's files: .*the fix builds on changes the release lacks"):
        found(repo, tmp_path, listed)


@pytest.mark.parametrize("broken, says", [
    (("arm",), "x.cpp (arm build) failed, where the release's own files compile: x.cpp:1:1: error: 'nope' does "
               "not name a type: the arm's code needs what the release does not have"),
    (("arm", "faithful"), "failed for the release's own file too (the faithful build): x.cpp:1:1: error: 'nope' "
                          "does not name a type: the source at hand is not what the release was built from"),
])
@pytest.mark.parametrize("cached", [False, True])
def test_a_compile_error_says_whether_the_fix_or_the_source_is_to_blame(tmp_path, broken, says, cached):
    """Found on the corpus: a fix that calls 1.6's ``Tensor::copy_real`` failed its arm build on
    1.5.1 (the fix is entangled with other changes); a branch point's LinearAlgebra.cpp that calls
    ``Tensor::real``, which the 1.5 release branch took out, failed the faithful build too (the
    reconstruction is not the release there). Both were "compiling ... failed"."""
    from bugimpact.overrides.release_build import BuildRefused, run_all
    jobs = []
    for name in ("arm", "faithful", "canary"):
        source = tmp_path / name / "x.cpp"
        source.parent.mkdir()
        source.write_text("nope x;\n" if name in broken else "int x;\n")
        jobs.append((name, "x.cpp", ["g++", "-c", str(source), "-o", str(source) + ".o"]))
    with pytest.raises(BuildRefused) as refused:
        run_all(jobs, io.StringIO(), 2, tmp_path / "objects" if cached else None)
    # the release's file, which compiled, is kept once for both of its builds; the broken one not
    assert len(list((tmp_path / "objects").glob("*.o"))) == cached
    text = str(refused.value).translate({0x2018: "'", 0x2019: "'"})  # the compiler's quotes, in any locale
    assert says in text.replace(str(tmp_path / "arm") + "/", "").replace(str(tmp_path / "faithful") + "/", "")


def test_what_one_fixs_override_compiled_the_next_takes_from_the_cache_and_a_changed_header_compiles_again(tmp_path):
    """Each compiled fix's override compiles the release's own file twice (faithful, canary) beside
    its arm: THTensorMath.cpp takes 72 s a compile here. Another fix to that file on that release,
    or the same override made again (a retried or lost runtime), compiles only what differs now,
    wherever its files lie; a header whose text differs makes another input."""
    from bugimpact.overrides.release_build import compile_job, run_all
    counted = tmp_path / "compiles"
    cxx = tmp_path / "cxx"  # the host's g++, counting the compiles it is asked for
    cxx.write_text(f'#!/bin/sh\ncase " $* " in *" -c "*) echo x >> {counted};; esac\nexec g++ "$@"\n')
    cxx.chmod(0o755)
    release = b'#include "kernel.h"\nconst char* where = __FILE__;\nint f(int x) { return scale(x) + 1; }\n'

    def override(folder, arm, header=b"inline int scale(int x) { return 3 * x; }\n"):
        (folder / "include").mkdir(parents=True)
        (folder / "include" / "kernel.h").write_bytes(header)
        flags = ["-O2", "-fPIC", f"-I{folder / 'include'}"]
        jobs = [compile_job(str(cxx), name, "aten/src/TH/x.cpp", data, folder, flags + extra)
                for name, data, extra in (("arm", arm, []), ("faithful", release, []),
                                          ("canary", release, ["-finstrument-functions"]))]
        log = io.StringIO()
        run_all(jobs, log, 2, tmp_path / "objects")
        return {name: Path(cmd[-1]).read_bytes() for name, _, cmd in jobs}, log.getvalue()

    def compiles():
        return len(counted.read_text().split())

    first, _ = override(tmp_path / "fix-a", release.replace(b"+ 1", b"+ 2"))
    assert compiles() == 3
    second, log = override(tmp_path / "fix-b", release.replace(b"+ 1", b"- 1"))
    assert compiles() == 4, "the second fix compiled the release's file again"
    assert log.count("(not compiled: its input was compiled before, and kept") == 2
    assert second["faithful"] == first["faithful"] and second["canary"] == first["canary"]
    assert len({first["arm"], second["arm"], first["faithful"], first["canary"]}) == 4
    _, log = override(tmp_path / "fix-a-again", release.replace(b"+ 1", b"+ 2"))
    assert compiles() == 4 and log.count("(not compiled") == 3
    other, _ = override(tmp_path / "other", release, header=b"inline int scale(int x) { return 4 * x; }\n")
    # its arm and faithful build are one input, compiled once
    assert compiles() == 6 and other["faithful"] != first["faithful"] and other["arm"] == other["faithful"]


def test_an_operator_called_through_the_library_is_exercised_whether_or_not_the_profile_names_it():
    """Found on the shipped pr29609 (Copy.cpp on 1.4.0): ``copy_`` came through the library 387
    times, but 1.4's profile does not name the copy_ its autograd layer's own kernel calls on to;
    the check said "not exercised"."""
    override = {**OVERRIDE, "registered": [{"op": "copy_", "key": "CPUTensorId", "manual": True}],
                "overloads": {"copy_": ["copy_"]}}
    workload = runs(ops=("conv2d",))
    for build in ("faithful", "canary", "arm"):
        workload[build]["override"]["calls"] = {"copy_": 387}
    result = check.judge(workload, override, FLAGS)
    assert result["outcome"] == "verified" and result["workload_calls"] == ["copy_"]


@pytest.mark.parametrize("reason, cls", [
    ("no runs: artifact failed (refused): the fix does not apply to torch 1.4.0's own files (in reverse): "
     "x.cpp: 1 of the fix's changes conflict ...; the release changed them after the fix: 2 commit(s)",
     "the release changed the fix's lines after it"),
    ("no runs: corrected: override build refused: compiling x.cpp (arm build) failed, where the release's own "
     "files compile: error: ...: the arm's code needs what the release does not have (...)",
     "the fix builds on changes the release lacks"),
    ("no runs: corrected: override build refused: compiling x.cpp failed for the release's own file too (the "
     "faithful build): error: ...: the source at hand is not what the release was built from, here",
     "the reconstruction is not the release there"),
    ("no runs: buggy: override check failed: the canary ... never ran", "check"),
    # refused by the diff: named by what its generated code or header changes, not by its part alone
    ("no: codegen: code generation (...) (aten/src/ATen/core/TensorBody.h changes code, not a declaration (inline T "
     "f() {))", "inline generated-header code"),
    # found on the 1.2.0 window kept back: pr17182, pr17582, pr18435 were classed by their part alone
    ("no: codegen: code generation (...) (aten/src/ATen/core/Tensor.h changes a default argument, which each "
     "caller compiles)", "inline generated-header code"),
    ("no: codegen: code generation (...) (aten/src/ATen/core/TensorMethods.h changes the overloads of add)",
     "inline generated-header code"),
    ("no: codegen: code generation (...) (its generated code: the Python bindings' generator (tools/autograd/"
     "templates/python_torch_functions.cpp))", "a binding static to libtorch_python"),
    ("no runs: artifact failed (refused): aten/src/ATen/X.h: as torch 1.4.0's whole file reads, the fix changes "
     "code, not a declaration (Tensor t(x)), not declarations only: its includers, not rebuilt, would compile "
     "otherwise", "a header's code its includers compile"),
])
def test_the_corpus_script_classes_each_refusal_by_its_words(reason, cls):
    """bin/corpus (run by hand: it studies dozens of fixes) imports what it uses and classes each
    refusal by the cause it names."""
    import runpy

    from conftest import ROOT
    names = runpy.run_path(str(ROOT / "bin" / "corpus"), run_name="corpus_import_check")
    assert callable(names["main"]) and names["refusal_class"](reason) == cls


def test_the_corpus_takes_its_windows_by_dates_and_commits_and_counts_their_fix_commits(tmp_path, capsys):
    """bin/corpus's windows on the command line: a span as dates or commits; each window's sheet
    holds its fix commits that change an op file, with their kind read from the diff."""
    import runpy

    from conftest import ROOT
    corpus = runpy.run_path(str(ROOT / "bin" / "corpus"), run_name="corpus_import_check")
    repo = mirror(tmp_path)
    early = commit(repo, {OP: kernel(b"  return self * 2;")}, "Fix foo (#1)", "2020-02-01T00:00:00")
    commit(repo, {"README.md": b"words\n"}, "Fix the readme (#2)", "2020-02-02T00:00:00")  # no op file
    commit(repo, {OP: kernel(b"  return self * 3;")}, "Make foo faster (#3)", "2020-02-03T00:00:00")  # no fix
    late = commit(repo, {OP: kernel(b"  return self * 4;  // fixed")}, "fix foo again (#4)", "2020-03-01T00:00:00")
    assert corpus["window"]("1.3.0=2019-06-01..v1.3.0") == ("1.3.0", "2019-06-01", "v1.3.0")
    with pytest.raises(argparse.ArgumentTypeError, match="RELEASE=FROM..TO"):
        corpus["window"]("1.3.0=2019-06-01")
    span, found = corpus["commits"](repo, "2020-01-15", "2020-02-15")
    assert span == "--until=2020-02-15 --since=2020-01-15 master" and [c[0] for c in found] == [early]
    span, found = corpus["commits"](repo, early, "master")
    assert span == f"{early}..master" and [c[0] for c in found] == [late]
    assert [c[0] for c in corpus["commits"](repo, "", "")[1]] == [late, early]
    row = corpus["sheet_row"](repo, "9.9.0", early, late, early, "fix foo again (#4)")
    assert row["id"] == "pr4" and row["onefix"].startswith("yes: kernels (op") and row["decision"] == "accept"
    assert row["release"] == "v9.10.0"  # after the branch point, in no notes: the next release's
    assert corpus["sheet_row"](repo, "9.9.0", late, late, early, "fix foo again (#4)")["release"] == "v9.9.0"
    corpus["report"]([{"id": "pr1", "release": "9.9.0", "op_fix": True, "studied": True, "class": "", "seconds": 60.0,
                       "outcome": "verified", "reach": "not reached", "contradiction": "reach said not reached, yet",
                       "changed_ran": "yes"},
                      {"id": "pr2", "release": "9.9.0", "op_fix": True, "studied": True, "class": "", "seconds": 30.0,
                       "outcome": "not exercised", "reach": "not reached"},
                      {"id": "pr4", "release": "9.9.0", "op_fix": False, "studied": False,
                       "class": "kind: codegen", "seconds": 0.0, "outcome": "", "reach": "reached"}])
    printed = capsys.readouterr().out
    assert "fix commits: 2 of 3 studied (67%; 9.9.0: 2 of 3)" in printed
    assert "op-file fixes by their diff: 2 of 2 studied (100%" in printed and "kind: codegen: 1 (pr4)" in printed
    assert "not reached / not exercised: 1; not reached / verified, the changed functions ran: 1" in printed
    assert "reach contradicted by what ran: 1 (pr1)" in printed


def test_every_refusal_cause_is_in_the_docs_as_the_table_has_it():
    from conftest import ROOT

    from bugimpact.overrides.refusals import CAUSES, UNNAMED, cause_of
    docs = (ROOT / "docs" / "usage.md").read_text()
    assert all(f"| {name} | {meaning} |" in docs for name, _, meaning in CAUSES)
    assert cause_of("no: the diff makes third_party/gloo a symlink or special file (mode 160000)") == "a submodule or link"
    assert cause_of("something nobody named") == UNNAMED


def test_a_fix_cherry_picked_onto_a_release_branch_is_found_in_the_release(history, tmp_path):
    """A full clone holds the release's own commit; a fix cherry-picked onto its branch is another
    commit, not in the release's history from master: its diff, placed in reverse, says the
    release holds it."""
    repo, shas = history
    git(repo, "checkout", "-q", "-b", "release/9.9", shas["cut"])
    picked = commit(repo, {OP: kernel(b"  return self * 3;  // fixed after the cut")}, "cherry-pick #2",
                    "2020-03-02T00:00:00")
    git(repo, "checkout", "-q", "master")
    source = found(repo, tmp_path, shas["after"], commit_sha=picked)
    assert source.origin.startswith(f"clone {repo} at the release's commit")
    fix, _ = fix_of(repo, shas["after"])
    assert fix.holds(picked, source.files)
    assert not fix.holds(shas["cut"], {OP: git(repo, "show", f"{shas['cut']}:{OP}").encode() + b"\n"})


def test_a_fix_a_later_commit_took_back_before_the_cut_is_refused_not_built_as_the_release(tmp_path):
    """Seen on the corpus (pr27211 on 1.4.0): the fix's commit is in the branch point's history, a
    later one undid it, and taking it back by a three-way merge changed nothing: both arms were the
    release, and the check said "not exercised". Now the arm is refused, saying so."""
    repo = mirror(tmp_path)
    fixed = commit(repo, {OP: kernel(b"  return self * 2;  // fixed")}, "Fix foo (#1)", "2020-02-01T00:00:00")
    commit(repo, {OP: kernel(b"  return self * 1;")}, "Revert the fix of foo (#3)", "2020-02-05T00:00:00")
    commit(repo, {HEADER: RELEASE_HEADER}, "the release is cut here", "2020-02-10T00:00:00")
    source = found(repo, tmp_path, fixed)
    fix, _ = fix_of(repo, fixed)
    assert source.describe()["fix"] == "in the branch point"
    with pytest.raises(Refused, match="making the fix in reverse changes none of torch 9.9.0's own files .reconstructed: .*.: the "
                                      "release no longer holds it"):
        override_arm.made_on(fix, source, dict(source.files), "9.9.0")


def test_a_fix_whose_making_removes_a_rebuilt_file_is_refused_naming_it(tmp_path):
    """Seen on a corpus of stub fixes (pr33534 on 1.5.0, which added cpu/CatKernel.cpp): taking the
    fix back removes the file, and the arm crashed (AttributeError on the removed file's bytes). A
    library beside the release cannot take a file's code away: refused, named."""
    new = "aten/src/ATen/native/cpu/NewKernel.cpp"
    repo = mirror(tmp_path)
    fixed = commit(repo, {OP: kernel(b"  return self * 2;  // fixed"), new: b"int added() { return 1; }\n"},
                   "Fix foo (#1)", "2020-02-01T00:00:00")
    commit(repo, {HEADER: RELEASE_HEADER}, "the release is cut here", "2020-02-10T00:00:00")
    fix, parent = fix_of(repo, fixed)
    release = release_source.Release.of_wheel(wheel(tmp_path), "9.9.0")
    source = release_source.find({"fix_clone": str(repo)}, {"buggy_sha": parent, "corrected_sha": fixed}, release,
                                 [OP, new], fix, tmp_path / "rec.json")
    with pytest.raises(Refused, match=f"making the fix in reverse removes {new}: a library beside torch 9.9.0 "
                                      "cannot take a file's code away"):
        override_arm.made_on(fix, source, dict(source.files), "9.9.0")
