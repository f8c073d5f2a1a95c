"""Real PyTorch release wheels for the runtime's interpreter, and one-fix artifacts made from them.

The real-wheel tests download torch 1.5.1 for CPython 3.7 from PyPI once (753 MB; pip's cache makes
later downloads fast) and install it in a real venv."""
import json
import subprocess
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT, config_with, git

from bugimpact import steps
from bugimpact.artifacts import diffs, interpreters, onefix, sources
from bugimpact.artifacts.runtimes import prepare_venv
from bugimpact.config import SHEET_SCHEMA
from bugimpact.framework.paths import CUDA, kind_of, part_of, why_unbounded
from bugimpact.io import InputError
from bugimpact.plan import Plan

PATCH = ROOT / "data" / "patches" / "pytorch" / "pr37881.diff"
WHEEL_CACHE = ROOT / "data" / "cache" / "wheels"  # shared with the shipped study: one download


def py37():
    try:
        return interpreters.find("3.7")
    except InputError as exc:
        pytest.fail(f"Python 3.7 is needed for the torch 1.x tests (.ci/run installs it): {exc}")


def test_interpreters_are_found_by_version_and_give_their_wheel_tags():
    info = py37()
    assert info["version"].startswith("3.7.") and Path(info["executable"]).is_absolute()
    tags = interpreters.wheel_tags(info)
    assert tags["abi"] == "cp37m" and tags["python_version"] == "3.7"
    assert "manylinux1_x86_64" in tags["platforms"] and tags["key"] == "cp37-cp37m-linux_x86_64"
    assert interpreters.find(info["executable"]) == info  # a path names the same interpreter
    with pytest.raises(InputError, match=r"runtime\.python.*no Python interpreter '2\.9'.*pyenv install"):
        interpreters.find("2.9")


def test_a_cached_wheel_for_another_python_is_never_picked():
    tags37 = interpreters.wheel_tags(py37())
    tags36 = interpreters.wheel_tags(dict(py37(), version="3.6.15"))
    assert tags36["key"] != tags37["key"]  # the cache is keyed by Python tag, ABI and platform
    assert not sources.fits("torch-1.4.0-cp36-cp36m-manylinux1_x86_64.whl", tags37)
    assert sources.fits("torch-1.4.0-cp37-cp37m-manylinux1_x86_64.whl", tags37)
    assert not sources.fits("torch-1.4.0-cp37-cp37m-macosx_10_9_x86_64.whl", tags37)


def test_a_release_wheel_is_fetched_for_the_runtime_interpreter_once():
    info = py37()
    config = config_with(**{"artifacts.wheel_cache": str(WHEEL_CACHE)})
    spec = {"source": "pypi", "version": "1.5.1", "python": info}
    first = steps.artifact(steps.artifact_sources(config), spec, WHEEL_CACHE / "test-a.json")
    assert first["status"] == "ok", first
    assert Path(first["wheel"]).name == "torch-1.5.1-cp37-cp37m-manylinux1_x86_64.whl"
    assert "/pypi/torch-1.5.1/cp37-cp37m-linux_x86_64/" in first["wheel"]
    again = steps.artifact(steps.artifact_sources(config), spec, WHEEL_CACHE / "test-b.json")
    assert again["wheel"] == first["wheel"] and again["build_seconds"] < 10
    assert again["wheel_sha256"] == first["wheel_sha256"]


def test_a_missing_release_is_a_recorded_failure_naming_the_interpreter_and_versions(tmp_path):
    info = py37()
    config = config_with(**{"artifacts.wheel_cache": str(tmp_path / "cache")})
    manifest = steps.artifact(steps.artifact_sources(config), {"source": "pypi", "version": "1.5.9", "python": info},
                              tmp_path / "m.json")
    assert manifest["status"] == "failed" and manifest["failure_class"] == "download"
    assert info["executable"] in manifest["error"] and "cp37m" in manifest["error"]
    listed = manifest["error"].split("the versions that exist for it: ")[1].split(", ")
    assert {"1.4.0", "1.5.0", "1.5.1", "1.6.0"} <= set(listed) and "2.13.0" not in listed
    assert json.loads((tmp_path / "m.json").read_text())["status"] == "failed"


