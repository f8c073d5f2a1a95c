"""Preflight: what hours of builds need, checked in seconds, on real git repositories (and, for the
GPU check only, recorded nvidia-smi outputs: no GPU here)."""
import os
import subprocess
import sys

import pytest
from conftest import ROOT, config_with
from tinypkg import add_submodule, make_repo

from bugimpact import preflight, steps
from bugimpact.artifacts.docker import recipe
from bugimpact.config import SHEET_SCHEMA
from bugimpact.io import InputError
from bugimpact.plan import Plan

H100 = "NVIDIA H100 80GB HBM3, 9.0, 550.54.15\n"
T4 = "Tesla T4, 7.5, 535.104.05\n"
OLD_V100 = "Tesla V100-SXM2-16GB, 418.67\n"  # an old driver: no compute_cap column


def rows(checks):
    return {c.name: c for c in checks}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    base = tmp_path_factory.mktemp("pf")
    shas = make_repo(base / "clone", fillers=1, functions_per_filler=1)
    shas["submodule"] = add_submodule(base / "clone", base / "mirrors" / "dep",
                                      "https://unreachable.invalid/mirrors/dep")
    return base, shas


def docker_study(tmp_path, base, buggy, corrected, **changes):
    sheet = tmp_path / "sheet.csv"
    sheet.write_text(f"id,decision,reason,buggy_sha,corrected_sha\npr1,accept,,{buggy},{corrected}\n")
    return config_with(**{"sheet": str(sheet), "bugs.controls": {}, "runtime.kind": "docker",
                          "artifacts.docker.clone": str(base / "clone"), **changes})


def test_the_default_study_passes(tmp_path):
    out = subprocess.run([sys.executable, "-m", "bugimpact", "preflight"], cwd=ROOT,
                         capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))
    assert out.returncode == 0 and "preflight: 2 checks, 0 failed" in out.stderr


def test_missing_commits_and_unreachable_submodules_fail_with_their_fix(tmp_path, repo):
    base, shas = repo
    config = docker_study(tmp_path, base, "f" * 40, shas["submodule"])
    checks = rows(preflight.run(config, Plan(config, SHEET_SCHEMA)))
    assert checks["commits (docker)"].status == "FAIL" and "ffffffffffff" in checks["commits (docker)"].detail
    sub = checks["submodules"]
    assert sub.status == "FAIL" and "https://unreachable.invalid/mirrors/dep" in sub.detail
    assert "git_rewrites" in sub.fix
    # rewritten to the local mirror, it goes through; the user's clone is not touched
    fixed = docker_study(tmp_path, base, shas["buggy"], shas["submodule"], **{
        "artifacts.docker.git_rewrites": {"https://unreachable.invalid/mirrors/": f"{base}/mirrors/"}})
    checks = rows(preflight.run(fixed, Plan(fixed, SHEET_SCHEMA)))
    assert checks["commits (docker)"].status == "pass"
    assert checks["submodules"].status == "pass"
    assert f"https://unreachable.invalid/mirrors/dep -> {base}/mirrors/dep" in checks["submodules"].detail
    assert "submodule entries" not in checks  # the clone has initialised it
    assert "url." not in (base / "clone" / ".git" / "config").read_text()


def test_the_workflow_step_raises_with_the_failed_rows(tmp_path, repo):
    base, shas = repo
    config = docker_study(tmp_path, base, "f" * 40, shas["buggy"])
    with pytest.raises(InputError, match=r"check\(s\) failed, so no build starts:(.|\n)*commits \(docker\)"):
        steps.preflight(config, tmp_path / "preflight.txt")
    assert not (tmp_path / "preflight.txt").exists()


@pytest.mark.parametrize("smi, toolchain, status, words", [
    (H100, "pytorch1-cuda10", "FAIL", "cannot run on sm_90"),
    (T4, "pytorch1-cuda10", "pass", "toolchain CUDA 10.2"),
    (OLD_V100, "pytorch1-cuda10", "FAIL", "needs driver >= 440.33"),
    (H100, "pytorch2-cuda12", "pass", "toolchain CUDA 12.4"),
])
def test_gpus_against_the_toolchain(tmp_path, repo, smi, toolchain, status, words):
    base, shas = repo
    config = docker_study(tmp_path, base, shas["buggy"], shas["corrected"], **{
        "artifacts.docker.toolchain": toolchain, "train.device": "cuda"})
    check = rows(preflight._gpus(config, Plan(config, SHEET_SCHEMA), smi))["gpus vs toolchain"]
    assert check.status == status and words in check.detail
    if status == "FAIL" and "sm_90" in words:
        assert "older GPU" in check.fix and "train.device: cpu" in check.fix


