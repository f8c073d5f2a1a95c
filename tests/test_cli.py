"""The ``bugimpact`` command: one step of the workflow by hand (through its rule), and the checks
and housekeeping around the workflow."""
import json
import os
import subprocess
import sys

from conftest import ROOT
from workflow import project_copy


def cli(*args, cwd=ROOT):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run([sys.executable, "-m", "bugimpact", *args], cwd=cwd,
                          capture_output=True, text=True, env=env)


def test_every_step_has_one_way_in_its_rule():
    listed = cli("steps").stdout.split()
    rules = subprocess.run([sys.executable, "-m", "snakemake", "--list-rules"], cwd=ROOT,
                           capture_output=True, text=True).stdout.split()
    assert sorted(listed) == sorted(set(rules) - {"all"}) and len(listed) == 29
    assert listed.index("mine") < listed.index("funnel") < listed.index("train") < listed.index("report")


def test_a_step_by_hand_is_its_rule_and_what_it_needs(tmp_path):
    work = project_copy(tmp_path / "p")
    out = cli("run", "funnel", cwd=work)
    assert out.returncode == 0, out.stderr[-2000:]
    funnel = (work / "results" / "calibration" / "filter" / "funnel.csv").read_text()
    assert "mined,106" in funnel.replace(" ", "")
    for log in ("mine", "resolve", "sheet_merge", "funnel"):  # the rules' own logs
        assert (work / "logs" / f"{log}.log").exists(), log
    assert not (work / "results" / "runs").exists()  # nothing beyond the step was run
    ok = cli("validate-sheet", "data/filter/pytorch.csv", cwd=work)
    assert ok.returncode == 0 and "106 rows, 0 accepted" in ok.stdout
    unknown = cli("run", "train-run", cwd=work)
    assert unknown.returncode == 2 and "the steps are: mine, resolve" in unknown.stderr


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
    from bugimpact.harness.registry import RECORD_SCHEMA
    (runs / "b" / "k" / "buggy" / "1.json").write_text(json.dumps(
        {"status": "ok", "spec": {}, "record_schema": RECORD_SCHEMA, "metrics": {}, "fingerprints": {}}))
    (arts / "docker-x" / "manifest.json").write_text(json.dumps({"status": "failed"}))
    # in a folder of its own: the other results it looks at (checks, runtimes) are the cwd's, and
    # the project's own are not the test's to remove (seen: 15 of a working copy's failures gone)
    out = cli("retry-failed", "--all", "--runs", str(runs), "--artifacts", str(arts), cwd=tmp_path)
    assert out.returncode == 0 and "2 removed" in out.stdout
    assert (runs / "b" / "k" / "buggy" / "1.json").exists()
    assert not (arts / "docker-x" / "manifest.json").exists()


def test_a_record_of_a_source_no_loaded_plugin_registers_is_kept_and_named_not_called_broken(tmp_path):
    """Seen in review: recovery took a config error (a plugin's source not registered here) or any
    KeyError for a broken record, and retry-failed deleted the manifest."""
    arts = tmp_path / "artifacts"
    plugin = arts / "myplugin-1" / "manifest.json"
    plugin.parent.mkdir(parents=True)
    plugin.write_text(json.dumps({"source": "myplugin", "status": "ok"}))
    out = cli("retry-failed", "--all", "--artifacts", str(arts), cwd=tmp_path)
    assert out.returncode == 2 and plugin.exists() and "Traceback" not in out.stderr
    assert f"{plugin}, field 'source': unknown artifact source 'myplugin'" in out.stderr, out.stderr
    assert "load the plugin that registers it" in out.stderr
    plugin.write_text(json.dumps({"status": "ok"}))  # a field every manifest has, missing: broken
    out = cli("retry-failed", "--all", "--artifacts", str(arts), cwd=tmp_path)
    assert out.returncode == 0 and f"removed {plugin}: broken (no 'source' field)" in out.stdout, out.stdout
    assert not plugin.exists()


def test_a_sheet_that_cannot_be_read_is_never_merged_into(tmp_path):
    work = project_copy(tmp_path / "p")
    sheet = work / "data" / "filter" / "pytorch.csv"
    sheet.write_text("id;decision;reason;buggy_sha;corrected_sha\npr1;;;;\n")
    before = sheet.read_bytes()
    out = cli("run", "sheet_merge", cwd=work)
    assert out.returncode != 0 and "separated by semicolons" in out.stderr
    assert sheet.read_bytes() == before  # not doubled, nothing cut off


def test_a_yaml_error_names_the_file_and_line(tmp_path):
    bad = tmp_path / "study.yaml"
    bad.write_text("study: x\nmine: {source: snapshot\n")
    out = cli("validate-config", str(bad))
    assert out.returncode == 2
    assert f"{bad}: not valid YAML at line 3, column 1" in out.stderr
    assert cli("validate-config", str(ROOT / "configs" / "releases.yaml")).returncode == 0
