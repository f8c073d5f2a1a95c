"""Fault matrix, recovery: what a user deleted or broke is recovered with the commands the README
names, and nothing whole is remade.

O07: in a finished one-fix study on torch 1.5.1 (Python 3.7 venvs), the wheel cache, one arm's
runtime folder and its runs are deleted. Before, the next `snakemake` recorded that runtime as
failed ("Distribution not found at: .../torch-1.5.1-...whl") while the one-fix manifest still said
ok and named the deleted wheel; `retry-failed` removed neither, `run --bug` said "Nothing to be
done" and `status` gave no next step."""
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from workflow import project_copy, snakemake

SHARED_CACHE = ROOT / "data" / "cache" / "wheels"  # one download of 1.5.1, shared with other tests


def bugimpact(work, *args, env=None):
    return subprocess.run([sys.executable, "-m", "bugimpact", *args], cwd=work, capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=str(work / "src"), **(env or {})))


def files(work, *folders):
    """Every file under the results' ``folders`` with its bytes (venvs left out)."""
    res = work / "results"
    return {str(p.relative_to(res)): p.read_bytes() for folder in folders
            for p in sorted((res / folder).rglob("*.json")) if "venv" not in p.parts}


@pytest.fixture
def onefix_study(tmp_path):  # (each test that uses it is slow)
    """A finished one-fix study: #37881 on torch 1.5.1 (its buggy arm the release with the diff
    reversed), beside a fault control on the plain release; its own wheel cache, its first
    download taken from the shared cache's copy."""
    work = project_copy(tmp_path / "p")  # its own: manifests and runtimes name absolute paths
    config = yaml.safe_load((ROOT / "configs" / "releases.yaml").read_text())
    config["bugs"] = {"from_sheet": False, "controls": {
        "fault-momentum-1.5.1": {"buggy": {"source": "pypi", "version": "1.5.1", "fault": "momentum_ignored"},
                                 "corrected": {"source": "pypi", "version": "1.5.1"}}},
        "fixes": {"fixgood": config["bugs"]["fixes"]["pr37881"]}}
    config["artifacts"]["wheel_cache"] = "data/cache/wheels"
    config["train"].update(runs=3, epochs=1)
    (work / "study.yaml").write_text(yaml.safe_dump(config))
    for wheel in SHARED_CACHE.glob("pypi/torch-1.5.1/*/torch-1.5.1-*.whl"):  # a link, not 753 MB
        target = work / "data" / "cache" / "wheels" / wheel.relative_to(SHARED_CACHE)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.link(wheel, target)
    snakemake(work, "--configfile", "study.yaml")
    return work


def buggy_runtime(work):
    manifest = next((work / "results" / "artifacts").glob("onefix-buggy-*/manifest.json"))
    return manifest, next((work / "results" / "runtimes").glob(f"*/{manifest.parent.name}"))


@pytest.mark.slow
def test_a_lost_wheel_cache_and_runtime_remake_exactly_that_runtime_and_its_runs(onefix_study):
    work = onefix_study
    manifest, runtime = buggy_runtime(work)
    runs = next((work / "results" / "runs" / "fixgood").iterdir()) / "buggy"
    assert sorted(p.name for p in runs.glob("*.json")) == ["0.json", "1.json"]  # 2 pairs decided it
    before = files(work, "runs", "artifacts", "runtimes", "seeds", "experiments")
    shutil.rmtree(work / "data" / "cache" / "wheels")
    shutil.rmtree(runtime)
    shutil.rmtree(runs)
    lost = {k for k in before if k.startswith(str(runtime.relative_to(work / "results")))
            or k.startswith(str(runs.relative_to(work / "results")))}

    snakemake(work, "--configfile", "study.yaml")
    after = files(work, "runs", "artifacts", "runtimes", "seeds", "experiments")
    assert sorted(after) == sorted(before)  # the same files: that runtime and its two runs again
    changed = {k for k in before if after[k] != before[k]}
    assert changed <= lost and {k for k in lost if "/runs/" in f"/{k}"} <= changed  # only those remade
    record = json.loads((runtime / "runtime.json").read_text())
    assert record.get("status", "ok") == "ok" and record["probe"]["version"] == "1.5.1", record
    # the manifest kept its bytes, and names a wheel that is there again, with its bytes
    made = json.loads(manifest.read_text())
    assert Path(made["wheel"]).is_file()
    with open(made["wheel"], "rb") as handle:
        assert hashlib.file_digest(handle, "sha256").hexdigest() == made["wheel_sha256"]
    verdicts = (work / "results" / "releases" / "stats" / "verdicts.csv").read_text()
    assert "fixgood" in verdicts and "incomplete" not in verdicts


