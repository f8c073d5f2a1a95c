"""Artifact sources that need no build, the plan's checks, and GPU claiming by lock file."""
import contextlib
import hashlib
import re
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, config_with

from bugimpact import steps
from bugimpact.artifacts.runtimes import GpuLock, NoGpu, gpu_pool, gpu_slots, harness_env, prepare_local
from bugimpact.artifacts.source_kinds import artifact_id
from bugimpact.config import SHEET_SCHEMA
from bugimpact.io import InputError
from bugimpact.plan import Plan


def test_user_wheel_is_checked_against_its_sha256(tmp_path):
    wheel = tmp_path / "demo-0.1-py3-none-any.whl"
    wheel.write_bytes(b"not really a wheel, but bytes to hash")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    config = config_with(**{"artifacts.wheel_cache": str(tmp_path / "cache")})
    manifest = steps.artifact(steps.artifact_sources(config), {"source": "wheel", "wheel": str(wheel), "sha256": digest},
                              tmp_path / "m.json")
    assert manifest["wheel_sha256"] == digest
    # a mismatch is a recorded failure of that artifact only: the rest of the study goes on
    bad = steps.artifact(steps.artifact_sources(config), {"source": "wheel", "wheel": str(wheel), "sha256": "0" * 64},
                         tmp_path / "n.json")
    assert bad["status"] == "failed" and bad["failure_class"] == "checksum"
    assert "does not match the configured" in bad["error"] and str(wheel) in bad["error"]


def test_a_corrupted_cached_wheel_is_fetched_again(tmp_path):
    import zipfile
    wheel = tmp_path / "demo-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("demo/__init__.py", "x = 1\n")
    config = config_with(**{"artifacts.wheel_cache": str(tmp_path / "cache")})
    spec = {"source": "wheel", "wheel": str(wheel)}
    first = steps.artifact(steps.artifact_sources(config), spec, tmp_path / "a.json")
    cached = Path(first["wheel"])
    cached.write_bytes(b"cut short")  # a disk error or a killed copy
    again = steps.artifact(steps.artifact_sources(config), spec, tmp_path / "b.json")
    assert again["status"] == "ok" and zipfile.is_zipfile(cached)
    assert cached.read_bytes() == wheel.read_bytes()


def test_user_wheel_by_url(httpserver, tmp_path):
    payload = b"wheel bytes served over HTTP"
    httpserver.expect_request("/nightly/demo-0.2-py3-none-any.whl").respond_with_data(payload)
    config = config_with(**{"artifacts.wheel_cache": str(tmp_path / "cache")})
    url = httpserver.url_for("/nightly/demo-0.2-py3-none-any.whl")
    manifest = steps.artifact(steps.artifact_sources(config), {"source": "wheel", "wheel": url,
                                       "sha256": hashlib.sha256(payload).hexdigest()}, tmp_path / "m.json")
    assert manifest["wheel"].endswith("demo-0.2-py3-none-any.whl")
    assert open(manifest["wheel"], "rb").read() == payload


def test_installed_artifact_reports_what_imports(tmp_path):
    manifest = steps.artifact(steps.artifact_sources(config_with()), {"source": "installed"}, tmp_path / "i.json")
    import torch
    assert manifest["version"] == torch.__version__ and manifest["python"] == sys.executable
    runtime = prepare_local(manifest)
    assert runtime["probe"]["version"] == torch.__version__
    with pytest.raises(InputError, match="local runtime can only run the host.s own torch, not a pypi"):
        prepare_local({"source": "pypi", "wheel": "x.whl"})


def test_artifact_ids_are_keyed_by_what_they_are():
    assert artifact_id({"source": "installed"}) == "installed"
    assert artifact_id({"source": "pypi", "version": "1.5.0"}) == "pypi-1.5.0"
    assert artifact_id({"source": "docker", "commit": "a" * 40}, "r1") == "docker-aaaaaaaaaaaa-r1"
    assert artifact_id({"source": "wheel", "wheel": "x", "sha256": "b" * 64}) == "wheel-" + "b" * 16