def test_a_real_fix_is_reverse_applied_to_the_real_release_that_contains_it(tmp_path):
    """PR #37881 (circular padding across the wrong dimension) shipped in torch 1.5.1: the buggy
    arm is 1.5.1 with the fix reversed, and it really pads the wrong dimension again."""
    info = py37()
    config = config_with(**{"artifacts.wheel_cache": str(WHEEL_CACHE)})
    arms = {}
    for arm in ("buggy", "corrected"):
        spec = {"source": "onefix", "arm": arm, "patch": str(PATCH), "python": info,
                "release": {"source": "pypi", "version": "1.5.1"}}
        arms[arm] = steps.artifact(steps.artifact_sources(config), spec, tmp_path / arm / "manifest.json")
        assert arms[arm]["status"] == "ok", arms[arm]
    buggy, corrected = arms["buggy"], arms["corrected"]
    assert buggy["fix_in_release"] and corrected["fix_in_release"]
    assert buggy["apply"] == "reverse" and corrected["apply"] is None and corrected["overlay"] == {}
    assert buggy["files_changed"] == ["torch/nn/modules/conv.py", "torch/nn/modules/utils.py"]
    assert buggy["wheel_sha256"] == corrected["wheel_sha256"]  # one release binary, both arms
    assert len(buggy["patch_sha256"]) == 64 and buggy["diff_origin"] == f"file {PATCH}"

    uv_cache = tmp_path / "uv"  # the release unpacked once; both venvs link to it
    runtime = prepare_venv(buggy, tmp_path / "buggy", info["executable"], cache=uv_cache)
    release = prepare_venv(corrected, tmp_path / "corrected", info["executable"], cache=uv_cache)
    assert runtime["probe"]["version"] == "1.5.1" and Path(runtime["python"]).is_absolute()
    assert runtime["overlay_installed"] == buggy["overlay"]
    shape = "import torch; c = torch.nn.Conv2d(6, 1, 3, padding=(0, 1), padding_mode='circular'); " \
            "print(tuple(c(torch.zeros(1, 6, 20, 10)).shape))"
    shapes = {arm: subprocess.run([rt["python"], "-c", shape], capture_output=True, text=True)
              for arm, rt in (("buggy", runtime), ("corrected", release))}
    assert shapes["buggy"].stdout.strip() == "(1, 1, 20, 8)", shapes["buggy"].stderr  # H padded, not W
    assert shapes["corrected"].stdout.strip() == "(1, 1, 18, 10)", shapes["corrected"].stderr
    # Shared bytes: the library is one inode in both venvs; the patched files have their own, and
    # the release's copy (and so uv's cache) still holds the shipped bytes.
    site = {arm: next((tmp_path / arm / "venv" / "lib").glob("python3*/site-packages"))
            for arm in ("buggy", "corrected")}
    lib = [site[arm] / "torch" / "lib" / "libtorch.so" for arm in ("buggy", "corrected")]
    assert lib[0].stat().st_ino == lib[1].stat().st_ino and lib[0].stat().st_nlink >= 3
    with zipfile.ZipFile(buggy["wheel"]) as wheel:
        for path in buggy["files_changed"]:
            assert (site["buggy"] / path).stat().st_ino != (site["corrected"] / path).stat().st_ino
            assert (site["corrected"] / path).read_bytes() == wheel.read(path)
    own = sum(p.stat().st_size for p in (tmp_path / "buggy" / "venv").rglob("*")
              if p.is_file() and not p.is_symlink() and p.stat().st_nlink == 1)
    assert own < 50e6, own  # a one-fix arm costs its patched files, not a release
    # The same venv is reused by a rerun (the marker says it was finished).
    again = prepare_venv(buggy, tmp_path / "buggy", info["executable"], cache=uv_cache)
    assert again["python"] == runtime["python"]


