"""The fork server: runs forked from one process that imported torch give the same records as a
process per run, a crash or a hang stays that run's own failure, and an edited harness never runs
in an old server."""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from bugimpact.artifacts import fork_client
from bugimpact.artifacts.launch import launch
from bugimpact.artifacts.runtimes import harness_env, prepare_local
from bugimpact.challenges import prepare
from bugimpact.train import RunOptions, train_one

TIMINGS = ("wall_s",)
FORKED = RunOptions(fork_server=True)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A socket folder of this module's own: other test files run the same installed runtime
    through the fork server at the same time, and this module kills servers and counts their
    children (a short path: a socket's is at most 107 bytes)."""
    sockets = tempfile.mkdtemp(prefix="fs", dir="/tmp")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_RUNTIME_DIR", sockets)
        yield _setup(tmp_path_factory)
    shutil.rmtree(sockets, ignore_errors=True)


def _setup(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fork")
    meta = prepare("digits", folder / "digits.npz", folder / "digits.json")
    spec = {"bug": "t", "arm": "buggy", "run": 0, "seed": 5, "model": "smallcnn",
            "challenge": "digits", "data": str(folder / "digits.npz"), "data_sha256": meta["sha256"],
            "epochs": 2, "batch_size": 32, "lr": 0.05, "momentum": 0.9, "threads": 1,
            "test_fraction": 0.25, "lr_schedule": "cosine", "fault": "relu_leak"}
    return folder, spec, prepare_local({"source": "installed"})


def without_timings(path):
    record = json.loads(Path(path).read_text())
    record.pop("wall_s")
    record.pop("digest")  # over the wall time too
    for epoch in record["epochs"]:
        epoch.pop("wall_s")
    return json.dumps(record, sort_keys=True, indent=1)


def test_forked_runs_write_the_records_a_process_per_run_writes(setup, tmp_path):
    folder, spec, runtime = setup
    for index, seed in enumerate((5, 6)):
        run = dict(spec, run=index, seed=seed)
        with open(tmp_path / "log", "a") as log:
            assert launch(runtime, run, tmp_path / f"own{index}.json", log) == 0
            assert launch(runtime, run, tmp_path / f"fork{index}.json", log, FORKED) == 0
        # byte for byte, apart from the two wall-clock fields
        assert without_timings(tmp_path / f"own{index}.json") == \
            without_timings(tmp_path / f"fork{index}.json")
    # a fault that patches the framework (relu_leak) stayed in its own child
    plain = dict(spec, fault="", run=2)
    with open(tmp_path / "log", "a") as log:
        assert launch(runtime, plain, tmp_path / "own2.json", log) == 0
        assert launch(runtime, plain, tmp_path / "fork2.json", log, FORKED) == 0
    assert without_timings(tmp_path / "own2.json") == without_timings(tmp_path / "fork2.json")
    assert "accuracy" in (tmp_path / "log").read_text()


def _children(pid):
    try:
        tasks = Path(f"/proc/{pid}/task")
        return [int(c) for t in tasks.iterdir() for c in (t / "children").read_text().split()]
    except OSError:  # the process (or one of its threads) is gone
        return []


def _state(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def _server_pid(runtime):
    path = fork_client.socket_path(runtime, harness_env(1))
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if str(path) in (proc / "cmdline").read_bytes().decode(errors="replace"):
                    return int(proc.name)
            except OSError:
                continue
    return None


def test_a_killed_or_hanging_run_is_that_runs_failure_and_the_server_goes_on(setup, tmp_path):
    folder, spec, runtime = setup
    long = dict(spec, epochs=500, run=7)
    # a hang: the run's process group is killed at the timeout, and recorded as a timeout
    status = train_one(long, tmp_path / "hang.json", tmp_path / "hang.log", runtime,
                       RunOptions(timeout=3, fork_server=True))
    record = json.loads((tmp_path / "hang.json").read_text())
    assert status == "failed" and record["failure_class"] == "timeout"
    server = _server_pid(runtime)
    # gone when the launcher returns (it gives back a GPU slot then), perhaps not yet reaped
    assert server and not [c for c in _children(server) if _state(c) != "Z"]
    deadline = time.time() + 10  # the server reaps the killed child in its waiting thread
    while _children(server) and time.time() < deadline:
        time.sleep(0.1)
    assert not _children(server)  # the child is gone, the server is not
    # a crash from outside (the OOM killer's SIGKILL): that run fails, with the signal
    import threading
    def kill_the_run():
        deadline = time.time() + 60
        while not _children(server) and time.time() < deadline:
            time.sleep(0.1)
        time.sleep(1)  # mid-training
        for child in _children(server):
            os.kill(child, signal.SIGKILL)
    killer = threading.Thread(target=kill_the_run)
    killer.start()
    status = train_one(long, tmp_path / "killed.json", tmp_path / "killed.log", runtime,
                       RunOptions(fork_server=True))
    killer.join()
    assert status == "failed" and json.loads((tmp_path / "killed.json").read_text())["exit_codes"] == [-9]
    # the next run, through the same server, is fine
    assert train_one(dict(spec, run=8), tmp_path / "ok.json", tmp_path / "ok.log", runtime,
                     RunOptions(fork_server=True)) == "ok"
    assert _server_pid(runtime) == server


def test_an_edited_harness_gets_a_server_of_its_own(setup, monkeypatch):
    _, _, runtime = setup
    env = harness_env(1)
    before = fork_client.socket_path(runtime, env)
    monkeypatch.setattr(fork_client, "_harness_digest", lambda: "edited")
    assert fork_client.socket_path(runtime, env) != before
    assert fork_client.socket_path(runtime, harness_env(2)) != before  # threads too
    assert len(str(before)) < 108  # a socket path's limit


def test_runs_die_with_a_killed_server_and_the_record_is_the_hosts_alone(setup, tmp_path):
    """Before: killing the fork server left its in-flight run alive; it rewrote its record 10 s
    after its job had recorded it failed. Now the child dies with the server (and the client
    waits for it), so the failed record is the last and only write."""
    _, spec, runtime = setup
    long = dict(spec, epochs=40, run=9)
    out = tmp_path / "orphan.json"
    import threading
    seen = {}

    def kill_the_server():
        deadline = time.time() + 60
        while time.time() < deadline:
            server = _server_pid(runtime)
            if server and _children(server):
                seen["child"] = _children(server)[0]
                time.sleep(1)  # mid-training
                os.kill(server, signal.SIGKILL)
                return
            time.sleep(0.1)
    killer = threading.Thread(target=kill_the_server)
    killer.start()
    status = train_one(long, out, tmp_path / "orphan.log", runtime, RunOptions(fork_server=True))
    killer.join()
    assert status == "failed" and json.loads(out.read_text())["exit_codes"] == [-9]
    written = out.read_bytes()
    child = seen["child"]
    assert not Path(f"/proc/{child}").exists() or \
        Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    time.sleep(3)
    assert out.read_bytes() == written  # nothing wrote it again


def test_a_run_whose_client_went_away_is_killed_by_the_server(setup, tmp_path):
    _, spec, runtime = setup
    env = harness_env(1)
    conn = fork_client.connect(runtime, env)
    handle = conn.makefile("rwb")
    out = tmp_path / "abandoned.json"
    request = {"spec": dict(spec, epochs=40, run=10), "out": str(out),
               "log": str(tmp_path / "abandoned.log"), "env": {}}
    handle.write((json.dumps(request) + "\n").encode())
    handle.flush()
    pid = json.loads(handle.readline())["pid"]
    time.sleep(1)
    handle.close()
    conn.close()  # the job that asked for the run was killed
    deadline = time.time() + 10
    while Path(f"/proc/{pid}").exists() and time.time() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{pid}").exists()
    assert not out.exists()


def test_a_runtime_whose_harness_cannot_import_is_a_recorded_run_failure(setup, tmp_path):
    """Before: the fork server's start failed as a job error, with no record and no report."""
    _, spec, _ = setup
    broken = {"kind": "venv", "python": "/usr/bin/python3", "probe": {}}  # no torch there
    if subprocess.run([broken["python"], "-c", "import torch"], capture_output=True).returncode == 0:
        pytest.skip("this python has torch")
    out = tmp_path / "broken.json"
    status = train_one(dict(spec, run=11), out, tmp_path / "broken.log", broken, RunOptions(fork_server=True))
    record = json.loads(out.read_text())
    assert status == "failed" and record["exit_codes"] == [1]
    assert "ModuleNotFoundError: No module named" in record["log_tail"]
    assert "goes in a process of its own" in (tmp_path / "broken.log").read_text()
