"""The fork server: runs forked from one process that imported torch give the same records as a
process per run, a crash or a hang stays that run's own failure, and an edited harness never runs
in an old server."""
import json
import os
import signal
import time
from pathlib import Path

import pytest

from bugimpact.artifacts import fork_client
from bugimpact.artifacts.runtimes import harness_env, launch, prepare_local
from bugimpact.datasets import prepare
from bugimpact.train import train_one

TIMINGS = ("wall_s",)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
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
    for epoch in record["epochs"]:
        epoch.pop("wall_s")
    return json.dumps(record, sort_keys=True, indent=1)


def test_forked_runs_write_the_records_a_process_per_run_writes(setup, tmp_path):
    folder, spec, runtime = setup
    for index, seed in enumerate((5, 6)):
        run = dict(spec, run=index, seed=seed)
        with open(tmp_path / "log", "a") as log:
            assert launch(runtime, run, tmp_path / f"own{index}.json", log) == 0
            assert launch(runtime, run, tmp_path / f"fork{index}.json", log, fork_server=True) == 0
        # byte for byte, apart from the two wall-clock fields
        assert without_timings(tmp_path / f"own{index}.json") == \
            without_timings(tmp_path / f"fork{index}.json")
    # a fault that patches the framework (relu_leak) stayed in its own child
    plain = dict(spec, fault="", run=2)
    with open(tmp_path / "log", "a") as log:
        assert launch(runtime, plain, tmp_path / "own2.json", log) == 0
        assert launch(runtime, plain, tmp_path / "fork2.json", log, fork_server=True) == 0
    assert without_timings(tmp_path / "own2.json") == without_timings(tmp_path / "fork2.json")
    assert "accuracy" in (tmp_path / "log").read_text()


def _children(pid):
    tasks = Path(f"/proc/{pid}/task")
    return [int(c) for t in tasks.iterdir() for c in (t / "children").read_text().split()]


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
    status = train_one(long, tmp_path / "hang.json", tmp_path / "hang.log", runtime, timeout=3,
                       fork_server=True)
    record = json.loads((tmp_path / "hang.json").read_text())
    assert status == "failed" and record["failure_class"] == "timeout"
    server = _server_pid(runtime)
    deadline = time.time() + 10  # the server reaps the killed child in its waiting thread
    while _children(server) and time.time() < deadline:
        time.sleep(0.1)
    assert server and not _children(server)  # the child is gone, the server is not
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
                       fork_server=True)
    killer.join()
    assert status == "failed" and json.loads((tmp_path / "killed.json").read_text())["exit_codes"] == [-9]
    # the next run, through the same server, is fine
    assert train_one(dict(spec, run=8), tmp_path / "ok.json", tmp_path / "ok.log", runtime,
                     fork_server=True) == "ok"
    assert _server_pid(runtime) == server


def test_an_edited_harness_gets_a_server_of_its_own(setup, monkeypatch):
    _, _, runtime = setup
    env = harness_env(1)
    before = fork_client.socket_path(runtime, env)
    monkeypatch.setattr(fork_client, "_harness_digest", lambda: "edited")
    assert fork_client.socket_path(runtime, env) != before
    assert fork_client.socket_path(runtime, harness_env(2)) != before  # threads too
    assert len(str(before)) < 108  # a socket path's limit