def test_a_release_venv_gets_the_dependencies_its_wheel_declares_linked_from_one_copy(tmp_path, monkeypatch):
    """torch 2.x wheels declare their CUDA libraries (nvidia-*) as dependencies: a release venv
    installs them, and two releases that declare the same library link to one unpacked copy. Here
    a wheel named torch declares a library wheel served from a local folder (pip's find-links,
    which uv is given too)."""
    import os
    import sys

    from conftest import make_wheel
    links = tmp_path / "links"
    links.mkdir()
    make_wheel(links, "fakecudalib", {"fakecudalib.py": "blob = '" + "c" * 3_000_000 + "'\n"})
    for v in ("2.98.0", "2.99.0"):
        (tmp_path / v).mkdir()
    releases = {v: make_wheel(tmp_path / v, "torch", {"torch/__init__.py": f"__version__ = '{v}'\nfrom . import version\n",
                                                "torch/version.py": "git_version = 'test'\ncuda = None\n"},
                              version=v, requires=["fakecudalib"]) for v in ("2.98.0", "2.99.0")}
    monkeypatch.setenv("PIP_FIND_LINKS", f"{links} {os.environ.get('PIP_FIND_LINKS', '')}".strip())
    venvs = {}
    for version, wheel in releases.items():
        runtime = prepare_venv({"source": "pypi", "wheel": str(wheel)}, tmp_path / f"rt-{version}",
                               sys.executable, cache=tmp_path / "uv")
        venvs[version] = Path(runtime["python"]).parents[1]
        out = subprocess.run([runtime["python"], "-c", "import torch, fakecudalib; print(torch.__version__, "
                              "len(fakecudalib.blob))"], capture_output=True, text=True)
        assert out.stdout.split() == [version, "3000000"], out.stderr
    libs = [next(v.glob("lib/python3*/site-packages/fakecudalib.py")) for v in venvs.values()]
    assert libs[0].stat().st_ino == libs[1].stat().st_ino  # one copy, in uv's cache


def _tiny_release(tmp_path, clone, sgd):
    """A wheel-shaped zip holding ``torch/optim/sgd.py`` (enough for the direction check), and a
    config that takes fix diffs from ``clone``."""
    wheel = tmp_path / "torch-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("torch/optim/sgd.py", sgd)
    return wheel, config_with(**{"artifacts.onefix.clone": str(clone),
                                 "artifacts.wheel_cache": str(tmp_path / "cache")})