def test_a_sheet_path_that_is_not_there_is_said_with_the_sheets_beside_it(tmp_path):
    """Seen in review: a mistyped sheet path gave a controls-only study without a word."""
    (tmp_path / "pytorch.csv").write_text("id,decision,reason,buggy_sha,corrected_sha\n")
    plan = Plan(config_with(sheet=str(tmp_path / "pytorh.csv")), SHEET_SCHEMA)
    assert sorted(plan.bugs) == ["aa", "fault-labelnoise", "fault-momentum"]
    assert plan.sheet_missing == (
        f"the sheet {tmp_path / 'pytorh.csv'} does not exist: this run makes it from the mined bugs, with no "
        f"decisions, so the study has its controls only until rows there are accepted; beside it: "
        f"{tmp_path / 'pytorch.csv'}")
    assert Plan(config_with(sheet=str(tmp_path / "pytorch.csv")), SHEET_SCHEMA).sheet_missing is None


def test_a_bugs_runs_are_keyed_by_what_its_arms_train_on_and_runs_of_the_layout_before_are_read_in_place(
        tmp_path, monkeypatch):
    """Seen: the run path named neither the artifact nor the release, so a changed diff or release
    trained its runs over the finished ones of the arm before."""
    import json

    from bugimpact.experiment import experiment_file
    monkeypatch.chdir(tmp_path)
    config = config_with(sheet=str(tmp_path / "none.csv"))
    plan = Plan(config, SHEET_SCHEMA)
    bug = plan.bug("fault-momentum")
    assert bug.key != plan.bug("fault-labelnoise").key  # the same runtime, other arms
    arms = plan.experiments[bug.key]["arms"]
    assert arms == {"buggy": {"artifact": bug.arm("buggy")["artifact"], "fault": "momentum_ignored"},
                    "corrected": {"artifact": bug.arm("corrected")["artifact"], "fault": ""}}
    other = dict(config, bugs=dict(config["bugs"], controls=dict(config["bugs"]["controls"], **{
        "fault-momentum": dict(config["bugs"]["controls"]["fault-momentum"],
                               buggy={"source": "installed", "fault": "label_noise"})})))
    assert Plan(other, SHEET_SCHEMA).bug("fault-momentum").key != bug.key  # another arm: other runs
    # a study of the layout before: its runs under the key without the arms, read where they are
    # while every record there was trained on these arms
    before = experiment_file(config["train"], plan.experiments[bug.key]["runtime"])["key"]
    record = Path("results/runs/fault-momentum") / before / "buggy" / "0.json"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"status": "ok", "spec": {"artifact": arms["buggy"]["artifact"],
                                                           "fault": "momentum_ignored"}}))
    assert Plan(config, SHEET_SCHEMA).bug("fault-momentum").key == before
    assert Plan(other, SHEET_SCHEMA).bug("fault-momentum").key not in (before, bug.key)
    broken = record.with_name("1.json")
    broken.write_text("[1")  # cut short: made again under whichever key
    assert Plan(config, SHEET_SCHEMA).bug("fault-momentum").key == before
    record.write_text(json.dumps({"status": "ok", "spec": {"artifact": "onefix-buggy-x", "fault": ""}}))
    assert Plan(config, SHEET_SCHEMA).bug("fault-momentum").key == bug.key  # trained on another arm
    record.write_text(json.dumps({"status": "ok", "spec": {"artifact": arms["buggy"]["artifact"],
                                                           "fault": "momentum_ignored"}}))
    Path("results/runs/fault-momentum", bug.key).mkdir()  # the new layout's folder, once made, is used
    assert Plan(config, SHEET_SCHEMA).bug("fault-momentum").key == bug.key


