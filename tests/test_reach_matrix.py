"""Which fixes can touch which models (``bugimpact reach --config``): every fix judged for every
workload of the config on every release, with no build and no training, as a user runs it on the
zoo made small (the small CNN and the LSTM, torch 1.5.1 for Python 3.7, two of the shipped
notes' fixes whose diffs ship with the project); and each not reached of the kernel fix checked
against what the release's C++ ran for that model. Then, through the workflow, a fix the matrix
says the LSTM reaches and the small CNN does not, studied with the LSTM in the same config."""
import subprocess
import sys

import pytest
import yaml
from conftest import ROOT
from workflow import project_copy, snakemake

from bugimpact.io import read_csv, read_json

pytestmark = pytest.mark.slow
WHEEL_CACHE = str(ROOT / "data" / "cache" / "wheels")  # one download, shared with the other tests


def bugimpact(work, *args):
    return subprocess.run([sys.executable, "-m", "bugimpact", *args], cwd=work, capture_output=True, text=True)


def test_each_fix_is_answered_for_each_workload_and_each_trace_is_made_once(tmp_path):
    work = project_copy(tmp_path / "p")
    config = yaml.safe_load((ROOT / "configs" / "zoo.yaml").read_text())
    config["artifacts"]["wheel_cache"] = WHEEL_CACHE
    config["reach"]["releases"] = ["1.5.1"]
    config["workloads"] = [w for w in config["workloads"] if w["name"] in ("smallcnn", "lstm")]
    (work / "small.yaml").write_text(yaml.safe_dump(config))
    fixes = ["pr38674", "pr37881"]  # Convolution.cpp's memory; circular padding in Python
    made = bugimpact(work, "reach", "--config", "small.yaml", "--ids", *fixes)
    assert made.returncode == 0, made.stderr[-3000:]
    folder = work / "results" / "zoo" / "reach"
    cells = {(r["fix"], r["workload"], r["release"]): r for r in read_csv(folder / "matrix.csv")[1]}
    assert {(f, w) for f, w, _ in cells} == {(f, w) for f in fixes for w in ("smallcnn", "lstm")}
    assert cells[("pr38674", "smallcnn", "1.5.1")]["verdict"] == "reached"
    lstm = cells[("pr38674", "lstm", "1.5.1")]
    assert lstm["verdict"] == "not reached", lstm
    assert "_convolution not dispatched, and the release's C++ called no function on its way" in lstm["why"]
    assert {cells[(f, w, "1.5.1")]["verdict"] for f, w in (("pr37881", "smallcnn"), ("pr37881", "lstm"))} == \
        {"not reached"}  # neither pads circularly
    summary = (folder / "matrix.md").read_text()
    assert "| smallcnn | 1 | 0 | 0 | 1 |" in summary and "| lstm | 0 | 0 | 0 | 2 |" in summary
    assert summary.index("| pr38674 | 1 |") < summary.index("| pr37881 | 0 |")  # what touches most, first
    assert (folder / "matrix.png").stat().st_size > 0

    # asked again: every trace is kept (none made again), the same answers
    traces = {p: p.read_bytes() for p in (folder / "traces").glob("*.json")}
    assert len(traces) == 2
    again = bugimpact(work, "reach", "--config", "small.yaml", "--ids", *fixes)
    assert again.returncode == 0 and "traced" not in again.stderr, again.stderr[-2000:]
    assert {p: p.read_bytes() for p in traces} == traces
    assert read_csv(folder / "matrix.csv")[1] == list(cells.values())

    # a workload that cannot run (its model's module is in no runtime) is said, and the rest stand
    config["workloads"].append({"name": "missing", "model": "nosuch.models:Net"})
    (work / "small.yaml").write_text(yaml.safe_dump(config))
    broken = bugimpact(work, "reach", "--config", "small.yaml", "--ids", *fixes)
    assert broken.returncode == 1 and "no trace of missing@1.5.1" in broken.stderr, broken.stderr[-2000:]
    assert "ModuleNotFoundError" in broken.stderr and "No trace of missing@1.5.1" in (folder / "matrix.md").read_text()
    assert read_csv(folder / "matrix.csv")[1] == list(cells.values())
    assert {p: p.read_bytes() for p in traces} == traces

    # the LSTM's not reached, against the ground truth of a whole run of the LSTM on the release
    python = next((folder / "runtimes").glob("1.5.1/venv/bin/python"))
    truth = bugimpact(work, "--config", "small.yaml", "cpp-called", "--python", str(python), "--model", "lstm",
                      "--epochs", "1", "--out", "lstm-truth.json")
    assert truth.returncode == 0, truth.stderr[-2000:]
    checked = bugimpact(work, "--config", "small.yaml", "reach", "--trace", str(folder / "traces" / "lstm@1.5.1.json"),
                        "--truth", "lstm-truth.json", "--ids", "pr38674", "--out", "checked.csv")
    assert checked.returncode == 0, checked.stderr[-2000:]
    assert read_csv(work / "checked.csv")[1][0]["truth"].startswith("agrees: the release called none")


