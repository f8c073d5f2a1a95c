"""One run of the harness in its runtime: on a GPU claimed for it, forked from a server where the
runtime's kind allows it, killed with everything it started when it hangs."""
import json
import os
import subprocess

from .common import RunTimeout
from .fork_client import ServerUnavailable, run_forked
from .kinds import kind as runtime_kind
from .runtimes import GpuLock, gpu_pool, harness_env


def launch(runtime, spec, out, log_handle, threads=1, gpus=0, timeout=None, fork_server=False):
    """Run the harness once; returns its exit code, or raises ``RunTimeout`` after ``timeout``
    seconds, when the whole process group (and a docker run's container) has been killed. A hang
    is one of the bugs this tool studies: it must not block the study. Progress goes to the log.

    ``fork_server`` (local and venv runtimes): the run is a child forked from a server that has
    imported torch once (``harness/server.py``) instead of a new process. Not in a SLURM job: there
    a job is one run, perhaps confined to its own GPU, and a server shared with other jobs could
    outlive its job or see another job's GPU."""
    kind = runtime_kind(runtime["kind"])
    pool = gpu_pool(os.environ, gpus) if spec.get("device") == "cuda" else None
    with GpuLock(pool) as lock:
        log_handle.write(f"device {spec.get('device', 'cpu')}: {lock.how}\n")
        log_handle.flush()
        if fork_server and kind.forks and not os.environ.get("SLURM_JOB_ID"):
            try:
                return run_forked(runtime, spec, out, log_handle, harness_env(threads),
                                  lock.device, timeout)
            except ServerUnavailable as exc:
                log_handle.write(f"{exc}: this run goes in a process of its own\n")
                log_handle.flush()
        env = harness_env(threads, lock.device)
        cmd, env = kind.command(runtime, out, env, spec["data"])
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, text=True, env=env, stdout=log_handle,
                                stderr=log_handle, start_new_session=True)
        try:
            proc.communicate(json.dumps(spec), timeout=timeout)
        except BaseException as exc:
            _kill(proc, kind, out)
            if isinstance(exc, subprocess.TimeoutExpired):
                raise RunTimeout(f"timed out after {timeout}s") from None
            raise
    return proc.returncode


def _kill(proc, kind, out):
    try:
        os.killpg(proc.pid, 9)
    except ProcessLookupError:
        pass
    proc.wait()
    kind.after_kill(out)
