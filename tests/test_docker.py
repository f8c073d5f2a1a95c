"""Step 4 with a real Docker engine: wheels built from a tiny real repository at a buggy and a
corrected commit, a commit that does not compile, runtimes (venv and docker) that train on them,
and the whole workflow over docker artifacts."""
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, docker_available, git
from tinypkg import make_repo
from workflow import project_copy, snakemake

from bugimpact.artifacts.docker import build_wheel, prepare_runtime, recipe
from bugimpact.artifacts.launch import launch
from bugimpact.artifacts.runtimes import prepare_venv
from bugimpact.challenges import prepare
from bugimpact.io import read_csv

pytestmark = [pytest.mark.docker,
              pytest.mark.skipif(not docker_available(), reason="no Docker engine (bin/start-docker)")]
CA = "/etc/ssl/certs/ca-certificates.crt"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    subprocess.run([str(ROOT / "bin" / "make-base-image")], check=True, capture_output=True)
    base = tmp_path_factory.mktemp("docker")
    shas = make_repo(base / "tinyact")
    wheels = base / "torch"
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(wheels),
                    "torch==2.13.0"], check=True)
    torch_wheel = str(next(wheels.glob("torch-*.whl")))
    docker_cfg = {"toolchain": "cpu", "clone": str(base / "tinyact"), "base_image": "",
                  "build_command": "python setup.py bdist_wheel", "build_env": {"MAX_JOBS": "2"},
                  "ccache_volume": f"bugimpact-test-{uuid.uuid4().hex[:8]}",
                  "ca_bundle": CA if Path(CA).exists() else "", "timeout_s": 3600}
    before = set(images())
    from bugimpact import steps
    toolchain_json = base / "toolchain.json"  # what the toolchain rule makes, once
    toolchain = steps.toolchain(docker_cfg, toolchain_json, base / "toolchain.log")
    yield {"base": base, "shas": shas, "torch": torch_wheel, "docker": docker_cfg,
           "toolchain": toolchain, "toolchain_json": toolchain_json}
    subprocess.run(["docker", "volume", "rm", "-f", docker_cfg["ccache_volume"]], capture_output=True)
    made = [i for i in images() if i not in before]  # runtime images of wheels built here: GBs each
    if made:
        subprocess.run(["docker", "rmi", "-f", *made], capture_output=True)


def images():
    out = subprocess.run(["docker", "images", "--format", "{{.Repository}}:{{.Tag}}",
                          "bugimpact-runtime"], capture_output=True, text=True)
    return out.stdout.split()


@pytest.fixture(scope="module")
def builds(setup):
    out = {}
    for arm in ("buggy", "corrected", "broken"):
        out[arm] = build_wheel(setup["shas"][arm], setup["docker"], setup["toolchain"], setup["base"] / "wheels" / arm,
                               setup["base"] / f"{arm}.log")
    return out


def test_both_arms_build_with_one_toolchain(builds, setup):
    buggy, corrected = builds["buggy"], builds["corrected"]
    assert buggy["status"] == corrected["status"] == "ok"
    assert buggy["toolchain_image_id"] == corrected["toolchain_image_id"]
    assert buggy["build_command"] == corrected["build_command"]
    assert buggy["recipe_sha"] == recipe(setup["docker"])[1]
    assert Path(buggy["wheel"]).name.startswith("tinyact-0.1.0-")
    assert buggy["wheel_sha256"] != corrected["wheel_sha256"]
    # the user's clone is untouched: no checkout happened in it
    assert git(setup["base"] / "tinyact", "rev-parse", "HEAD") == setup["shas"]["broken"]


def test_second_arm_hits_the_compiler_cache(builds, setup):
    stats = subprocess.run(["docker", "run", "--rm", "-v", f"{setup['docker']['ccache_volume']}:/ccache",
                            "-e", "CCACHE_DIR=/ccache", builds["buggy"]["toolchain_image"],
                            "ccache", "--print-stats"], capture_output=True, text=True, check=True)
    counters = dict(line.split("\t")[:2] for line in stats.stdout.splitlines() if "\t" in line)
    # 24 fillers + kernels.c per arm: the second arm recompiles only kernels.c
    assert int(counters["direct_cache_hit"]) + int(counters.get("preprocessed_cache_hit", 0)) >= 24


