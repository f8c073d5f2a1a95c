"""The release-wheel study as a user runs it: real torch 1.5.1 for Python 3.7 in venvs, a real fix
isolated on it, a rerun that redoes nothing, and another interpreter that makes new runs."""
import json
import subprocess

import pytest
import yaml
from conftest import ROOT
from test_workflow import job_counts
from workflow import project_copy, runtime_threads, snakemake

from bugimpact.artifacts.interpreters import find
from bugimpact.io import read_csv

pytestmark = pytest.mark.slow
WHEEL_CACHE = str(ROOT / "data" / "cache" / "wheels")  # one download, shared with the other tests


def test_releases_study_dry_run(tmp_path):
    work = project_copy(tmp_path / "p")
    counts = job_counts(snakemake(work, "-n", "--configfile", "configs/releases.yaml").stdout)
    # four releases and the two arms of one fix; each of the 6 bugs has an arms gate
    assert counts["artifact"] == 6 and counts["runtime"] == 6 and counts["arms"] == 6


def small_study(work, own_model=False):
    config = yaml.safe_load((ROOT / "configs" / "releases.yaml").read_text())
    config["bugs"]["controls"] = {
        "aa-1.5.1": {"label": "A/A on torch 1.5.1", "buggy": {"source": "pypi", "version": "1.5.1"},
                     "corrected": {"source": "pypi", "version": "1.5.1"}},
        "no-such-release": {"buggy": {"source": "pypi", "version": "1.5.9"},  # cannot be made
                            "corrected": {"source": "pypi", "version": "1.5.1"}}}
    config["artifacts"]["wheel_cache"] = WHEEL_CACHE
    config["train"].update(runs=3, epochs=2)
    if own_model:  # docs/usage.md's example of your own model: circular padding, (1, 2)
        config["train"]["model"] = "periodic.models:PeriodicCNN"
        config["runtime"]["requirements"] = [str(work / "examples" / "periodic-model")]
    path = work / "small.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def records(work):
    return sorted(p.relative_to(work / "results" / "runs").as_posix()
                  for p in (work / "results" / "runs").rglob("*.json"))


def test_reruns_reuse_everything_and_another_interpreter_makes_new_runs(tmp_path):
    work = project_copy(tmp_path / "p")
    config = small_study(work)
    first_run = snakemake(work, "--configfile", str(config))
    verdicts = {r["bug"]: r for r in read_csv(work / "results" / "releases" / "stats" / "verdicts.csv")[1]}
    assert verdicts["aa-1.5.1"]["verdict"] == "not triggered"
    # zero padding never reaches the circular-padding code the fix changed: the reach step says
    # so before any run (the one changed line that runs, in __init__, sets a value only the
    # circular path reads), and the runs agree
    assert verdicts["pr37881"]["verdict"] == "not triggered"
    assert verdicts["pr37881"]["reach"] == "not reached"
    assert "traced on torch 1.5.1 (cpu)" in verdicts["pr37881"]["reach_detail"]
    assert verdicts["aa-1.5.1"]["reach"] == "not reached"  # both arms are one build
    # a one-fix scope says which arm is the release and which the release with the diff reversed
    assert "buggy: torch 1.5.1 with the fix's diff reversed (diff sha256 " in verdicts["pr37881"]["scope"]
    assert "corrected: torch 1.5.1 as released" in verdicts["pr37881"]["scope"]
    # an artifact that cannot be made is a result: the rest of the study is written
    missing = verdicts["no-such-release"]
    assert missing["verdict"] == "incomplete" and "no torch==1.5.9 wheel for cpython 3.7" in missing["reason"]
    assert missing["reason"].startswith("no runs: buggy: artifact failed (download)")
    assert not (work / "results" / "runs" / "no-such-release").exists()  # no run was scheduled
    assert (work / "results" / "releases" / "report.html").exists()
    builds = {(r["bug"], r["arm"]): r for r in read_csv(work / "results" / "releases" / "builds" / "summary.csv")[1]}
    assert builds[("no-such-release", "buggy")]["failure_class"] == "download"
    assert "bugimpact: these failed" in first_run.stderr and "no-such-release" in first_run.stderr
    manifest = json.loads((next((work / "results" / "artifacts").glob("onefix-buggy-*"))
                           / "manifest.json").read_text())
    assert manifest["apply"] == "reverse" and manifest["fix_in_release"]
    first = records(work)
    assert len(first) == 2 * 2 * 2  # both bugs not triggered after 2 pairs: run 3 never made
    runtimes = sorted(p.name for p in (work / "results" / "runtimes").iterdir())
    assert len(runtimes) == 1 and runtimes[0].startswith("venv-py3.7.")

    again = snakemake(work, "--configfile", str(config))
    assert "Nothing to be done" in again.stdout + again.stderr

    other = tmp_path / "py37b"  # the same Python version, another interpreter (path)
    subprocess.run([find("3.7")["executable"], "-m", "venv", "--without-pip", str(other)], check=True)
    snakemake(work, "--configfile", str(config), "--config",
              f"runtime={{kind: venv, python: {other / 'bin' / 'python'}}}")
    assert len(list((work / "results" / "runtimes").iterdir())) == 2
    now = records(work)
    assert set(first) < set(now) and len(now) == 2 * len(first)  # new runs beside the old ones


def test_the_fix_changes_training_of_a_model_that_uses_what_it_fixed(tmp_path):
    """With circular padding of (1, 2), the buggy arm (1.5.1 with #37881 reversed) pads the wrong
    dimensions: the runs diverge from the first parameters on, and accuracy differs."""
    work = project_copy(tmp_path / "p")
    snakemake(work, "--configfile", str(small_study(work, own_model=True)))
    verdicts = {r["bug"]: r for r in read_csv(work / "results" / "releases" / "stats" / "verdicts.csv")[1]}
    assert verdicts["aa-1.5.1"]["verdict"] == "not triggered"
    assert verdicts["pr37881"]["verdict"] not in ("not triggered", "incomplete")
    assert verdicts["pr37881"]["first_divergence_epoch"] == "0"  # other shapes from the start
    # the trace of this model runs the circular path the fix changed
    assert verdicts["pr37881"]["reach"] == "reached"
    assert "torch/nn/modules/conv.py" in verdicts["pr37881"]["reach_detail"]
    # a Python fix's arm is a venv: its runtime job takes one core and leaves the other to a run
    threads = runtime_threads(work)
    assert any(a.startswith("onefix-") for a in threads) and set(threads.values()) == {1}, threads