def test_plan_checks_arms_and_runtimes(tmp_path):
    sheet = tmp_path / "sheet.csv"
    sheet.write_text("id,decision,reason,buggy_sha,corrected_sha\n"
                     f"pr1,accept,,{'a' * 40},{'b' * 40}\npr2,reject,crash,,\n")
    config = config_with(sheet=str(sheet))
    local = Plan(config, SHEET_SCHEMA)  # docker builds cannot run in the local runtime: said, skipped
    assert "pr1" not in local.bugs and "runtime.kind local runs only the installed torch, not a " \
        "docker arm" in local.cannot_run["pr1"]
    plan = Plan(config_with(sheet=str(sheet), **{"runtime.kind": "docker"}), SHEET_SCHEMA)
    assert sorted(plan.bugs) == ["aa", "fault-labelnoise", "fault-momentum", "pr1"]
    assert plan.bug("pr1").arm("buggy")["artifact"].startswith("docker-aaaaaaaaaaaa-")
    assert plan.bug("fault-momentum").arm("buggy")["fault"] == "momentum_ignored"
    bad = config_with(sheet=str(sheet), **{"runtime.kind": "docker",
                                           "bugs.overrides": {"pr1": {"buggy": {"source": "pypi"}}}})
    with pytest.raises(InputError, match="bug pr1, arm buggy: source pypi needs 'version'"):
        Plan(bad, SHEET_SCHEMA)


def test_a_one_fix_arm_without_its_patch_is_refused_at_start():
    fix = {"release": {"source": "pypi", "version": "1.5.1"}, "patch": "no/such.diff"}
    with pytest.raises(InputError, match=re.escape("no/such.diff, field 'patch': bug f1: the fix's patch file does not exist")):
        Plan(config_with(**{"bugs.fixes": {"f1": fix}}), SHEET_SCHEMA)


def test_an_accepted_row_without_commits_or_diff_is_said_unresolved(tmp_path):
    sheet = tmp_path / "sheet.csv"
    sheet.write_text("id,decision,reason,buggy_sha,corrected_sha\npr1,accept,,,\n")
    for source, runtime in (("docker", "docker"), ("onefix", "venv")):
        plan = Plan(config_with(sheet=str(sheet), **{"artifacts.source": source, "runtime.kind": runtime,
                                                     "artifacts.onefix.release": {"source": "pypi", "version": "1.5.1"}}),
                    SHEET_SCHEMA)
        assert "pr1" not in plan.bugs and plan.cannot_run["pr1"].startswith("unresolved"), source


def test_each_local_job_claims_a_free_gpu(tmp_path):
    pool = ("lock", ["0", "1"])
    with GpuLock(pool, folder=str(tmp_path)) as first, GpuLock(pool, folder=str(tmp_path)) as second:
        assert {first.device, second.device} == {"0", "1"}
        assert harness_env(1, first.device)["CUDA_VISIBLE_DEVICES"] == first.device
        assert "claimed by a local lock" in first.how
    with GpuLock(pool, folder=str(tmp_path)) as again:  # released: device 0 is free again
        assert again.device == "0"
    with GpuLock(None, folder=str(tmp_path)) as cpu:
        assert cpu.device is None and cpu.how == "no GPU"


def test_runs_share_a_gpu_in_slots_spread_over_every_gpu_first(tmp_path):
    """runs_per_gpu slots on each GPU: the first runs go one to each GPU, then they share; a run
    that finds every slot taken waits at most wait_s, then says who holds them."""
    pool = ("lock", ["0", "1"])
    with contextlib.ExitStack() as stack:
        held = [stack.enter_context(GpuLock(pool, 2, folder=str(tmp_path), holder=f"run {i}"))
                for i in range(4)]
        assert [lock.device for lock in held] == ["0", "1", "0", "1"]
        assert "slot 2 of 2" in held[2].how
        started = time.time()
        with pytest.raises(NoGpu, match=r"no GPU slot came free in 0.5 s; held by: GPU 0 slot 1: "
                                        r"pid \d+ run 0; GPU 1 slot 1: pid \d+ run 1"):
            GpuLock(pool, 2, wait_s=0.5, folder=str(tmp_path)).__enter__()
        assert 0.5 <= time.time() - started < 3
    with GpuLock(pool, 2, wait_s=0.5, folder=str(tmp_path)) as free:  # all given back
        assert free.device == "0"


def test_the_workflow_admits_a_cuda_job_per_gpu_slot(tmp_path):
    train = {"gpus": 0, "runs_per_gpu": 3}
    assert gpu_slots(train, {"CUDA_VISIBLE_DEVICES": "0,1"}) == 6
    assert gpu_slots(dict(train, gpus=4), {}) == 12
    # no GPU here: one GPU's worth, never an error at parse time (the run is refused at start)
    assert gpu_slots(train, {}, (str(tmp_path / "absent"), "-L")) == 3