def test_a_commit_that_does_not_compile_is_recorded(builds):
    broken = builds["broken"]
    assert broken["status"] == "failed" and broken["failure_class"] == "compile"
    assert "kernels.c" in broken["log_tail"] and "error" in broken["log_tail"]


def test_a_missing_commit_is_a_checkout_failure(setup, tmp_path):
    manifest = build_wheel("0" * 40, setup["docker"], setup["toolchain"], tmp_path, tmp_path / "log")
    assert manifest["status"] == "failed" and manifest["failure_class"] == "checkout"


def spec(npz, meta, arm, seed=3):
    return {"bug": "tiny", "arm": arm, "run": 0, "seed": seed, "model": "tinyact.models:Net",
            "data": str(npz), "data_sha256": meta["sha256"], "epochs": 2, "batch_size": 32,
            "lr": 0.02, "momentum": 0.5, "threads": 1, "test_fraction": 0.25}


@pytest.fixture(scope="module")
def digits(setup):
    folder = setup["base"] / "data"
    meta = prepare("digits", folder / "digits.npz", folder / "digits.json")
    return folder / "digits.npz", meta


def test_runtimes_train_on_the_built_wheels(builds, setup, digits, tmp_path):
    npz, meta = digits
    records = {}
    for arm in ("buggy", "corrected"):
        venv = prepare_venv(builds[arm], tmp_path / f"venv-{arm}", sys.executable, [setup["torch"]])
        dock = prepare_runtime(builds[arm], setup["toolchain"], [setup["torch"]], tmp_path / f"docker-{arm}")
        assert venv["probe"]["version"] == dock["probe"]["version"] == "2.13.0+cpu"
        for kind, runtime in (("venv", venv), ("docker", dock)):
            out = tmp_path / kind / f"{arm}.json"
            out.parent.mkdir(exist_ok=True)
            with open(tmp_path / f"{kind}-{arm}.log", "w") as log:
                assert launch(runtime, spec(npz, meta, arm), out, log) == 0
            records[kind, arm] = json.loads(out.read_text())
    # the bug changes training, identically in both runtimes
    assert records["venv", "buggy"]["fingerprints"]["epochs"] != \
        records["venv", "corrected"]["fingerprints"]["epochs"]
    for arm in ("buggy", "corrected"):
        assert records["venv", arm]["fingerprints"] == records["docker", arm]["fingerprints"]
    env = records["docker", "buggy"]["environment"]
    assert env["python"].startswith("3.11") and env["torch"] == "2.13.0+cpu"


def test_workflow_over_docker_artifacts(setup, tmp_path):
    """Two accepted bugs built in Docker and trained in docker runtimes; one does not compile and
    is reported, while the other finishes."""
    work = project_copy(tmp_path / "p")
    shas = setup["shas"]
    sheet = work / "data" / "filter" / "tiny.csv"
    sheet.write_text("id,decision,reason,buggy_sha,corrected_sha,text,notes\n"
                     f"pr1,accept,,{shas['buggy']},{shas['corrected']},wrong leak slope,\n"
                     f"pr2,accept,,{shas['broken']},{shas['corrected']},does not compile,\n")
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    config.update({"study": "tiny", "framework": "tiny", "sheet": "data/filter/tiny.csv",
                   "bugs": {"from_sheet": True, "controls": {}},
                   "artifacts": {"source": "docker", "docker": setup["docker"]},
                   "runtime": {"kind": "docker", "requirements": [setup["torch"]]},
                   "train": {"model": "tinyact.models:Net", "challenge": "digits", "epochs": 2,
                             "runs": 3, "batch_size": 32, "lr": 0.02, "study_seed": 1,
                             "seed_policy": "paired", "early_decision": {"enabled": True, "runs": 1}}})
    (work / "tiny.yaml").write_text(yaml.safe_dump(config))
    snakemake(work, "--configfile", "tiny.yaml", timeout=3000)
    res = work / "results" / "tiny"
    builds = {(r["bug"], r["arm"]): r for r in read_csv(res / "builds" / "summary.csv")[1]}
    assert builds["pr1", "buggy"]["status"] == builds["pr1", "corrected"]["status"] == "ok"
    assert builds["pr2", "buggy"]["status"] == "failed"
    assert builds["pr2", "buggy"]["failure_class"] == "compile"
    assert json.loads((res / "builds" / "pr2" / "buggy.status").read_text())["status"] == "failed"
    verdicts = {r["bug"]: r for r in read_csv(res / "stats" / "verdicts.csv")[1]}
    assert verdicts["pr1"]["verdict"] in ("impact", "no evidence of impact")
    assert verdicts["pr1"]["identical_pairs"] == "0" and verdicts["pr1"]["first_divergence_epoch"] == "1"
    assert verdicts["pr2"]["verdict"] == "incomplete"
    assert "build failed (compile)" in verdicts["pr2"]["reason"]
    shared = work / "results"  # runs, toolchains and artifacts are not the study's alone
    record = json.loads(next((shared / "runs" / "pr1").glob("*/buggy/0.json")).read_text())
    assert record["environment"]["torch"] == "2.13.0+cpu" and record["status"] == "ok"
    assert "Builds" in (res / "report.html").read_text()
    # One job made the toolchain image; every build and runtime used the image its record names.
    [toolchain] = [json.loads(p.read_text()) for p in (shared / "toolchains").glob("*.json")]
    manifests = [json.loads(p.read_text()) for p in (shared / "artifacts").glob("docker-*/manifest.json")]
    assert {m["toolchain_image_id"] for m in manifests} == {toolchain["image_id"]}
    log = snakemake(work, "--configfile", "tiny.yaml", "--summary").stdout
    assert sum("\ttoolchain\t" in line for line in log.splitlines()) == 1


