"""One run of the harness in its runtime: on a GPU slot claimed for it, forked from a server where
the runtime's kind allows it, killed with everything it started when it hangs."""
import dataclasses
import os
from dataclasses import dataclass
from typing import Optional

from .common import RunTimeout
from .fork_client import ServerUnavailable, run_forked
from .kinds import kind as runtime_kind
from .runtimes import GpuLock, NoGpu, gpu_pool, harness_env


@dataclass(frozen=True)
class RunOptions:
    """How a run is attempted, never what it computes (none of it is in the experiment key but
    ``threads``, which the launcher also needs to set the process's thread variables)."""
    retries: int = 0
    threads: int = 1
    gpus: int = 0
    runs_per_gpu: int = 1
    timeout: Optional[float] = None
    fork_server: bool = False
    runtime_gpus: str = ""  # runtime.gpus: which of the GPUs the lock hands out

    @classmethod
    def of(cls, train_cfg):
        """From ``train`` (``steps.training.job_settings``: its ``JOB_SETTINGS`` and runtime.gpus)."""
        return cls(retries=train_cfg["retries"], threads=train_cfg["threads"], gpus=train_cfg["gpus"],
                   runs_per_gpu=train_cfg["runs_per_gpu"], timeout=train_cfg["timeout_s"],
                   fork_server=train_cfg["fork_server"], runtime_gpus=train_cfg.get("runtime_gpus", ""))


def launch(runtime, spec, out, log_handle, options=None):
    """Run the harness once; returns its exit code, or raises ``RunTimeout`` after
    ``options.timeout`` seconds, once the whole process group (and a docker run's container) is
    gone: only then is its GPU slot given back. A hang is one of the bugs this tool studies: it
    must not block the study. Progress goes to the log. A cuda run waits for a GPU slot at most
    as long as a run may take (``NoGpu`` then).

    ``options.fork_server`` (local and venv runtimes): the run is a child forked from a server
    that has imported torch once (``harness/server.py``) instead of a new process. Not in a SLURM
    job: there a job is one run, perhaps confined to its own GPU, and a server shared with other
    jobs could outlive its job or see another job's GPU. Nor for an interposed override library
    (``spec["preload"]``): it must be in the process before torch binds (``LD_PRELOAD``), which a
    server that has imported torch already is not; nor where the loader's record of the run is asked
    for (``spec["bindings"]``, ``harness.loader``): it is the process's own, from its start."""
    options = options or RunOptions()
    preload = spec["override"] if spec.get("preload") else None
    kind = runtime_kind(runtime["kind"])
    pool = (gpu_pool(os.environ, options.gpus, runtime_gpus=options.runtime_gpus)
            if spec.get("device") == "cuda" else None)
    holder = f"{spec.get('bug')} {spec.get('arm')} run {spec.get('run')}"
    with GpuLock(pool, options.runs_per_gpu, options.timeout, holder=holder) as lock:
        log_handle.write(f"device {spec.get('device', 'cpu')}: {lock.how}\n")
        log_handle.flush()
        if options.fork_server and kind.forks and not os.environ.get("SLURM_JOB_ID") and not preload \
                and not spec.get("bindings"):
            try:
                return run_forked(runtime, spec, out, log_handle, harness_env(options.threads, host_packages=kind.host_packages),
                                  lock.device, options.timeout)
            except ServerUnavailable as exc:
                log_handle.write(f"{exc}: this run goes in a process of its own\n")
                log_handle.flush()
        env = harness_env(options.threads, lock.device, kind.host_packages)
        if spec.get("bindings"):  # the loader's record of what the run calls (``harness.loader``)
            env.update(LD_DEBUG="bindings", LD_DEBUG_OUTPUT=spec["bindings"])
        if preload:
            env["LD_PRELOAD"] = " ".join(filter(None, (preload, env.get("LD_PRELOAD"))))
        try:
            return kind.run(runtime, spec, out, env, log_handle, options.timeout)
        except TimeoutError:
            raise RunTimeout(f"timed out after {options.timeout}s") from None


def launch_once(runtime, spec, out, log_handle, train_cfg):
    """A short run that is no run of a bug (a reach trace, an override's check), in a process of
    its own (a fork server pays off over many runs, not one): its exit code, or what stopped it
    (a timeout, no GPU) in words."""
    options = dataclasses.replace(RunOptions.of(train_cfg), fork_server=False)
    try:
        return launch(runtime, spec, out, log_handle, options)
    except RunTimeout as exc:
        return f"timeout ({exc})"
    except NoGpu as exc:
        log_handle.write(f"{exc}\n")
        return f"no GPU ({exc})"