@pytest.mark.slow
def test_a_failed_runtime_is_named_with_its_next_step_and_made_again(onefix_study):
    """A runtime recorded failed (an install that failed twice: here, uv offline with its cache
    deleted) is named by `status` with the command that retries it, removed by `retry-failed`,
    and made by the next run; nothing whole is remade."""
    work = onefix_study
    manifest, runtime = buggy_runtime(work)
    shutil.rmtree(runtime)
    shutil.rmtree(next((work / "results" / "runs" / "fixgood").iterdir()) / "buggy")
    shutil.rmtree(work / "data" / "cache" / "uv")
    snakemake(work, "--configfile", "study.yaml", env={"UV_OFFLINE": "1"})
    failed = json.loads((runtime / "runtime.json").read_text())
    assert failed["status"] == "failed" and "uv pip install" in failed["reason"]
    status = bugimpact(work, "status", "--config", "study.yaml")
    row = next(line for line in status.stdout.splitlines() if line.startswith("fixgood"))
    assert "runtime failed" in row and row.rstrip().endswith("bugimpact run --bug fixgood --config study.yaml"), status.stdout
    rel = (runtime / "runtime.json").relative_to(work)
    assert f"  {rel}: failed (runtime failed: " in status.stdout
    before = files(work, "runs", "artifacts", "runtimes")
    gate = next((work / "results" / "arms" / "fixgood").glob("*.json")).relative_to(work)
    out = bugimpact(work, "retry-failed", "--config", "study.yaml")
    # the runtime, the two runs tried on it before the arms gate was made again, and that gate
    assert f"removed {rel}: failed (runtime failed: " in out.stdout and "4 removed" in out.stdout, out.stdout
    assert f"removed {gate}: failed (no runs: buggy: runtime failed: " in out.stdout
    snakemake(work, "--configfile", "study.yaml")
    after = files(work, "runs", "artifacts", "runtimes")
    assert json.loads((runtime / "runtime.json").read_text()).get("status", "ok") == "ok"
    removed = {line.split(": ")[0].split(" ", 1)[1] for line in out.stdout.splitlines()
               if line.startswith("removed ")}
    kept = {k for k in before if f"results/{k}" not in removed}
    assert len(kept) == len(before) - 3 and all(after[k] == before[k] for k in kept)
    assert bugimpact(work, "retry-failed", "--config", "study.yaml").stdout.strip() == "nothing broken, failed or stale"


@pytest.mark.slow
def test_a_stale_overlay_is_named_and_its_artifact_made_again(onefix_study):
    """An ok one-fix manifest whose overlay file is gone (deleted by hand) is stale: named by
    `status` and `retry-failed`, made again with its runtime and runs."""
    work = onefix_study
    manifest, runtime = buggy_runtime(work)
    made = json.loads(manifest.read_text())
    overlay = Path(made["overlay_dir"])
    shutil.rmtree(overlay)
    rel = manifest.relative_to(work)
    status = bugimpact(work, "status", "--config", "study.yaml")
    assert f"  {rel}: stale (" in status.stdout and "gone)" in status.stdout, status.stdout
    before = files(work, "runs", "runtimes")
    out = bugimpact(work, "retry-failed", "--config", "study.yaml")
    assert f"removed {rel}: stale (" in out.stdout and "1 removed" in out.stdout, out.stdout
    snakemake(work, "--configfile", "study.yaml")  # its runtime and runs are whole: kept
    assert files(work, "runs", "runtimes") == before and not manifest.exists()
    shutil.rmtree(runtime)  # once they are not, the artifact is made again with them
    shutil.rmtree(next((work / "results" / "runs" / "fixgood").iterdir()) / "buggy")
    snakemake(work, "--configfile", "study.yaml")
    assert json.loads(manifest.read_text())["overlay"] == made["overlay"]
    assert (overlay / "torch" / "nn" / "modules" / "conv.py").is_file()
    assert bugimpact(work, "retry-failed", "--config", "study.yaml").stdout.strip() == "nothing broken, failed or stale"