def test_gpus_against_release_wheels_and_no_gpu(tmp_path):
    config = config_with(**{"sheet": str(tmp_path / "none.csv"), "runtime.kind": "venv",
                            "runtime.python": "3.7", "train.device": "cuda",
                            "bugs.controls": {"up": {"buggy": {"source": "pypi", "version": "1.5.0"},
                                                     "corrected": {"source": "pypi", "version": "1.5.1"}}}})
    plan = Plan(config, SHEET_SCHEMA)
    a100 = "NVIDIA A100-SXM4-40GB, 8.0, 535.104.05\n"
    check = rows(preflight._gpus(config, plan, a100))["gpus vs release wheels"]
    assert check.status == "FAIL" and "torch 1.5.0, 1.5.1 wheels are CUDA 10.x builds" in check.detail
    assert rows(preflight._gpus(config, plan, T4))["gpus vs release wheels"].status == "pass"
    assert rows(preflight._gpus(config, plan, ""))["gpus"].status == "FAIL"


def test_release_wheels_the_interpreter_can_use(tmp_path):
    config = config_with(**{"sheet": str(tmp_path / "none.csv"), "runtime.kind": "venv",
                            "runtime.python": "3.7", "artifacts.wheel_cache": str(tmp_path / "c"),
                            "bugs.controls": {"up": {"buggy": {"source": "pypi", "version": "1.5.9"},
                                                     "corrected": {"source": "pypi", "version": "1.5.1"}}}})
    checks = rows(preflight.run(config, Plan(config, SHEET_SCHEMA)))
    assert checks["interpreter"].detail.startswith("cpython 3.7.")
    wheels = checks["release wheels"]
    assert wheels.status == "FAIL" and "no wheel of 1.5.9 for it" in wheels.detail
    assert "1.5.1" in wheels.fix and "0 cached, 1 to download" in wheels.detail


def test_dataset_files_and_checksums(tmp_path):
    missing = config_with(**{"sheet": str(tmp_path / "none.csv"), "train.challenge": "cifar10",
                             "data.cifar10": str(tmp_path / "cifar-10-python.tar.gz")})
    assert preflight._data(missing, missing["train"]["challenge"])[0].status == "FAIL"
    (tmp_path / "cifar-10-python.tar.gz").write_bytes(b"not the official tarball")
    wrong = preflight._data(missing, missing["train"]["challenge"])[0]
    assert wrong.status == "FAIL" and "not the official files" in wrong.detail


def test_disk_against_the_builds_planned():
    assert preflight.disk_check(900, 30, 36, 25, "/data").status == "FAIL"
    assert preflight.disk_check(50, 1000, 2, 25, "/data").status == "pass"


def test_build_speed_settings_are_not_part_of_the_recipe():
    cfg = {"toolchain": "pytorch1-cuda10", "base_image": "", "build_command": "python setup.py bdist_wheel",
           "build_env": {"MAX_JOBS": 16, "USE_CUDA": 1}}
    parts, digest = recipe(cfg)
    assert recipe({**cfg, "build_env": {"MAX_JOBS": 2, "USE_CUDA": 1}})[1] == digest
    assert recipe({**cfg, "build_env": {"MAX_JOBS": 16, "USE_CUDA": 0}})[1] != digest
    # the era preset is part of the recipe: BUILD_TEST off; on CPU its CPU switches too
    assert parts["build_env"]["BUILD_TEST"] == "0" and parts["runner_env"] == {"MAX_JOBS": "16"}
    cpu = recipe({**cfg, "build_env": {"USE_CUDA": 0}})[0]["build_env"]
    assert cpu["USE_CUDNN"] == "0" and cpu["USE_DISTRIBUTED"] == "0"


def test_accepted_one_fix_rows_the_sheet_says_no_to_are_named_before_any_download(tmp_path):
    """A row whose onefix verdict (read from the real diff) is no will be refused: preflight says
    so in one line, and their commits need no clone; a row with a shipped diff needs none either."""
    sheet = tmp_path / "sheet.csv"
    patches = tmp_path / "patches"
    patches.mkdir()
    (patches / "pr2.diff").write_text("diff --git a/torch/x.py b/torch/x.py\n")
    sheet.write_text("id,release,decision,reason,buggy_sha,corrected_sha,onefix\n"
                     f"pr1,v1.4.0,accept,,{'a' * 40},{'b' * 40},no: compiled or build files (aten/x.cpp)\n"
                     f"pr2,v1.4.0,accept,,{'c' * 40},{'d' * 40},yes\n")
    config = config_with(**{"sheet": str(sheet), "bugs.controls": {}, "runtime.kind": "venv",
                            "runtime.python": sys.executable, "artifacts.source": "onefix",
                            "artifacts.onefix.release": {"source": "pypi", "version": "sheet"},
                            "artifacts.onefix.patches": str(patches)})
    plan = Plan(config, SHEET_SCHEMA)
    assert plan.bug("pr2").arm("buggy")["patch"] == str(patches / "pr2.diff")
    assert plan.bug("pr2").arm("buggy")["release"] == {"source": "pypi", "version": "1.4.0"}
    checks = rows(preflight.run(config, plan))
    row = checks["one-fix sheet rows"]
    assert row.status == "warn"
    assert row.detail == "pr1: no: compiled or build files (aten/x.cpp): refused, no runs"
    assert "commits (onefix)" not in checks  # nothing left whose diff needs a clone