def test_an_executor_assigned_gpu_is_used_as_given(tmp_path):
    """Under SLURM the job's CUDA_VISIBLE_DEVICES is the scheduler's choice: never GPU 0 by lock."""
    assert gpu_pool({"SLURM_JOB_ID": "7", "CUDA_VISIBLE_DEVICES": "3"}, 8) == ("assigned", ["3"])
    with GpuLock(("assigned", ["3"]), folder=str(tmp_path)) as lock:
        assert lock.device == "3" and "assigned by SLURM" in lock.how
        assert not list(tmp_path.iterdir())  # no lock file taken
    with pytest.raises(NoGpu, match="SLURM gave this job no GPU"):
        gpu_pool({"SLURM_JOB_ID": "7"}, 8)


def test_the_local_gpu_pool(tmp_path):
    # the GPUs the user left visible to the whole run, then train.gpus, then what nvidia-smi lists
    assert gpu_pool({"CUDA_VISIBLE_DEVICES": "2,5"}, 8) == ("lock", ["2", "5"])
    assert gpu_pool({}, 2) == ("lock", ["0", "1"])
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 (UUID: GPU-a)'\n"
                   "echo 'GPU 1: NVIDIA H100 (UUID: GPU-b)'\n")
    smi.chmod(0o755)
    assert gpu_pool({}, 0, (str(smi), "-L")) == ("lock", ["0", "1"])
    # device cuda with no GPU anywhere is an error, not a silent run without a lock
    with pytest.raises(NoGpu, match="no GPU was found"):
        gpu_pool({}, 0, (str(tmp_path / "absent"), "-L"))


def test_unknown_models_and_faults_stop_the_plan_before_any_run(tmp_path):
    sheet = str(tmp_path / "none.csv")
    with pytest.raises(InputError, match=r"key 'train\.model': unknown model 'resnet50'"):
        config_with(sheet=sheet, **{"train.model": "resnet50"})
    Plan(config_with(sheet=sheet, **{"train.model": "periodic.models:PeriodicCNN"}), SHEET_SCHEMA)
    bad = {"x": {"buggy": {"source": "installed", "fault": "lr_scale"},
                 "corrected": {"source": "installed"}}}
    with pytest.raises(InputError, match=r"key 'bugs\.controls\.x\.buggy\.fault': 'lr_scale' is not one of"):
        config_with(sheet=sheet, **{"bugs.controls": bad})  # the schema's list is the harness's


def test_the_schema_takes_its_lists_from_the_registries_and_the_harness_agrees():
    import numpy as np
    import torch  # noqa: F401 - the harness modules need it

    from bugimpact.config import CONFIG_SCHEMA, load_schema
    from bugimpact.harness import faults, metrics, models, registry
    from bugimpact.stats.exact import exact_metrics
    schema = load_schema()
    assert tuple(schema["$defs"]["arm"]["properties"]["fault"]["enum"]) == registry.FAULTS
    assert schema["properties"]["stats"]["properties"]["metrics"]["default"] == list(registry.METRICS)
    # the file itself holds none of those lists: each lives in its registry alone
    text = CONFIG_SCHEMA.read_text()
    for names in (registry.FAULTS, registry.METRICS, ("onefix", "installed"), ("venv", "local")):
        assert not re.search(r"enum: \[[^]]*\b%s\b" % names[0], text), names
    assert faults.FAULTS == registry.FAULTS and tuple(models.BUILTIN) == registry.MODELS
    # every metric the config can name is recorded by the harness and computed exactly here
    counts = metrics.confusion_counts(np.array([0, 1, 1, 2]), np.array([0, 1, 2, 2]))
    assert tuple(metrics.recorded_metrics(counts)) == registry.METRICS
    assert tuple(exact_metrics({"matrix": [[1, 0, 0], [0, 1, 1], [0, 0, 1]]})) == registry.METRICS
    assert schema["properties"]["stats"]["properties"]["metrics"]["items"]["enum"] == list(registry.METRICS)
    source = (ROOT / "src" / "bugimpact" / "harness" / "faults.py").read_text()
    for name in registry.FAULTS:  # each named fault is handled by the harness
        assert f'name == "{name}"' in source, name
