"""The reach gate in the workflow: docker-built fixes that the workload cannot reach get no
toolchain, no build and no run; their verdict says why. Real torch 1.5.1 traced in a Python 3.7
venv, real ATen sources in a git clone made here, the real diffs of two PyTorch fixes."""
import csv
import json
import subprocess
import sys
import tarfile

import pytest
import yaml
from conftest import ROOT, git, untar
from workflow import job_counts, project_copy, snakemake

from bugimpact.io import read_csv

pytestmark = pytest.mark.slow
FIX = ROOT / "tests" / "fixtures" / "reach"
WHEEL_CACHE = str(ROOT / "data" / "cache" / "wheels")
SHEET = ("id,release,area,pr,prs,text,url,buggy_sha,corrected_sha,resolve_status,tags,mined,"
         "decision,reason,notes,subarea,onefix,resolve_note").split(",")


def fix_commits(repo, fix):
    """Buggy and corrected commits of one real fix, on top of the ATen snapshot."""
    diff = FIX / "diffs" / f"{fix}.diff"
    forward = subprocess.run(["git", "-C", str(repo), "apply", "--check", str(diff)],
                             capture_output=True).returncode == 0
    if not forward:
        git(repo, "apply", "-R", str(diff))
        git(repo, "commit", "-qam", f"before {fix}")
    buggy = git(repo, "rev-parse", "HEAD")
    git(repo, "apply", str(diff))
    git(repo, "commit", "-qam", f"{fix}")
    return buggy, git(repo, "rev-parse", "HEAD")


def test_fixes_the_workload_cannot_reach_get_no_build_and_no_run(tmp_path):
    repo = tmp_path / "pytorch"
    repo.mkdir()
    with tarfile.open(FIX / "aten-2020-03-25.tar.xz") as archive:
        untar(archive, repo)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "ATen as of 2020-03-25")
    rows = []
    for fix, release in (("pr36820", "v1.6.0"), ("pr32350", "v1.5.0")):
        buggy, corrected = fix_commits(repo, fix)
        rows.append(dict.fromkeys(SHEET, "") | {"id": fix, "release": release, "pr": fix[2:],
                                                 "prs": fix[2:], "text": f"real fix #{fix[2:]}",
                                                 "buggy_sha": buggy, "corrected_sha": corrected,
                                                 "resolve_status": "resolved", "mined": "no",
                                                 "decision": "accept"})
    work = project_copy(tmp_path / "p")
    with open(work / "data" / "filter" / "pytorch.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, SHEET)
        writer.writeheader()
        writer.writerows(rows)
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    config["bugs"]["controls"] = {}
    config["resolve"]["clone"] = str(repo)
    config["artifacts"].update(source="docker", wheel_cache=WHEEL_CACHE,
                               docker={"clone": str(repo)})
    config["runtime"] = {"kind": "venv", "python": "3.7"}
    config["reach"] = {"release": "1.5.1"}
    config["train"].update(runs=3, epochs=2)
    (work / "reach.yaml").write_text(yaml.safe_dump(config))
    snakemake(work, "--configfile", "reach.yaml")

    verdicts = {r["bug"]: r for r in read_csv(work / "results" / "calibration" / "stats" / "verdicts.csv")[1]}
    assert verdicts["pr36820"]["verdict"] == "not reached on cpu"
    assert "DilatedMaxPool3d.cu" in verdicts["pr36820"]["reason"]
    assert verdicts["pr32350"]["verdict"] == "not reached"
    assert "constant_pad_nd not dispatched" in verdicts["pr32350"]["reach_detail"]
    assert "traced on torch 1.5.1 (cpu)" in verdicts["pr32350"]["reach_detail"]
    # nothing was built, made or run for them: no toolchain image, no build, no record
    assert not list((work / "results" / "artifacts").glob("docker-*"))
    assert not (work / "results" / "toolchains").exists()
    assert not (work / "results" / "runs").exists()
    builds = read_csv(work / "results" / "calibration" / "builds" / "summary.csv")[1]
    assert {b["status"] for b in builds} == {"skipped"} and len(builds) == 4
    trace_path = next((work / "results" / "reach" / "traces").rglob("*.json"))
    trace = json.loads(trace_path.read_text())
    assert trace["torch_version"] == "1.5.1" and "conv2d" in trace["ops"]
    # the release's C++ that ran, by the dynamic loader: relu's kernel calls threshold below
    # autograd, where torch 1.5's profile never looks
    assert "threshold" not in trace["ops"] and "at::native::threshold" in trace["cpp_called"]
    # reach's not reached checked against the ground truth of a whole run on the same release
    python = next((work / "results" / "runtimes").rglob("venv/bin/python"))
    bugimpact = [sys.executable, "-m", "bugimpact", "--config", "reach.yaml"]
    made = subprocess.run([*bugimpact, "cpp-called", "--python", str(python), "--epochs", "1",
                           "--out", "truth.json"], cwd=work, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    judged = subprocess.run([*bugimpact, "reach", "--trace", str(trace_path), "--truth", "truth.json",
                             "--clone", str(repo), "--out", "checked.csv"], cwd=work, capture_output=True, text=True)
    assert judged.returncode == 0, judged.stderr
    checked = {r["id"]: r["truth"] for r in read_csv(work / "checked.csv")[1]}
    assert checked["pr32350"] == "agrees: the release called none of the functions of its 1 operator(s)"
    report = (work / "results" / "calibration" / "report.html").read_text()
    assert "not reached on cpu" in report

    # a person's note on a row changes no verdict: nothing is traced, judged or made again
    sheet = work / "data" / "filter" / "pytorch.csv"
    header, rows = read_csv(sheet)
    rows[0]["notes"] = "looked at it twice"
    with open(sheet, "w", newline="") as handle:
        writer = csv.DictWriter(handle, header)
        writer.writeheader()
        writer.writerows(rows)
    jobs = job_counts(snakemake(work, "--configfile", "reach.yaml", "-n").stdout)
    assert set(jobs) == {"funnel", "study_stats", "report", "all", "total"}, jobs  # what shows the sheet
