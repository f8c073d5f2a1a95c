"""Tools touch only what they own (issue: `gc --remove` deleted a wheel a config names when it lay
in the wheel cache; `verify --runs results --remove` deleted seeds, manifests and decisions;
`retry-failed` crashed on a record that is a JSON list)."""
import json
import os
import subprocess
import sys

import yaml
from conftest import ROOT, config_with
from test_gc import put

# no Docker engine answers here: `gc --remove` removes the project's images that its configs do
# not use, on the engine every test shares (test_docker's toolchain, built beside this one)
ENV = dict(os.environ, PATH="/usr/bin/none:" + os.environ["PATH"], PYTHONPATH=str(ROOT / "src"),
           DOCKER_HOST="unix:///nonexistent")


def cli(cwd, *args):
    return subprocess.run([sys.executable, "-m", "bugimpact", *args], cwd=cwd,
                          capture_output=True, text=True, env=ENV)


def test_gc_never_removes_a_wheel_a_config_names(tmp_path):
    mine = put(tmp_path / "cache" / "mine" / "torch-1.5.1-cp37-cp37m-linux_x86_64.whl", "my build")
    config = config_with(sheet=str(tmp_path / "none.csv"), **{"artifacts.wheel_cache": "cache"})
    config["bugs"]["controls"]["mine"] = {"buggy": {"source": "wheel", "wheel": str(mine)},
                                          "corrected": {"source": "installed"}}
    config["runtime"] = {"kind": "venv", "python": sys.executable}
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(config))
    stray = put(tmp_path / "cache" / "pypi" / "torch-1.0.0" / "x" / "torch-1.0.0.whl", "w")
    put(tmp_path / "results" / "artifacts" / "pypi-1.0.0-x" / "manifest.json", {"wheel": str(stray)})
    foreign = put(tmp_path / "cache" / "pypi" / "torch-1.1.0" / "x" / "torch-1.1.0.whl", "not ours")
    out = cli(tmp_path, "gc", "--keep", "study.yaml", "--remove")
    assert out.returncode == 0, out.stderr
    assert mine.exists() and not stray.exists()  # what the project fetched and recorded, unwanted
    assert foreign.exists()  # a wheel no manifest of the project names is never removed


def test_verify_and_retry_touch_run_records_only(tmp_path):
    res = tmp_path / "results"
    seeds = put(res / "seeds" / "b.json", {"bug": "b", "seeds": [1, 2]})
    manifest = put(res / "artifacts" / "installed" / "manifest.json",
                   {"source": "installed", "status": "ok", "wheel": None})
    early = put(res / "early" / "b" / "k.json", {"decision": "continue"})
    stats = put(res / "stats" / "b.json", {"info": {}, "rows": []})
    cut = put(res / "runs" / "b" / "k" / "buggy" / "0.json", '{"status": "ok", "met')
    failed = put(res / "runs" / "b" / "k" / "buggy" / "1.json",
                 {"status": "failed", "spec": {"bug": "b"}, "exit_codes": [1], "log_tail": ""})
    a_list = put(res / "runs" / "b" / "k" / "corrected" / "0.json", [1, 2])
    out = cli(tmp_path, "verify", "--runs", "results", "--remove")
    assert out.returncode == 0, out.stderr
    assert not cut.exists() and not a_list.exists()  # broken run records, named and removed
    assert all(p.exists() for p in (seeds, manifest, early, stats, failed))
    put(a_list, [1, 2])
    out = cli(tmp_path, "retry-failed", "--all", "--runs", "results/runs", "--artifacts", "results/artifacts")
    assert out.returncode == 0, out.stderr
    assert not failed.exists() and not a_list.exists() and "2 removed" in out.stdout
    assert f"removed {a_list.relative_to(tmp_path)}: broken (not a valid run record: a list, not a record)" in out.stdout
    assert json.loads(seeds.read_text())["seeds"] == [1, 2]
    assert all(p.exists() for p in (seeds, manifest, early, stats))


def test_a_crashed_run_says_it_was_killed_by_a_signal():
    from bugimpact.stats.failures import failure_text
    record = {"status": "failed", "exit_codes": [-11],
              "log_tail": "attempt 1: local runtime, seed 3\ndevice cpu: no GPU\n"}
    assert failure_text(record) == "killed by SIGSEGV (exit -11): no output from the harness"
    record["log_tail"] += "[b buggy run 0] epoch 1/2 loss 0.1\nRuntimeError: boom\n"
    assert failure_text(record) == "killed by SIGSEGV (exit -11): RuntimeError: boom"


