"""A reconstruction checked by the headers its own generator writes: a cherry-pick the branch point
lacks is found in the clone and placed, or what differs is named. Real git histories made here,
whose tree holds a generator of its own (a small ``gen.py`` that writes ``NativeFunctions.h`` from
``native_functions.yaml``, as ATen's does); on the mirror the real ``gen.py`` runs (docs)."""
import json
import zipfile

from test_overrides import HEADER, OP, RELEASE_HEADER, commit, found, mirror

from bugimpact.overrides import generated_headers, reconstruct

YAML = "aten/src/ATen/native/native_functions.yaml"
GEN_PY = b'''import re, sys
from pathlib import Path
out = Path(sys.argv[sys.argv.index("--install_dir") + 1])
out.mkdir(parents=True)
names = [n for path in sys.argv[5:] for n in re.findall(r"^- func: (\\w+)\\(", Path(path).read_text(), re.M)]
(out / "NativeFunctions.h").write_text("#pragma once\\n" + "".join(f"Tensor {n}(const Tensor & self);\\n" for n in names))
'''
CODEGEN = b"set(cwrap_files\n    ${CMAKE_CURRENT_LIST_DIR}/../aten/src/ATen/native/native_functions.yaml)\n"


def native_functions(*names):
    return b"#pragma once\n" + b"".join(b"Tensor %s(const Tensor & self);\n" % n.encode() for n in names)


def history(tmp_path, bar_also=None):
    """A master history with a generator: the release is cut at ``cut``; ``bar`` adds an operator
    after the cut (and changes the files ``bar_also``), which the release branch took (its wheel's
    NativeFunctions.h has it), ``baz`` one that it did not."""
    repo = mirror(tmp_path)
    shas = {"gen": commit(repo, {"aten/src/ATen/gen.py": GEN_PY, "cmake/Codegen.cmake": CODEGEN},
                          "ATen's generator", "2020-01-15T00:00:00")}
    shas["fix"] = commit(repo, {OP: b"// fixed\n"}, "Fix foo (#1)", "2020-02-01T00:00:00")
    shas["cut"] = commit(repo, {HEADER: RELEASE_HEADER}, "the release is cut here", "2020-02-10T00:00:00")
    shas["later"] = commit(repo, {"aten/src/ATen/ATen.h": b"// later\n"}, "a header changed after the cut",
                           "2020-02-12T00:00:00")
    yaml = (repo / YAML).read_bytes()
    shas["bar"] = commit(repo, {YAML: yaml + b"- func: bar(Tensor self) -> Tensor\n", **(bar_also or {})},
                         "Add bar (#3)", "2020-02-15T00:00:00")
    shas["baz"] = commit(repo, {YAML: yaml + b"- func: bar(Tensor self) -> Tensor\n- func: baz(Tensor self) -> Tensor\n"},
                         "Add baz (#4)", "2020-02-20T00:00:00")
    return repo, shas


def headers(*names):
    return {"ATen/native/Foo.h": RELEASE_HEADER, "ATen/ATen.h": b"", "ATen/NativeFunctions.h": native_functions(*names)}


def test_a_cherry_pick_the_branch_point_lacks_is_found_by_the_generated_headers_and_placed(tmp_path, monkeypatch):
    """1.4.0's case: the branch point writes NativeFunctions.h without an operator the release has
    (#31517's ``_test_optional_float``); the master commit that adds it is found and placed, and the
    reconstruction's files are the branch point's with it."""
    monkeypatch.chdir(tmp_path)
    repo, shas = history(tmp_path)
    source = found(repo, tmp_path, shas["fix"], headers=headers("foo", "bar"))
    facts = source.describe()
    assert facts["branch_point"] == shas["cut"]
    checked = facts["generated_headers"]
    assert checked["checked"] and checked["same"] == checked["of"] == 1 and checked["differ"] == []
    assert checked["cherry_picks"] == [{"commit": shas["bar"], "subject": "Add bar (#3)"}]
    assert facts["tree"]["changed"] == [YAML]  # the tree the build reads holds the cherry-pick
    assert "its generator writes the wheel's 1 generated headers, with Add bar (#3) placed" in source.origin
    record = json.loads((tmp_path / "rec.json").read_text())
    assert record["generated_headers"] == checked and record["record_version"] == reconstruct.RECORD_VERSION


