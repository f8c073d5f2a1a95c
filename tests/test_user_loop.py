"""The user's loop on a finished study: see where it stands, rerun one bug (its missing and failed
runs, nothing of other bugs), and get an error, not a traceback or a silent "0", for a wrong flag
or folder."""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml
from conftest import ROOT
from workflow import project_copy, snakemake

pytestmark = pytest.mark.slow


def cli(work, *args):
    env = dict(os.environ, PYTHONPATH=str(work / "src"))
    return subprocess.run([sys.executable, "-m", "bugimpact", *args], cwd=work,
                          capture_output=True, text=True, env=env)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    work = project_copy(tmp_path_factory.mktemp("loop") / "p")
    config = yaml.safe_load((ROOT / "tests" / "configs" / "fast.yaml").read_text())
    config["bugs"]["controls"] = {k: v for k, v in config["bugs"]["controls"].items()
                                  if k in ("aa", "fault-momentum")}
    config["train"].update(runs=4, epochs=1)
    config["stats"]["metrics"] = ["accuracy"]
    (work / "tiny.yaml").write_text(yaml.safe_dump(config))
    out = snakemake(work, "--configfile", "tiny.yaml")
    return work, out.stdout + out.stderr


def test_a_run_ends_with_where_each_bug_stands_and_the_report_last(study):
    work, text = study
    tail = text[text.index("bug             sheet"):]
    assert "aa              control  ready  4/4 (+4 skipped)" in tail
    assert "not triggered" in tail and "report: results/calibration/report.html" in tail
    assert "from the bug's own statistics" not in tail  # the study's table is up to date
    # rule all's inputs are one line per study, not every record of every bug
    line = next(s for s in text.splitlines() if "Input files updated by another job" in s
                and "report.html" in s)
    assert len(line) < 1000


def test_status_then_one_bug_rerun_makes_its_missing_and_failed_runs_only(study, tmp_path):
    work = tmp_path / "p"
    shutil.copytree(study[0], work, symlinks=True)
    runs = work / "results" / "runs"
    key = next((runs / "fault-momentum").iterdir()).name
    missing = runs / "fault-momentum" / key / "buggy" / "3.json"
    missing.unlink()
    failed = runs / "fault-momentum" / key / "corrected" / "2.json"
    failed.write_text(json.dumps({"status": "failed", "spec": {"arm": "corrected", "run": 2},
                                  "exit_codes": [1], "log_tail": "boom"}))
    others = {p: p.read_bytes() for p in runs.rglob("*.json") if p not in (missing, failed)}
    status = cli(work, "status", "--config", "tiny.yaml")  # --config after the command too
    assert status.returncode == 0, status.stderr
    row = next(s for s in status.stdout.splitlines() if s.startswith("fault-momentum"))
    assert "6/8" in row and row.rstrip().endswith("bugimpact run --bug fault-momentum --config tiny.yaml")
    assert status.stdout.rstrip().endswith("report: results/calibration/report.html")
    rerun = cli(work, "run", "--bug", "fault-momentum", "--config", "tiny.yaml")
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"removed results/runs/fault-momentum/{key}/corrected/2.json" in rerun.stdout
    assert json.loads(failed.read_text())["status"] == "ok" and missing.exists()
    assert {p: p.read_bytes() for p in others} == others  # nothing else trained again
    assert "fault-momentum  control  ready  8/8" in rerun.stdout
    line = (work / "results" / "calibration" / "bugs" / "fault-momentum.txt").read_text()
    assert line.startswith("fault-momentum: ")
    # the bug's verdict shows at once (its own statistics, marked), and it needs nothing more
    own = json.loads((work / "results" / "calibration" / "stats" / "fault-momentum" / f"{key}.json").read_text())
    after = cli(work, "status", "--config", "tiny.yaml").stdout
    row = next(s for s in after.splitlines() if s.startswith("fault-momentum"))
    assert f"{own['rows'][0]['verdict']} *" in row and "bugimpact run --bug" not in row, after
    assert "*: from the bug's own statistics" in after
    assert line.startswith(f"fault-momentum: {own['rows'][0]['verdict']}: ")


def test_a_lost_decision_is_made_again_by_the_bug_target(study, tmp_path):
    work = tmp_path / "p"
    shutil.copytree(study[0], work, symlinks=True)
    decision = next((work / "results" / "early" / "aa").glob("*.json"))
    decision.unlink()
    dry = cli(work, "run", "--bug", "aa", "-n", "--config", "tiny.yaml")
    assert "early_decision" in dry.stdout + dry.stderr and "train " not in dry.stdout
    assert not decision.exists()  # a dry run makes nothing


def test_wrong_names_folders_and_files_are_errors_naming_them(study, tmp_path):
    work = study[0]
    nope = cli(work, "run", "--bug", "pr99999", "--config", "tiny.yaml")
    assert nope.returncode == 2 and "no bug 'pr99999' in this study (it has aa, fault-momentum)" \
        in nope.stderr and "Traceback" not in nope.stderr
    for command, flag in ((["verify"], "--runs"), (["retry-failed", "--all"], "--runs"),
                          (["retry-failed", "--config", str(work / "tiny.yaml")], "--config")):
        out = cli(tmp_path, *command)  # from the wrong folder: an error, not "0 ... removed"
        assert out.returncode == 2 and f"no such folder ({flag})" in out.stderr, out.stderr
    missing = cli(work, "run", "report", "--config", "nowhere.yaml")
    assert missing.returncode == 2 and "nowhere.yaml" in missing.stderr
    assert "Traceback" not in missing.stderr
    dry = cli(work, "run", "report", "--config", "tiny.yaml", "--dry-run")  # the README's form
    assert dry.returncode == 0, dry.stderr[-2000:]


def test_switching_the_study_to_venv_keeps_the_runs_of_its_installed_torch_controls(study, tmp_path):
    """A one-fix row needs runtime.kind venv; the controls on the installed torch do not depend on
    it (the venv's interpreter runs that torch itself), so switching trains nothing again."""
    work = tmp_path / "p"
    shutil.copytree(study[0], work, symlinks=True)
    config = yaml.safe_load((work / "tiny.yaml").read_text())
    config["runtime"] = {"kind": "venv", "python": sys.executable}
    (work / "venv.yaml").write_text(yaml.safe_dump(config))
    records = {p: p.read_bytes() for p in (work / "results" / "runs").rglob("*.json")}
    out = snakemake(work, "--configfile", "venv.yaml")
    assert "train " not in out.stdout + out.stderr and "runtime " not in out.stdout + out.stderr
    assert {p: p.read_bytes() for p in (work / "results" / "runs").rglob("*.json")} == records
    # with extra requirements the installed torch runs in a venv made for them: a new runtime
    config["runtime"]["requirements"] = [str(work / "examples" / "periodic-model")]
    (work / "req.yaml").write_text(yaml.safe_dump(config))
    dry = snakemake(work, "--configfile", "req.yaml", "-n")
    jobs = dry.stdout[dry.stdout.index("Job stats"):]
    assert re.search(r"\nruntime +1\n", jobs) and re.search(r"\narms +2\n", jobs)  # new runs follow