def test_a_toolchain_image_that_is_gone_says_what_to_do(setup):
    from bugimpact.artifacts.docker import BuildFailed, toolchain_present
    assert toolchain_present(setup["toolchain"])[1] == setup["toolchain"]["image_id"]
    with pytest.raises(BuildFailed, match="delete its record under results/toolchains/"):
        toolchain_present(dict(setup["toolchain"], image_id="sha256:" + "0" * 64))
    with pytest.raises(BuildFailed, match="was built on node-7, and this job runs on"):
        toolchain_present(dict(setup["toolchain"], host="node-7"))


def test_a_release_wheel_is_chosen_for_the_runtime_image_python(setup, tmp_path):
    """With a docker runtime, the wheel must fit the image's interpreter, not the host's."""
    from bugimpact import steps
    from bugimpact.config import validate_config
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    config["runtime"] = {"kind": "docker"}
    config["artifacts"] = {"docker": setup["docker"], "wheel_cache": str(tmp_path / "cache")}
    manifest = steps.artifact(steps.artifact_sources(validate_config(config)),
                              {"source": "pypi", "version": "2.13.0"}, tmp_path / "manifest.json",
                              toolchain_json=setup["toolchain_json"])
    assert manifest["status"] == "ok", manifest
    image_python = manifest["python"]
    assert image_python["executable"].startswith("/opt/py/")  # probed inside the toolchain image
    tag = "cp" + "".join(image_python["version"].split(".")[:2])
    assert f"-{tag}-{tag}-" in Path(manifest["wheel"]).name


def test_a_build_timeout_removes_its_container(setup, tmp_path):
    """Killing the docker client alone would leave the container compiling."""
    cfg = dict(setup["docker"], build_command="sleep 600", timeout_s=3)
    manifest = build_wheel(setup["shas"]["buggy"], cfg, setup["toolchain"], tmp_path / "w", tmp_path / "b.log")
    assert manifest["status"] == "failed" and manifest["failure_class"] == "timeout"
    left = subprocess.run(["docker", "ps", "-a", "--filter", "name=bugimpact-build-", "-q"],
                          capture_output=True, text=True, check=True)
    assert left.stdout.strip() == ""


def test_a_moved_submodule_is_fetched_through_a_rewrite(setup, tmp_path):
    """Old commits pin submodule URLs that moved or vanished: a rewrite in the config fetches them
    from a mirror, in the build's own clone (the user's clone is not changed)."""
    from tinypkg import add_submodule
    repo = setup["base"] / "tinyact"
    sha = add_submodule(repo, tmp_path / "mirrors" / "dep", "https://unreachable.invalid/mirrors/dep",
                        start=setup["shas"]["corrected"])
    broken = build_wheel(sha, setup["docker"], setup["toolchain"], tmp_path / "a", tmp_path / "a.log")
    assert broken["status"] == "failed" and broken["failure_class"] == "submodules"
    cfg = dict(setup["docker"], git_rewrites={"https://unreachable.invalid/mirrors/": f"{tmp_path}/mirrors/"})
    built = build_wheel(sha, cfg, setup["toolchain"], tmp_path / "b", tmp_path / "b.log")
    assert built["status"] == "ok", built.get("log_tail")
    assert built["recipe_sha"] == broken["recipe_sha"]  # where sources come from is not the recipe
    assert "insteadof" not in (repo / ".git" / "config").read_text().lower()


