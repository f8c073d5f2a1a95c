"""Which fixes can touch which models (``bugimpact reach --config``): every fix judged for every
workload of the config on every release, with no build and no training, as a user runs it on the
zoo made small (the small CNN and the LSTM, torch 1.5.1 for Python 3.7, two of the shipped
notes' fixes whose diffs ship with the project); and each not reached of the kernel fix checked
against what the release's C++ ran for that model."""
import subprocess
import sys

import pytest
import yaml
from conftest import ROOT
from workflow import project_copy

from bugimpact.io import read_csv

pytestmark = pytest.mark.slow
WHEEL_CACHE = str(ROOT / "data" / "cache" / "wheels")  # one download, shared with the other tests


def bugimpact(work, *args):
    return subprocess.run([sys.executable, "-m", "bugimpact", *args], cwd=work, capture_output=True, text=True)


def test_each_fix_is_answered_for_each_workload_and_each_trace_is_made_once(tmp_path):
    work = project_copy(tmp_path / "p")
    config = yaml.safe_load((ROOT / "configs" / "zoo.yaml").read_text())
    config["artifacts"]["wheel_cache"] = WHEEL_CACHE
    config["reach"].update(releases=["1.5.1"], workloads=[w for w in config["reach"]["workloads"]
                                                          if w["name"] in ("smallcnn", "lstm")])
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
    config["reach"]["workloads"].append({"name": "missing", "model": "nosuch.models:Net"})
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
    assert refused.returncode != 0 and "reach.workloads" in refused.stderr, refused.stderr[-1000:]
    assert not (work / "results" / "releases" / "reach").exists()