# a generator as ATen's writes overloads: ``imag.out`` is ``imag_out`` in C++, its operator ``aten::imag``
GEN_OVERLOADS = GEN_PY.replace(
    b're.findall(r"^- func: (\\w+)\\(", Path(path).read_text(), re.M)]',
    b're.findall(r"^- func: (\\w+)(?:\\.(\\w+))?\\(", Path(path).read_text(), re.M)]').replace(
    b'"".join(f"Tensor {n}(const Tensor & self);\\n" for n in names)',
    b'"".join(f"Tensor {n}{\'_\' + o if o else \'\'}(const Tensor & self); // aten::{n}\\n" for n, o in names)')


def test_picks_are_searched_as_the_inputs_spell_an_operator_and_again_after_each_pick(tmp_path, monkeypatch):
    """1.5.1's case: its wheel's headers lack ``imag_out`` (#35560, on master after the cut, took
    the out variants away), but the search looked for the C++ name, which no generator input
    spells (``imag.out``): "named, not placed", and 3 fixes of the corpus failed their faithful
    build on a reconstruction that was not the release. Now an operator is searched as the
    inputs declare it; and the search is made again from what still differs after each pick kept
    (here it may search once a time)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(generated_headers, "MOST_SEARCHES", 2)
    repo = mirror(tmp_path)
    yaml = b"- func: foo(Tensor self) -> Tensor\n- func: imag.out(Tensor self) -> Tensor\n"
    commit(repo, {"aten/src/ATen/gen.py": GEN_OVERLOADS, "cmake/Codegen.cmake": CODEGEN, YAML: yaml},
           "ATen's generator", "2020-01-15T00:00:00")
    fix = commit(repo, {OP: b"// fixed\n"}, "Fix foo (#1)", "2020-02-01T00:00:00")
    cut = commit(repo, {HEADER: RELEASE_HEADER}, "the release is cut here", "2020-02-10T00:00:00")
    commit(repo, {"aten/src/ATen/ATen.h": b"// later\n"}, "a header changed after the cut", "2020-02-12T00:00:00")
    yaml = yaml.replace(b"- func: imag.out(Tensor self) -> Tensor\n", b"")
    gone = commit(repo, {YAML: yaml}, "Take imag's out variant away (#35560)", "2020-02-15T00:00:00")
    added = commit(repo, {YAML: yaml + b"- func: real(Tensor self) -> Tensor\n"}, "Add real (#5)",
                   "2020-02-16T00:00:00")
    wheel = {"ATen/native/Foo.h": RELEASE_HEADER, "ATen/ATen.h": b"",
             "ATen/NativeFunctions.h": b"#pragma once\nTensor foo(const Tensor & self); // aten::foo\n"
                                       b"Tensor real(const Tensor & self); // aten::real\n"}
    checked = found(repo, tmp_path, fix, headers=wheel).describe()
    assert checked["branch_point"] == cut
    assert checked["generated_headers"]["differ"] == [] and [p["commit"] for p in
                                                           checked["generated_headers"]["cherry_picks"]] == [gone, added]


def test_a_commit_that_would_change_a_header_the_wheel_ships_otherwise_is_not_placed(tmp_path, monkeypatch):
    """Its operator is the release's, but the wheel's Foo.h is not what it makes: not the release's."""
    monkeypatch.chdir(tmp_path)
    repo, shas = history(tmp_path, bar_also={HEADER: b"// bar's header\n"})
    checked = found(repo, tmp_path, shas["fix"], headers=headers("foo", "bar")).describe()["generated_headers"]
    assert checked["cherry_picks"] == [] and checked["differ"] == ["NativeFunctions.h"] and checked["tried"] == 1


