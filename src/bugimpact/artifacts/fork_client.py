"""Host side of the fork server (``harness/server.py``): find or start the server of a runtime,
ask it for one run, wait for the run's exit, kill the run's process group on a timeout.

One server per runtime (its interpreter, artifact and probe), thread count (OpenMP reads it when
torch loads) and harness source (its bytes: an edited harness never runs in an old server),
reached through a socket under ``$XDG_RUNTIME_DIR`` or ``/tmp`` (a socket path has at most 107
bytes). Concurrent jobs start it once, under a lock; it exits by itself when idle.
"""
import fcntl
import hashlib
import json
import os
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from .common import SRC, RunTimeout
from .kinds import kind

IDLE_S = 120


class ServerUnavailable(RuntimeError):
    """The runtime's fork server did not start (its harness cannot import, say): the run goes in
    a process of its own, which fails, or not, as a run and is recorded as one."""
START_TIMEOUT_S = 300


def _harness_digest():
    digest = hashlib.sha256()
    for path in sorted((SRC / "bugimpact" / "harness").glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def socket_path(runtime, env):
    key = json.dumps([runtime, str(SRC), _harness_digest(), env.get("OMP_NUM_THREADS"),
                      env.get("PYTHONHASHSEED")], sort_keys=True, default=str)
    base = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()) / f"bugimpact-{os.getuid()}"
    base.mkdir(mode=0o700, exist_ok=True)
    return base / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.sock"


def _connect(path):
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
        return conn
    except OSError:
        conn.close()
        return None


def connect(runtime, env):
    """A connection to the runtime's server, starting it if none answers."""
    path = socket_path(runtime, env)
    conn = _connect(path)
    if conn:
        return conn
    with open(f"{path}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        conn = _connect(path)
        if conn:
            return conn
        if path.exists():
            path.unlink()  # a server that died left its socket
        with open(f"{path}.log", "ab") as log:
            command, env = kind(runtime["kind"]).process(
                runtime, ["-m", "bugimpact.harness.server", "--socket", str(path), "--idle", str(IDLE_S)],
                env)
            server = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                      stderr=log, start_new_session=True)
        deadline = time.time() + START_TIMEOUT_S
        while time.time() < deadline:
            conn = _connect(path)
            if conn:
                return conn
            if server.poll() is not None:
                raise ServerUnavailable(f"the fork server of {runtime['python']} exited with "
                                   f"{server.returncode}; see {path}.log")
            time.sleep(0.05)
        server.kill()
        raise ServerUnavailable(f"the fork server of {runtime['python']} did not start in "
                           f"{START_TIMEOUT_S}s; see {path}.log")


def run_forked(runtime, spec, out, log_handle, env, device, timeout):
    """The run's exit code, as a process of its own would give it (negative: killed by signal)."""
    log_handle.flush()
    overrides = {} if device is None else {"CUDA_VISIBLE_DEVICES": str(device)}
    conn = connect(runtime, env)
    with conn, conn.makefile("rwb") as handle:
        request = {"spec": spec, "out": str(Path(out).resolve()),
                   "log": str(Path(log_handle.name).resolve()), "env": overrides}
        handle.write((json.dumps(request) + "\n").encode())
        handle.flush()
        first = handle.readline()
        if not first:  # the server died before forking: as if the run's process had been killed
            return -9
        pid = json.loads(first)["pid"]
        conn.settimeout(timeout)
        try:
            line = handle.readline()
        except (socket.timeout, KeyboardInterrupt, SystemExit) as exc:
            _kill_and_wait(pid)  # gone before its GPU slot is given back or its record written
            if isinstance(exc, socket.timeout):
                raise RunTimeout(f"timed out after {timeout}s") from None
            raise
    if not line:  # the server died: its run is killed with it, as if its process had been
        _kill_and_wait(pid)  # killed, before the caller records the run as failed
        return -9
    return json.loads(line)["exit"]


def _kill_and_wait(pid, limit=10.0):
    """Kill a run's process group and wait until it is gone: only then may the host write the
    run's record (a record is written once, by one process)."""
    deadline = time.time() + limit
    while time.time() < deadline:
        try:
            os.killpg(pid, 9)
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (ProcessLookupError, OSError):
            return
        if state == "Z":  # dead, not yet reaped by its new parent
            return
        time.sleep(0.05)
