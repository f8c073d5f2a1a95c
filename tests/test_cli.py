"""The ``bugimpact`` command runs each step by hand on explicit files."""
import json
import os
import subprocess
import sys

from conftest import ROOT


def cli(*args, cwd=ROOT):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run([sys.executable, "-m", "bugimpact.cli", *args], cwd=cwd,
                          capture_output=True, text=True, env=env)


def test_mine_resolve_sheet_by_hand(tmp_path):
    bugs, commits, sheet = tmp_path / "bugs.csv", tmp_path / "commits.csv", tmp_path / "s.csv"
    assert cli("mine", "--out", str(bugs), "--counts", str(tmp_path / "r.csv")).returncode == 0
    assert cli("resolve", "--bugs", str(bugs), "--out", str(commits)).returncode == 0
    out = cli("sheet", "--bugs", str(bugs), "--commits", str(commits), "--sheet", str(sheet),
              "--funnel", str(tmp_path / "f.csv"), "--merge-report", str(tmp_path / "m.json"))
    assert out.returncode == 0 and json.loads(out.stdout)["appended"] == 106
    ok = cli("validate-sheet", str(sheet))
    assert ok.returncode == 0 and "106 rows, 0 accepted" in ok.stdout


def test_bad_input_is_one_clear_line(tmp_path):
    bad = tmp_path / "s.csv"
    bad.write_text("id,decision,reason,buggy_sha,corrected_sha\npr1,yes,,,\n")
    out = cli("validate-sheet", str(bad))
    assert out.returncode == 2
    assert out.stderr.strip().startswith(f"bugimpact: {bad}, row 2, field 'decision'")
    assert "Traceback" not in out.stderr
    missing = cli("validate-sheet", str(tmp_path / "none.csv"))
    assert missing.returncode == 2 and "No such file" in missing.stderr


def test_retry_failed_removes_only_failures(tmp_path):
    runs, arts = tmp_path / "runs", tmp_path / "artifacts"
    (runs / "b" / "k" / "buggy").mkdir(parents=True)
    (arts / "docker-x").mkdir(parents=True)
    (runs / "b" / "k" / "buggy" / "0.json").write_text(json.dumps({"status": "failed"}))
    (runs / "b" / "k" / "buggy" / "1.json").write_text(json.dumps({"status": "ok"}))
    (arts / "docker-x" / "manifest.json").write_text(json.dumps({"status": "failed"}))
    out = cli("retry-failed", "--runs", str(runs), "--artifacts", str(arts))
    assert out.returncode == 0 and "2 failed records removed" in out.stdout
    assert (runs / "b" / "k" / "buggy" / "1.json").exists()
    assert not (arts / "docker-x" / "manifest.json").exists()


def test_the_sheet_command_validates_before_it_merges(tmp_path):
    bugs = tmp_path / "bugs.csv"
    bugs.write_text("id,release,area,pr,prs,text,url\npr1,v1,JIT,1,1,Fix,\n")
    commits = tmp_path / "commits.csv"
    commits.write_text("id,status\npr1,unresolved\n")
    sheet = tmp_path / "s.csv"
    sheet.write_text("id;decision;reason;buggy_sha;corrected_sha\npr1;;;;\n")
    before = sheet.read_bytes()
    out = cli("sheet", "--bugs", str(bugs), "--commits", str(commits), "--sheet", str(sheet),
              "--funnel", str(tmp_path / "f.csv"), "--merge-report", str(tmp_path / "m.json"))
    assert out.returncode == 2 and "separated by semicolons" in out.stderr
    assert sheet.read_bytes() == before  # not doubled, nothing cut off


def test_a_yaml_error_names_the_file_and_line(tmp_path):
    bad = tmp_path / "study.yaml"
    bad.write_text("study: x\nmine: {source: snapshot\n")
    out = cli("validate-config", str(bad))
    assert out.returncode == 2
    assert f"{bad}: not valid YAML at line 3, column 1" in out.stderr
    assert cli("validate-config", str(ROOT / "configs" / "releases.yaml")).returncode == 0