def test_what_no_master_commit_explains_is_named_and_nothing_is_placed(tmp_path, monkeypatch):
    """1.5.1's case: the release branch took ``real_out`` out, which no master commit did."""
    monkeypatch.chdir(tmp_path)
    repo, shas = history(tmp_path)
    source = found(repo, tmp_path, shas["fix"], headers=headers("foo", "qux"))
    checked = source.describe()["generated_headers"]
    assert checked["differ"] == ["NativeFunctions.h"] and checked["cherry_picks"] == []
    assert source.describe()["tree"]["changed"] == []
    assert "1 of the wheel's 1 generated headers differ (NativeFunctions.h: Tensor " in source.origin
    assert checked["names"] == ["qux"]  # where the reconstruction is not the release


def test_an_arm_whose_generated_code_changes_what_the_reconstruction_generates_otherwise_is_refused():
    """Issue 59, item 2: 1.5.x's tree generates ``real`` and ``imag`` otherwise than its wheel
    (the release branch took them out). An arm whose generated code changes one of them is
    refused; one that changes another operator (pr32062's pow, its nodes PowBackward1 and 2)
    is the release's generated code with the fix, and goes on."""
    from bugimpact.overrides.generated_code import Judged, unlike_the_wheel
    checked = {"checked": True, "differ": ["Functions.h"], "names": ["findSchemaOrThrow", "imag", "real", "real_out"]}
    pow_nodes = Judged(nodes=["def PowBackward1::apply(variable_list&&)", "def PowBackward2::apply(variable_list&&)"])
    assert unlike_the_wheel(checked, pow_nodes, "1.5.0") == ""
    real = Judged(operators=["real.out"], nodes=["def RealBackward::apply(variable_list&&)"])
    assert unlike_the_wheel(checked, real, "1.5.0").startswith(
        "torch 1.5.0's tree generates RealBackward, real.out otherwise than its wheel was generated")
    assert unlike_the_wheel({**checked, "differ": []}, real, "1.5.0") == ""
    # an operator the arm lacks, where the tree is not the wheel (pr37337 on 1.6.0, whose mirror
    # holds no cut: the wheel has no _euclidean_dist, the tree does)
    lacking = Judged(lacking=["_euclidean_dist"])
    assert "generates _euclidean_dist otherwise" in unlike_the_wheel({**checked, "names": ["_euclidean_dist"]}, lacking,
                                                                     "1.6.0")  # the wheel's own: nothing to refuse
    old = {k: v for k, v in checked.items() if k != "names"}  # a record made before it kept them
    assert "not where (made before it kept their names)" in unlike_the_wheel(old, pow_nodes, "1.5.0")