@pytest.fixture
def fix_repo(tmp_path):
    """A real git repository with a Python-only fix and a fix that also touches C++."""
    repo = tmp_path / "framework"
    (repo / "torch" / "optim").mkdir(parents=True)
    (repo / "aten" / "src").mkdir(parents=True)
    (repo / "test").mkdir()
    git(tmp_path, "init", "-q", str(repo))
    (repo / "torch" / "optim" / "sgd.py").write_text("def step(p, g, lr):\n    return p + lr * g\n")
    (repo / "aten" / "src" / "Loss.cpp").write_text("int loss() { return 1; }\n")
    (repo / "test" / "test_optim.py").write_text("pass\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    buggy = git(repo, "rev-parse", "HEAD")
    (repo / "torch" / "optim" / "sgd.py").write_text("def step(p, g, lr):\n    return p - lr * g\n")
    (repo / "test" / "test_optim.py").write_text("assert True\n")
    git(repo, "commit", "-qam", "Fix the sign of SGD's step (#1)")
    python_fix = git(repo, "rev-parse", "HEAD")
    (repo / "aten" / "src" / "Loss.cpp").write_text("int loss() { return 2; }\n")
    (repo / "torch" / "optim" / "sgd.py").write_text("def step(p, g, lr):\n    return p - lr * g  # ok\n")
    git(repo, "commit", "-qam", "Fix the loss kernel (#2)")
    return repo, buggy, python_fix, git(repo, "rev-parse", "HEAD")


def test_a_fix_from_a_clone_is_forward_applied_to_a_release_that_predates_it(tmp_path, fix_repo):
    repo, buggy, corrected, _ = fix_repo
    wheel, config = _tiny_release(tmp_path, repo, "def step(p, g, lr):\n    return p + lr * g\n")
    spec = {"source": "onefix", "release": {"source": "wheel", "wheel": str(wheel)},
            "buggy_sha": buggy, "corrected_sha": corrected}
    manifest = steps.artifact(steps.artifact_sources(config), dict(spec, arm="corrected"), tmp_path / "c" / "manifest.json")
    assert manifest["status"] == "ok" and manifest["apply"] == "forward"
    assert manifest["fix_in_release"] is False and manifest["files_not_shipped"] == ["test/test_optim.py"]
    assert manifest["diff_origin"].startswith(f"clone {repo}")
    patched = Path(manifest["overlay_dir"]) / "torch" / "optim" / "sgd.py"
    assert patched.read_text().endswith("return p - lr * g\n")
    same = steps.artifact(steps.artifact_sources(config), dict(spec, arm="buggy"), tmp_path / "b" / "manifest.json")
    assert same["apply"] is None and same["overlay"] == {}


def test_a_fix_that_cannot_be_isolated_on_a_release_is_refused_with_its_reason(tmp_path, fix_repo):
    repo, buggy, python_fix, cpp_fix = fix_repo
    wheel, config = _tiny_release(tmp_path, repo, "def step(p, g, lr):\n    return p * lr\n")
    base = {"source": "onefix", "arm": "buggy", "release": {"source": "wheel", "wheel": str(wheel)}}
    compiled = steps.artifact(steps.artifact_sources(config), dict(base, buggy_sha=python_fix, corrected_sha=cpp_fix),
                              tmp_path / "a" / "manifest.json")
    assert compiled["status"] == "failed" and compiled["failure_class"] == "refused"
    assert compiled["error"].startswith("the fix touches infra: infrastructure") and "aten/src/Loss.cpp" in compiled["error"]
    stale = steps.artifact(steps.artifact_sources(config), dict(base, buggy_sha=buggy, corrected_sha=python_fix),
                           tmp_path / "b" / "manifest.json")
    assert stale["failure_class"] == "refused" and "does not apply" in stale["error"]
    nowhere = steps.artifact(steps.artifact_sources(config_with(**{"artifacts.wheel_cache": str(tmp_path / "cache")})), dict(base, buggy_sha=buggy, corrected_sha=python_fix),
                             tmp_path / "c" / "manifest.json")
    assert nowhere["failure_class"] == "refused" and "no source for the fix's diff" in nowhere["error"]
    # with no diff at hand, the sheet's verdict (read from the real diff by the resolver) is the reason
    known = steps.artifact(steps.artifact_sources(config_with(**{"artifacts.wheel_cache": str(tmp_path / "cache")})),
                           dict(base, buggy_sha=python_fix, corrected_sha=cpp_fix,
                                onefix="no: compiled or build files (aten/src/Loss.cpp)"),
                           tmp_path / "d" / "manifest.json")
    assert known["error"] == ("compiled or build files (aten/src/Loss.cpp), which a release wheel "
                              "cannot take (the sheet's onefix, read from the fix's diff)")


@pytest.mark.parametrize("path, kind", [
    ("torch/nn/functional.py", "python"), ("torch/optim/adamw.py", "python"),
    ("test/test_nn.py", "not_shipped"), ("docs/source/nn.rst", "not_shipped"),
    ("README.md", "not_shipped"), ("aten/src/ATen/native/Loss.cpp", "compiled"),
    ("aten/src/ATen/native/native_functions.yaml", "compiled"), ("torch/csrc/autograd/init.cpp", "compiled"),
    ("torch/csrc/jit/tensorexpr/codegen.py", "compiled"), ("tools/autograd/derivatives.yaml", "compiled"),
    ("CMakeLists.txt", "compiled"), ("setup.py", "compiled"), ("torch/_C/_nn.pyi.in", "compiled"),
    ("c10/core/Device.h", "compiled"), ("torch/lib/libshm/core.cpp", "compiled"),
    ("caffe2/python/__init__.py", "wheel"),  # outside torch/: the release wheel's list decides
])
def test_each_file_of_a_diff_is_classified(path, kind):
    assert onefix.classify(path) == kind


def test_a_fix_diff_comes_from_the_github_api_when_no_clone_is_configured(httpserver):
    """The compare API gives per-file patches; they are rebuilt into the git diff itself."""
    sections = onefix.split_diff(PATCH.read_text())
    files = [{"filename": path, "status": "modified", "changes": 9,
              "patch": section[section.index("@@"):].rstrip("\n")} for path, section in sections]
    files.append({"filename": "docs/logo.png", "status": "added", "changes": 0})  # no patch
    httpserver.expect_request("/repos/pytorch/pytorch/compare/" + "a" * 40 + "..." + "b" * 40) \
        .respond_with_json({"status": "ahead", "files": files})
    config = config_with(**{"artifacts.onefix.api": True, "mine.api_url": httpserver.url_for("")})
    text, origin = diffs.fix_diff(steps.artifact_sources(config), {"buggy_sha": "a" * 40, "corrected_sha": "b" * 40})
    assert origin.startswith("GitHub API: compare")
    original = "".join(line for _, section in sections for line in section.splitlines(True)
                       if not line.startswith("index "))
    assert text.startswith(original)
    assert text[len(original):] == ("diff --git a/docs/logo.png b/docs/logo.png\nnew file mode 100644\n"
                                    "Binary files a/docs/logo.png and b/docs/logo.png differ\n")


def test_the_runtime_interpreter_is_part_of_the_runtime_and_the_experiment(tmp_path):
    sheet = tmp_path / "sheet.csv"
    base = {"sheet": str(sheet), "runtime.kind": "venv", "bugs.from_sheet": False,
            "bugs.controls": {"aa": {"buggy": {"source": "pypi", "version": "1.5.1"},
                                     "corrected": {"source": "pypi", "version": "1.5.1"}}}}
    info = py37()
    plan37 = Plan(config_with(**base, **{"runtime.python": "3.7"}), SHEET_SCHEMA)
    assert plan37.bug("aa").arm("buggy")["artifact"] == "pypi-1.5.1-cp37-cp37m-linux_x86_64"
    ident = plan37.bug("aa").arm("buggy")["artifact"]
    runtime = plan37.artifacts[ident].runtime
    assert runtime.startswith(f"venv-py{info['version']}-")
    assert plan37.artifact_of("aa", "buggy").runtime_json.startswith(f"results/runtimes/{runtime}/")
    # Another interpreter of the same version (a venv of it: another path) is another runtime.
    other = tmp_path / "py37b"
    subprocess.run([info["executable"], "-m", "venv", "--without-pip", str(other)], check=True)
    plan_b = Plan(config_with(**base, **{"runtime.python": str(other / "bin" / "python")}), SHEET_SCHEMA)
    assert plan_b.artifacts[ident].runtime != runtime and plan_b.keys["aa"] != plan37.keys["aa"]
    assert plan_b.bug("aa").arm("buggy")["artifact"] == ident  # same wheel
    again = Plan(config_with(**base, **{"runtime.python": info["executable"]}), SHEET_SCHEMA)
    assert (again.artifacts, again.keys) == (plan37.artifacts, plan37.keys)


@pytest.mark.parametrize("path", [
    "aten/src/ATen/native/README.md", "android/pytorch_android/src/main/cpp/pytorch_jni.cpp", "LICENSE",
    ".devcontainer/Dockerfile", "aten/src/ATen/test/basic.cpp", "requirements.txt",
    "tools/pyi/gen_pyi.py", "tools/code_analyzer/op_deps_pass.cpp"])  # type stubs, the mobile build's
def test_what_no_wheel_ships_is_one_classification_for_reach_and_the_one_fix_arm(path):
    assert kind_of(path) == "not_shipped" and onefix.classify(path) == "not_shipped"


@pytest.mark.parametrize("path", ["aten/src/ATen/nn.yaml", "aten/src/ATen/Declarations.cwrap",
                                  "aten/src/ATen/core/TensorBody.h", "aten/src/ATen/core/TensorMethods.h"])
def test_generator_inputs_and_generated_headers_are_code_generation(path):
    assert part_of(path) == "codegen" and onefix.classify(path) == "compiled"
    assert why_unbounded(path) == "code generation, which can change every operator"


@pytest.mark.parametrize("path, cuda", [
    ("aten/src/THC/THCGeneral.h", True), ("aten/src/THCUNN/generic/SoftMax.cu", True),
    ("c10/cuda/CUDAStream.h", True), ("aten/src/ATen/CUDAGenerator.h", True),
    ("aten/src/ATen/native/cudnn/Conv.cpp", True),
    # compiled into every build, called by CPU runs (at::hasCUDA)
    ("aten/src/ATen/detail/CUDAHooksInterface.h", False), ("aten/src/ATen/native/Convolution.cpp", False)])
def test_a_cuda_source_is_one_classification_for_reach_the_one_fix_arm_and_its_parts(path, cuda):
    assert bool(CUDA.search(path)) is cuda  # reach: not reached on cpu
    assert onefix.cuda_only([path]) is cuda
    assert (part_of(path) == "cuda") is cuda


def test_each_file_of_a_diff_is_classified_on_the_wheels_own_list():
    shipped = {"caffe2/python/__init__.py", "torch/__init__.py"}
    assert onefix.classify("caffe2/python/__init__.py", shipped=shipped) == "python"
    assert onefix.classify("caffe2/python/gone.py", shipped=shipped) == "not_shipped"
    assert onefix.classify("torch/new_module.py", shipped=shipped) == "python"  # a file the fix adds
    assert onefix.classify("tools/autograd/gen.py", shipped=shipped | {"tools/autograd/gen.py"}) \
        == "python"  # what the wheel ships as a .py file is patchable, whatever its folder
    diff = ("diff --git a/caffe2/python/__init__.py b/caffe2/python/__init__.py\n--- a/x\n+++ b/x\n"
            "diff --git a/torch/__init__.py b/torch/__init__.py\n--- a/y\n+++ b/y\n")
    with pytest.raises(onefix.Refused, match="caffe2/python/__init__.py"):
        onefix.isolate(diff)  # no wheel list: not guessed
    _, kinds, kernels = onefix.isolate(diff, wheel_files=shipped)
    assert kernels is None  # a Python-only fix
    assert kinds["python"] == ["caffe2/python/__init__.py", "torch/__init__.py"]


@pytest.mark.parametrize("paths, only", [
    (["aten/src/ATen/native/cuda/Reduce.cuh", "test/test_cuda.py"], True),  # the paper's pr32831
    (["aten/src/ATen/native/cudnn/RNN.cpp"], True), (["torch/cuda/__init__.py"], True),
    (["torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"], True), (["aten/src/THC/THCBlas.cu"], True),
    (["aten/src/ATen/native/Conv.cpp", "aten/src/ATen/native/cuda/Conv.cu"], False),
    (["torch/nn/functional.py"], False), (["test/test_nn.py"], False),
])
def test_a_diff_that_changes_only_cuda_sources_is_tagged_cuda(paths, only):
    assert onefix.cuda_only(paths) is only


def test_one_fix_arms_say_which_is_the_release_and_which_the_diff(tmp_path):
    release = {"source": "pypi", "version": "1.5.1"}
    base = {"source": "onefix", "release": release, "patch_sha256": "ab" * 32}
    assert onefix.describe(dict(base, apply=None)) == "torch 1.5.1 as released"
    assert onefix.describe(dict(base, apply="reverse")) == \
        "torch 1.5.1 with the fix's diff reversed (diff sha256 abababababab)"
    assert onefix.describe(dict(base, apply="forward")).endswith("diff applied (diff sha256 abababababab)")
    assert onefix.describe({"source": "pypi", "version": "1.5.1"}) == ""


def test_with_a_clone_the_sheet_says_which_fixes_are_python_only(tmp_path, fix_repo):
    repo, *_ = fix_repo
    git(repo, "branch", "-M", "main")
    bugs = tmp_path / "bugs.csv"
    bugs.write_text("id,release,area,pr,prs,text,url\n"
                    "pr1,v0.2,Optim,1,1,Fix the sign of SGD's step,\n"
                    "pr2,v0.2,Loss,2,2,Fix the loss kernel,\n")
    config = config_with(**{"resolve.resolvers": ["git"], "resolve.clone": str(repo)})
    steps.resolve(config["resolve"], config["mine"]["api_url"], config["repo"], bugs,
                  tmp_path / "commits.csv")
    sheet = tmp_path / "sheet.csv"
    steps.merge_sheet(sheet, bugs, tmp_path / "commits.csv", tmp_path / "merge.json")
    from bugimpact.io import read_csv
    rows = {r["id"]: r for r in read_csv(sheet)[1]}
    assert rows["pr1"]["resolve_status"] == "resolved" and rows["pr1"]["onefix"] == "yes"
    assert rows["pr2"]["onefix"] == ("no: infra: infrastructure outside ATen's and TH's own .cpp files "
                                     "(torch/csrc, caffe2, c10, headers, the build): an interposed library "
                                     "takes only those (aten/src/Loss.cpp)")


def test_accepted_sheet_rows_run_as_one_fix_artifacts(tmp_path):
    sheet = tmp_path / "sheet.csv"
    sheet.write_text("id,decision,reason,buggy_sha,corrected_sha\n"
                     f"pr1,accept,,{'a' * 40},{'b' * 40}\npr2,accept,,{'c' * 40},{'d' * 40}\n")
    release = {"source": "pypi", "version": "1.5.1"}
    base = {"sheet": str(sheet), "runtime.kind": "venv", "runtime.python": "3.7",
            "bugs.controls": {}, "artifacts.source": "onefix"}
    with pytest.raises(InputError, match=r"artifacts\.onefix\.release"):
        Plan(config_with(**base), SHEET_SCHEMA)
    override = {"pr2": {"buggy": {"source": "onefix", "release": {"source": "pypi", "version": "1.5.0"}},
                        "corrected": {"source": "pypi", "version": "1.5.1"}}}
    plan = Plan(config_with(**base, **{"artifacts.onefix.release": release,
                                       "bugs.overrides": override}), SHEET_SCHEMA)
    buggy = plan.bug("pr1").arm("buggy")
    assert buggy["source"] == "onefix" and buggy["release"] == release and buggy["arm"] == "buggy"
    assert (buggy["buggy_sha"], buggy["corrected_sha"]) == ("a" * 40, "b" * 40)
    assert buggy["artifact"].startswith("onefix-buggy-")
    assert plan.bug("pr1").arm("corrected")["artifact"].startswith("onefix-corrected-")
    assert plan.bug("pr2").arm("buggy")["buggy_sha"] == "c" * 40  # an override takes the row's commits
    assert plan.artifacts[buggy["artifact"]].spec["python"]["version"].startswith("3.7")
    # accepted rows a docker runtime cannot run are named, one line each; the study goes on
    docker = Plan(config_with(**{**base, "artifacts.onefix.release": release, "runtime.kind": "docker"}),
                  SHEET_SCHEMA)
    assert docker.cannot_run == {"pr1": "a onefix arm runs in a venv runtime: set runtime.kind venv",
                                 "pr2": "a onefix arm runs in a venv runtime: set runtime.kind venv"}
    assert not docker.bugs


def test_a_runtime_or_wheel_that_cannot_be_made_is_a_recorded_failure(tmp_path, httpserver):
    manifest = tmp_path / "a" / "manifest.json"
    manifest.parent.mkdir()
    manifest.write_text(json.dumps({"source": "installed", "status": "ok", "wheel": None}))
    result = steps.runtime("venv", manifest, tmp_path / "r" / "runtime.json",
                           {"interpreter": {"executable": str(tmp_path / "no-python")}})
    assert result["status"] == "failed" and "runtime failed" in result["reason"]
    assert json.loads((tmp_path / "r" / "runtime.json").read_text())["status"] == "failed"
    httpserver.expect_request("/gone.whl").respond_with_data("gone", status=404)
    wheel = steps.artifact(steps.artifact_sources(config_with(**{"artifacts.wheel_cache": str(tmp_path / "c")})),
                           {"source": "wheel", "wheel": httpserver.url_for("/gone.whl")},
                           tmp_path / "w" / "manifest.json")
    assert wheel["status"] == "failed" and "404" in wheel["error"]


def test_a_refused_fix_stops_its_bug_with_one_reason_and_the_study_goes_on(tmp_path, fix_repo):
    """A one-fix artifact that is refused schedules no run of its bug: the arms gate says why,
    once, and the verdict is incomplete; the control beside it is trained and decided."""
    import sys

    import yaml
    from workflow import project_copy, snakemake
    repo, _, python_fix, cpp_fix = fix_repo
    work = project_copy(tmp_path / "p")
    wheel, _ = _tiny_release(tmp_path, repo, "def step(p, g, lr):\n    return p * lr\n")
    patch = tmp_path / "cpp.diff"
    patch.write_text(git(repo, "diff", "--full-index", python_fix, cpp_fix) + "\n")
    config = yaml.safe_load((ROOT / "tests" / "configs" / "fast.yaml").read_text())
    config["bugs"] = {"from_sheet": False,
                      "controls": {"aa": config["bugs"]["controls"]["aa"]},
                      "fixes": {"cpp-fix": {"label": "touches C++",
                                            "release": {"source": "wheel", "wheel": str(wheel)},
                                            "patch": str(patch)}}}
    config["runtime"] = {"kind": "venv", "python": sys.executable}
    config["train"].update(runs=4, epochs=2)
    (work / "refused.yaml").write_text(yaml.safe_dump(config))
    out = snakemake(work, "--configfile", "refused.yaml")
    assert not (work / "results" / "runs" / "cpp-fix").exists()  # not one run scheduled
    assert not (work / "logs" / "train" / "cpp-fix").exists()
    assert "runs/cpp-fix" not in out.stdout + out.stderr
    gate = json.loads(next((work / "results" / "arms" / "cpp-fix").glob("*.json")).read_text())
    assert gate["runnable"] is False
    from bugimpact.io import read_csv
    verdicts = {r["bug"]: r for r in read_csv(work / "results" / "calibration" / "stats" / "verdicts.csv")[1]}
    refused = verdicts["cpp-fix"]
    assert refused["verdict"] == "incomplete"
    assert refused["reason"].startswith("no runs: artifact failed (refused): the fix touches infra: "
                                        "infrastructure")
    assert refused["reason"].count("aten/src/Loss.cpp") == 1  # said once, not per run or arm
    assert verdicts["aa"]["verdict"] == "not triggered"
    assert len(list((work / "results" / "runs" / "aa").glob("*/*/*.json"))) == 4  # 2 pairs decided it
    assert "no runs: artifact failed (refused)" in (work / "results" / "calibration" / "report.html").read_text()


def test_the_versions_that_exist_come_from_the_index_not_from_pips_wording(httpserver):
    """The index's simple API lists the files; the versions are those with a wheel this
    interpreter can install (PEP 691 JSON, or the PEP 503 page of an older index)."""
    tags = {"python_version": "3.7", "implementation": "cp", "abi": "cp37m",
            "platforms": ["manylinux1_x86_64", "linux_x86_64"], "key": "cp37-cp37m-linux_x86_64"}
    files = ["torch-1.4.0-cp37-cp37m-manylinux1_x86_64.whl", "torch-1.5.0-cp37-cp37m-linux_x86_64.whl",
             "torch-1.5.0-cp38-cp38-linux_x86_64.whl", "torch-2.1.0-cp311-cp311-manylinux1_x86_64.whl",
             "torch-1.13.1-cp37-cp37m-manylinux1_x86_64.whl", "torch-1.0.0.tar.gz"]
    httpserver.expect_request("/json/torch/").respond_with_json(
        {"meta": {"api-version": "1.0"}, "name": "torch", "files": [{"filename": f} for f in files]},
        content_type="application/vnd.pypi.simple.v1+json")
    page = "".join(f'<a href="{f}#sha256=0">{f}</a><br>' for f in files)
    httpserver.expect_request("/html/torch/").respond_with_data(page, content_type="text/html")
    for kind in ("json", "html"):
        versions = sources.index_versions(tags, httpserver.url_for(f"/{kind}"))
        assert versions == ["1.4.0", "1.5.0", "1.13.1"], kind  # version order, this Python only