@pytest.mark.slow
def test_gc_leaves_a_wheel_the_project_did_not_fetch(onefix_study):
    work = onefix_study
    theirs = work / "data" / "cache" / "wheels" / "torch-1.5.1+mine-cp37-cp37m-linux_x86_64.whl"
    theirs.write_bytes(b"a person's own build")
    out = bugimpact(work, "gc", "--keep", "study.yaml", "--remove", env={"DOCKER_HOST": "unix:///nonexistent"})
    assert out.returncode == 0, out.stderr
    assert theirs.exists() and str(theirs.name) not in out.stdout


@pytest.mark.slow
def test_config_errors_name_the_file_they_were_read_from(tmp_path):
    """Before: a config given by --configfile (or to validate-config) whose local runtime had a
    pypi arm was refused naming config.yaml."""
    work = project_copy(tmp_path / "p")
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    config["bugs"]["controls"]["rel"] = {"buggy": {"source": "pypi", "version": "1.5.1"},
                                         "corrected": {"source": "pypi", "version": "1.5.1"}}
    (work / "mine.yaml").write_text(yaml.safe_dump(config))
    checked = bugimpact(work, "validate-config", "mine.yaml")
    assert checked.returncode == 2
    assert checked.stderr.startswith("bugimpact: mine.yaml, field 'runtime.kind': runtime.kind local "
                                     "runs only the installed torch, not a pypi arm"), checked.stderr
    run = snakemake(work, "--configfile", "mine.yaml", "-n", check=False)
    assert run.returncode != 0 and "mine.yaml, field 'runtime.kind'" in run.stdout + run.stderr
    assert "config.yaml, field" not in run.stdout + run.stderr


def test_a_release_that_cannot_be_downloaded_is_refused_in_the_projects_words(httpserver, tmp_path):
    """Where the index cannot say which versions exist, the refusal still leads with what failed,
    for which interpreter, in this project's words; pip's own last lines come after."""
    from bugimpact.artifacts import interpreters, sources
    httpserver.expect_request("/simple/torch/").respond_with_data("gone", status=404)
    with pytest.raises(RuntimeError) as refused:
        sources.pypi_wheel("1.5.1", tmp_path, interpreters.host(), httpserver.url_for("/simple"))
    text = str(refused.value)
    assert text.startswith(f"torch==1.5.1 for {interpreters.describe(interpreters.host())} could not "
                           "be downloaded (the index could not be asked which versions exist: 404"), text
    assert "; pip said: " in text and "No matching distribution" in text


def test_a_wheel_for_another_python_is_refused_in_the_projects_words(tmp_path):
    """A user's wheel built for CPython 3.7, in a venv runtime of this Python: before, uv's own
    words; now the wheel, its tags and the interpreter, named."""
    from conftest import make_wheel

    from bugimpact import steps
    wheel = make_wheel(tmp_path, "torch", {"torch/__init__.py": ""}, version="1.5.1")
    other = wheel.with_name("torch-1.5.1-cp37-cp37m-linux_x86_64.whl")
    wheel.rename(other)
    manifest = tmp_path / "a" / "manifest.json"
    manifest.parent.mkdir()
    manifest.write_text(json.dumps({"source": "wheel", "status": "ok", "wheel": str(other),
                                    "wheel_sha256": hashlib.sha256(other.read_bytes()).hexdigest()}))
    result = steps.runtime("venv", manifest, tmp_path / "r" / "runtime.json",
                           {"interpreter": {"executable": sys.executable}, "cache": str(tmp_path / "uv")})
    assert result["status"] == "failed"
    assert result["reason"].startswith(
        "runtime failed: torch-1.5.1-cp37-cp37m-linux_x86_64.whl is not for cpython "
        f"{sys.version.split()[0]} at {sys.executable}"), result["reason"]
    assert "its tags are cp37-cp37m-linux_x86_64; set runtime.python" in result["reason"]