def test_a_tree_without_the_generator_is_not_checked_and_says_so(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    repo = mirror(tmp_path)
    cut = commit(repo, {HEADER: RELEASE_HEADER}, "the release is cut here", "2020-02-10T00:00:00")
    with zipfile.ZipFile(tmp_path / "w.whl", "w") as archive:
        archive.writestr("torch/include/ATen/NativeFunctions.h", native_functions("foo"))
    checked = generated_headers.check(repo, cut, tmp_path / "w.whl", "2020-02-10", "2020-03-05", "master", list)
    assert checked == {"checked": False, "why": "the tree has no aten/src/ATen/gen.py (a generator this check "
                                                "does not run)"}
    assert generated_headers.in_words(checked).startswith("generated headers not checked: the tree has no")


def test_generated_headers_are_kept_per_commit_and_picks(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    repo, shas = history(tmp_path)
    first = generated_headers.generate(repo, shas["cut"], [shas["bar"]])
    assert first["headers"]["NativeFunctions.h"] == native_functions("foo", "bar")
    kept = generated_headers.generate(tmp_path / "no-clone", shas["cut"], [shas["bar"]])  # read, not run
    assert kept["headers"] == first["headers"]
    assert generated_headers.generate(repo, shas["cut"])["headers"]["NativeFunctions.h"] == native_functions("foo")


def test_an_arms_generator_inputs_are_generated_apart_and_the_autograd_generators_say_why_they_did_not_run(
        tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    repo, shas = history(tmp_path)
    yaml = generated_headers.git(repo, "show", f"{shas['cut']}:{YAML}", binary=True)
    arm = generated_headers.generate(repo, shas["cut"], files={YAML: yaml + b"- func: qux(Tensor self) -> Tensor\n"})
    assert arm["files"]["NativeFunctions.h"] == native_functions("foo", "qux")
    assert generated_headers.generate(repo, shas["cut"])["files"]["NativeFunctions.h"] == native_functions("foo")
    # this tree's gen.py writes no Declarations.yaml, which the autograd generators read
    assert "generate_code.py" in generated_headers.generate(repo, shas["cut"], autograd=True)["error"]


def test_a_pick_places_its_generators_files_where_they_merge_and_leaves_one_that_does_not(tmp_path):
    repo, shas = history(tmp_path)
    tool = "tools/autograd/gen_autograd.py"
    head = b"import os\n\n\n\n\n"
    cut = commit(repo, {tool: head + b"a = 1\n"}, "a generator at the cut", "2020-02-21T00:00:00")
    commit(repo, {tool: head + b"a = 2\n"}, "master changes it", "2020-02-22T00:00:00")
    pick = commit(repo, {tool: head + b"a = 3\n", YAML: b"- func: qux(Tensor self) -> Tensor\n"}, "a pick (#5)",
                  "2020-02-23T00:00:00")
    kept = generated_headers.placed(repo, cut, [pick])
    assert kept == {YAML: b"- func: qux(Tensor self) -> Tensor\n"}  # the tool's change conflicts: left
    fits = commit(repo, {tool: b"import os, sys\n\n\n\n\na = 3\n"}, "one that merges (#6)", "2020-02-24T00:00:00")
    assert generated_headers.placed(repo, cut, [fits])[tool] == b"import os, sys\n\n\n\n\na = 1\n"


def test_a_2019_generator_runs_as_in_its_day_its_own_modules_found_and_yaml_load_without_a_loader(
        tmp_path, monkeypatch):
    """torch 1.1.0's ``cwrap_parser.py``, imported from beside ``gen.py``, calls ``yaml.load`` with no
    Loader, which PyYAML 6 refuses: the generator wrote no header and the reconstruction went
    unchecked."""
    monkeypatch.chdir(tmp_path)
    repo = mirror(tmp_path)
    parser = b"import yaml\ndef parse(text):\n    return [d['func'] for d in yaml.load(text)]\n"
    gen = (b"import sys\nfrom pathlib import Path\nimport cwrap_parser\n"
           b"out = Path(sys.argv[sys.argv.index('--install_dir') + 1])\nout.mkdir(parents=True)\n"
           b"names = [f.split('(')[0] for p in sys.argv[5:] for f in cwrap_parser.parse(Path(p).read_text())]\n"
           b"(out / 'NativeFunctions.h').write_text('#pragma once\\n' + ''.join("
           b"f'Tensor {n}(const Tensor & self);\\n' for n in names))\n")
    cut = commit(repo, {"aten/src/ATen/gen.py": gen, "aten/src/ATen/cwrap_parser.py": parser,
                        "cmake/Codegen.cmake": CODEGEN, YAML: b"- func: foo(Tensor self) -> Tensor\n"},
                 "a 2019 generator", "2019-04-01T00:00:00")
    made = generated_headers.generate(repo, cut)
    assert "error" not in made, made.get("error")
    assert made["headers"]["NativeFunctions.h"] == native_functions("foo")