def test_a_matrix_without_workloads_is_refused_naming_the_field(tmp_path):
    work = project_copy(tmp_path / "p")
    refused = bugimpact(work, "reach", "--config", "configs/releases.yaml")
    assert refused.returncode != 0 and "field 'workloads'" in refused.stderr, refused.stderr[-1000:]
    assert not (work / "results" / "releases" / "reach").exists()


def test_a_fix_the_matrix_says_a_workload_reaches_is_studied_with_that_workload_in_the_same_config(tmp_path):
    """pr28562 (a fix in nn.RNNBase's Python, in 1.4.0's notes): the small CNN never runs it, the
    LSTM does. The workflow makes the matrix and studies the fix as pr28562@lstm, its runs keyed by
    the LSTM's experiment; the report shows both. Studying it with the small CNN too later adds
    that item's runs and retrains none of the LSTM's."""
    work = project_copy(tmp_path / "p")
    config = yaml.safe_load((ROOT / "configs" / "zoo.yaml").read_text())
    config["artifacts"]["wheel_cache"] = WHEEL_CACHE
    config["reach"]["releases"] = ["1.4.0"]
    config["workloads"] = [w for w in config["workloads"] if w["name"] in ("smallcnn", "lstm")]
    fix = {"release": {"source": "pypi", "version": "1.4.0"}, "patch": "data/patches/pytorch/pr28562.diff",
           "workloads": ["lstm"]}
    config["bugs"] = {"from_sheet": False, "controls": {}, "fixes": {"pr28562": fix}}
    (work / "study.yaml").write_text(yaml.safe_dump(config))
    snakemake(work, "--configfile", "study.yaml")

    folder = work / "results" / "zoo"
    cells = {(r["fix"], r["workload"]): r for r in read_csv(folder / "reach" / "matrix.csv")[1]}
    assert cells[("pr28562", "lstm")]["verdict"] == "reached", cells[("pr28562", "lstm")]
    assert cells[("pr28562", "smallcnn")]["verdict"] == "not reached", cells[("pr28562", "smallcnn")]
    verdict = {r["bug"]: r for r in read_csv(folder / "stats" / "verdicts.csv")[1]}["pr28562@lstm"]
    assert verdict["reach"] == "reached" and "rnn.py" in verdict["reach_detail"], verdict
    assert verdict["verdict"] in ("not triggered", "no evidence of impact", "impact"), verdict
    records = sorted((work / "results" / "runs" / "pr28562@lstm").glob("lstm-digits-*/*/*.json"))
    assert len(records) == 4 and all(read_json(p)["spec"]["model"] == "lstm" for p in records)
    report = (folder / "report.html").read_text()
    assert "Which fixes can touch which models: 93 fixes, 2 workloads, torch 1.4.0" in report
    assert "trains that workload&#39;s model instead: lstm (lstm on digits)" in report
    assert report.count("data:image/png;base64,") == 3  # the bug's figure, the spread, the matrix

    again = snakemake(work, "--configfile", "study.yaml", "-n")
    assert "Nothing to be done" in again.stdout + again.stderr, again.stdout[-2000:]
    kept = {p: p.read_bytes() for p in records}
    fix["workloads"] = ["lstm", "smallcnn"]
    (work / "study.yaml").write_text(yaml.safe_dump(config))
    snakemake(work, "--configfile", "study.yaml")
    assert {p: p.read_bytes() for p in records} == kept  # the LSTM's runs: none retrained
    assert len(list((work / "results" / "runs" / "pr28562@smallcnn").glob("smallcnn-digits-*/*/*.json"))) == 4
    verdicts = {r["bug"]: r for r in read_csv(folder / "stats" / "verdicts.csv")[1]}
    assert verdicts["pr28562@smallcnn"]["reach"] == "not reached", verdicts["pr28562@smallcnn"]