def test_gc_removes_an_image_that_nothing_uses(setup, tmp_path, monkeypatch):
    from conftest import config_with

    from bugimpact import gc
    tag = f"bugimpact-runtime:gc-test-{uuid.uuid4().hex[:8]}"
    subprocess.run(["docker", "tag", setup["toolchain"]["tag"], tag], check=True)
    monkeypatch.chdir(tmp_path)
    items = gc.garbage({"config.yaml": config_with(sheet=str(tmp_path / "none.csv"))}, "results")
    assert tag in [what for kind, what, _ in items if kind == "docker image"]
    assert gc.remove([item for item in items if item[1] == tag]) == []
    assert tag not in images()


BASE = "bugimpact/debian:bookworm"  # bin/make-base-image, made by the setup fixture


def test_the_engine_streams_output_and_a_timeout_leaves_no_container(setup, tmp_path):
    from bugimpact.artifacts.engine import Engine, EngineError
    engine, name = Engine(), f"bugimpact-test-{uuid.uuid4().hex[:8]}"
    with open(tmp_path / "log", "w") as log:
        assert engine.run(BASE, ["bash", "-c", "echo to-out; echo to-err >&2; exit 3"], name=name, log=log) == 3
    assert {"to-out", "to-err"} <= set((tmp_path / "log").read_text().split())
    with open(tmp_path / "log", "w") as log, pytest.raises(TimeoutError, match="still ran after 2s"):
        engine.run(BASE, ["sleep", "600"], name=name, log=log, timeout=2)
    assert engine.client.containers.list(all=True, filters={"name": name}) == []
    with pytest.raises(EngineError, match=r"bash in bugimpact/debian:bookworm exited 2: why"):
        engine.output(BASE, ["bash", "-c", "echo why >&2; exit 2"])


def test_output_after_a_silence_longer_than_the_engines_call_limit_is_logged(setup, tmp_path):
    """An epoch or a compile step can print nothing for longer than a call may take: the SDK's
    streams have no limit, and must keep none."""
    from bugimpact.artifacts.engine import Engine
    with open(tmp_path / "log", "w") as log:
        assert Engine(timeout=2).run(BASE, ["bash", "-c", "echo early; sleep 5; echo late"],
                                     name=f"bugimpact-test-{uuid.uuid4().hex[:8]}", log=log) == 0
    assert (tmp_path / "log").read_text().split() == ["early", "late"]


def test_a_sigterm_removes_the_container_before_the_process_ends(setup, tmp_path):
    """SLURM's scancel and a stopped job send SIGTERM: the container goes with the job."""
    from bugimpact.artifacts.engine import Engine
    name = f"bugimpact-test-{uuid.uuid4().hex[:8]}"
    job = subprocess.Popen([sys.executable, "-c", (
        "import sys; from bugimpact.artifacts.engine import Engine\n"
        f"Engine().run({BASE!r}, ['sleep', '600'], name={name!r}, log=sys.stdout)")],
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    engine = Engine()
    for _ in range(300):
        if engine.client.containers.list(filters={"name": name, "status": "running"}):
            break
        time.sleep(0.1)
    else:
        pytest.fail("the container never ran")
    job.send_signal(signal.SIGTERM)
    assert job.wait(timeout=60) == 128 + signal.SIGTERM
    assert engine.client.containers.list(all=True, filters={"name": name}) == []


def test_a_container_left_by_a_killed_job_is_replaced_by_its_next_attempt(setup, tmp_path):
    """A job killed outright (SIGKILL, a lost node) cannot remove its container; its name is the
    run's, so the next attempt would be refused: it removes the old one first."""
    from bugimpact.artifacts.engine import Engine
    engine, name = Engine(), f"bugimpact-test-{uuid.uuid4().hex[:8]}"
    engine.client.containers.run(BASE, ["sleep", "600"], name=name, detach=True)
    with open(tmp_path / "log", "w") as log:
        assert engine.run(BASE, ["true"], name=name, log=log) == 0
    assert engine.client.containers.list(all=True, filters={"name": name}) == []