def test_a_run_killed_from_outside_says_who_can_have_sent_it_not_the_logs_last_line():
    """Seen: "killed by SIGTERM (exit -15): Warning: Registered a kernel for operator
    aten::conv_transpose3d..." (the log's last line, which says nothing of the kill)."""
    from bugimpact.stats.failures import failure_text
    tail = "attempt 1: venv runtime, seed 3\nWarning: Registered a kernel for operator aten::conv_transpose3d\n"
    record = {"status": "failed", "exit_codes": [-15], "log_tail": tail, "log": "logs/train/b/k/buggy/0.log"}
    assert failure_text(record) == (
        "killed by SIGTERM (exit -15), sent from outside the run (a user, the scheduler or snakemake "
        "stopping; its own timeout says so); its log: logs/train/b/k/buggy/0.log")
    record["exit_codes"] = [-9]
    assert "SIGKILL (exit -9)" in failure_text(record) and "out-of-memory killer" in failure_text(record)
    assert "Registered a kernel" not in failure_text(record)


def test_records_the_harness_writes_follow_the_umask(tmp_path):
    from bugimpact.harness.run import write_atomic
    old = os.umask(0o022)
    try:
        write_atomic(str(tmp_path / "r.json"), {"status": "ok"})
    finally:
        os.umask(old)
    assert (tmp_path / "r.json").stat().st_mode & 0o777 == 0o644


def test_an_override_for_an_id_the_sheet_does_not_hold_is_an_error(tmp_path):
    import pytest

    from bugimpact.config import SHEET_SCHEMA
    from bugimpact.io import InputError, write_csv
    from bugimpact.plan import Plan
    from bugimpact.sheet import COLUMNS
    sheet = tmp_path / "sheet.csv"
    write_csv(sheet, [{"id": "pr1", "release": "v1.4.0", "pr": "1", "prs": "1", "text": "t",
                       "mined": "yes"}], COLUMNS)
    config = config_with(sheet=str(sheet))
    config["bugs"]["overrides"] = {"pr2": {"buggy": {"source": "installed"},
                                           "corrected": {"source": "installed"}}}
    with pytest.raises(InputError, match=r"bugs.overrides names pr2, which .*sheet.csv does not hold"):
        Plan(config, SHEET_SCHEMA)


def test_a_sheet_cell_with_no_column_or_a_column_named_twice_is_refused_never_merged(tmp_path):
    import pytest

    from bugimpact.io import InputError
    from bugimpact.sheet import COLUMNS, update_sheet
    header = ",".join(COLUMNS)
    cells = {"id": "pr1", "release": "v1.4.0", "pr": "1", "prs": "1", "text": "t", "mined": "yes"}
    row = ",".join(cells.get(c, "") for c in COLUMNS)
    sheet = tmp_path / "sheet.csv"
    bugs = [{"id": "pr1", "release": "v1.4.0", "area": "", "pr": "1", "prs": "1", "text": "t",
             "url": ""}]
    for text, message in ((f"{header}\n{row},my own note\n",
                           "row 2.*'my own note' is in a column with no header"),
                          (f"{header},notes\n{row},second notes\n", "two columns are named 'notes'")):
        sheet.write_text(text)
        with pytest.raises(InputError, match=message):
            update_sheet(sheet, bugs, [])
        assert sheet.read_text() == text  # refused: the sheet is not rewritten


def test_an_interpreter_is_the_same_whatever_name_it_was_called_by(tmp_path):
    from bugimpact.artifacts.kinds import runtime_id
    link = tmp_path / "python"
    link.symlink_to(sys.executable)
    info = {"executable": sys.executable, "prefix": sys.prefix, "version": "3.11.7"}
    assert runtime_id({"kind": "local"}, info) == runtime_id({"kind": "local"}, dict(info, executable=str(link)))
    # another environment of the same binary (a venv) is another interpreter
    assert runtime_id({"kind": "local"}, info) != runtime_id({"kind": "local"}, dict(info, prefix=str(tmp_path)))


def test_a_local_requirement_is_hashed_by_its_content(tmp_path):
    """Before: `runtime.requirements` were hashed as strings, so an edited model package made no
    new runtime and no new runs."""
    from bugimpact.artifacts.kinds import runtime_id
    package = tmp_path / "model"
    (package / "mymodel").mkdir(parents=True)
    (package / "mymodel" / "__init__.py").write_text("WIDTH = 8\n")
    info = {"executable": sys.executable, "prefix": sys.prefix, "version": "3.11.7"}
    cfg = {"kind": "venv", "requirements": [str(package), "scipy"]}
    before = runtime_id(cfg, info)
    (package / "mymodel" / "__pycache__").mkdir()
    (package / "mymodel" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (package / "mymodel.egg-info").mkdir()
    (package / "mymodel.egg-info" / "PKG-INFO").write_text("built\n")
    assert runtime_id(cfg, info) == before  # what an install leaves behind is not the package
    (package / "mymodel" / "__init__.py").write_text("WIDTH = 16\n")
    assert runtime_id(cfg, info) != before