def test_the_compiler_a_kernel_fix_needs_is_found_or_its_absence_named_before_any_build(tmp_path, monkeypatch):
    patch = ROOT / "data" / "patches" / "pytorch" / "pr38674.diff"
    config = config_with(**{"sheet": str(tmp_path / "none.csv"), "bugs.controls": {}, "runtime.kind": "venv",
                            "runtime.python": sys.executable,
                            "bugs.fixes": {"pr38674": {"release": {"source": "pypi", "version": "1.5.1"},
                                                       "patch": str(patch)}}})
    plan = Plan(config, SHEET_SCHEMA)
    found = rows(preflight.run(config, plan))["compiler"]
    assert found.status == "pass" and found.detail.endswith("builds the kernels of pr38674")
    monkeypatch.setenv("PATH", str(tmp_path))  # no g++, no c++
    monkeypatch.delenv("CXX", raising=False)
    missing = rows(preflight.run(config, plan))["compiler"]
    assert missing.status == "FAIL" and missing.detail.startswith("no C++ compiler on this host")
    assert "compiler" not in rows(preflight.run(config_with(sheet=str(tmp_path / "none.csv")),
                                                 Plan(config_with(sheet=str(tmp_path / "none.csv")), SHEET_SCHEMA)))


def test_preflight_asks_the_challenge_about_its_raw_file(tmp_path, monkeypatch):
    """A challenge the package does not know is checked as it says, never taken for MNIST."""
    from bugimpact.challenges import CHALLENGES, Challenge
    raw = tmp_path / "labels.txt"

    def check(path):
        return [] if path.read_text().strip() == "ok" else [(f"{path}: not ok", "write ok")]
    monkeypatch.setitem(CHALLENGES, "own", Challenge(lambda r: None, False, (1, 8, 8), 16, (40, 10),
                                                     raw=str(raw), check=check))
    config = config_with(**{"sheet": str(tmp_path / "none.csv"), "train.challenge": "own"})
    missing = preflight._data(config, config["train"]["challenge"])[0]
    assert missing.status == "FAIL" and missing.detail == f"own: missing {raw}", missing
    assert missing.fix == "put it there (data.own in the config)"
    raw.write_text("bad")
    assert preflight._data(config, config["train"]["challenge"])[0].detail == f"own: {raw}: not ok"
    raw.write_text("ok")
    assert preflight._data(config, config["train"]["challenge"])[0].status == "pass"


def test_a_run_ended_as_done_with_targets_not_made_is_named_and_run_again(tmp_path):
    """Snakemake ended a run of this workflow "15 of 15 steps (100%) done" with exit 0, 32 jobs
    short, the preflight among them (it drops jobs updating its DAG after a checkpoint): the run's
    end names the targets not made and exits LOST_JOBS, and a run is made again on that code."""
    from types import SimpleNamespace

    from bugimpact.workflow import LOST_JOBS, run_to_the_end
    made, lost = tmp_path / "made.txt", tmp_path / "lost.txt"
    made.write_text("x")
    default = [str(made), str(lost)]

    def asked(targets=(), **narrowed):
        settings = dict(targets=set(targets), until=set(), omit_from=set(), batch=None,
                        allowed_rules=set(), target_jobs=set())
        return SimpleNamespace(**{**settings, **narrowed})
    rules = {"all", "report"}
    assert steps.unmade_targets(asked(), False, rules, default) == [str(lost)]  # the default rule
    assert steps.unmade_targets(asked(["all"]), False, rules, default) == [str(lost)]
    assert steps.unmade_targets(asked([str(made)]), False, rules, default) == []  # only what was asked
    assert steps.unmade_targets(asked([str(lost), "report"]), False, rules, default) == [str(lost)]
    for narrowed in ({"until": {"train"}}, {"omit_from": {"train"}}, {"batch": object()},
                     {"allowed_rules": {"mine"}}, {"target_jobs": {"train:run=1"}}):
        assert steps.unmade_targets(asked(**narrowed), False, rules, default) == []
    assert steps.unmade_targets(asked(), True, rules, default) == []  # --touch
    # a command ending LOST_JOBS is run again, at most three times in all; any other code ends it
    counter = tmp_path / "runs"
    script = (f"import pathlib, sys; p = pathlib.Path({str(counter)!r}); "
              "n = int(p.read_text()) + 1 if p.exists() else 1; p.write_text(str(n)); "
              f"sys.exit({LOST_JOBS} if n < int(sys.argv[1]) else 0)")
    assert run_to_the_end([sys.executable, "-c", script, "2"]).returncode == 0
    assert counter.read_text() == "2"
    counter.unlink()
    assert run_to_the_end([sys.executable, "-c", script, "9"]).returncode == LOST_JOBS
    assert counter.read_text() == "3"
