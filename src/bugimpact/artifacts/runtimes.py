"""Making local and venv runtimes (uv or pip), and what every run's process gets: its GPU and
environment. The kinds themselves (which sources each runs, identity, command) are in ``kinds``;
a run is started by ``launch``.

The harness is started as ``python -m bugimpact.harness`` with only this package's ``src`` on its
path; the spec goes in on standard input and the record comes back as a file.
"""
import fcntl
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ..io import ConfigError, write_json
from ..progress import run_logged
from .common import SRC
from .interpreters import describe, probe, wheel_tags
from .onefix import install_overlay
from .source_kinds import source
from .sources import PROBE, fits, pip_setting

log = logging.getLogger(__name__)


def _probe(python):
    out = subprocess.run([python, "-c", PROBE], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{python}: torch does not import: {out.stderr.strip()[-800:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def prepare_local(artifact, python=sys.executable, kind="local"):
    """The interpreter itself (the host's, or a venv runtime's for the installed torch), as a
    runtime of ``kind`` (the local kind, or one made from it)."""
    if not source(artifact["source"]).on_host:
        raise ConfigError(f"the {kind} runtime can only run the host's own torch, not "
                          f"a {artifact['source']} artifact; use runtime.kind venv or docker",
                          field="runtime.kind")
    return {"kind": kind, "python": python, "probe": _probe(python)}


def prepare_venv(artifact, folder, base_python="python3", requirements=(), installer="uv",
                 cache="data/cache/uv", kind="venv"):
    """A venv per artifact and interpreter: its wheel, numpy and the extra requirements (the
    installed torch: the host's site-packages), then a one-fix artifact's overlay. A venv that was
    not finished (a killed job) is made again.

    ``kind``: the venv kind, or one made from it. ``installer`` uv (default): every package is unpacked once into uv's ``cache`` and the venv's
    files are hard links to it, so a release costs its bytes once however many venvs use it and a
    venv takes seconds; pip: a full copy per venv (the former way, kept for comparison). How a
    venv is made is not part of its identity: both install the same files."""
    _refuse_unfit(artifact, base_python)
    venv = (Path(folder) / "venv").resolve()
    python = venv / "bin" / "python"
    done = venv / ".bugimpact-complete"
    if not done.exists():
        packages = ([artifact["wheel"]] if artifact.get("wheel") else []) + list(requirements)
        system = source(artifact["source"]).on_host
        steps = (_uv_steps if installer == "uv" else _pip_steps)(base_python, venv, packages, system,
                                                                  cache)
        # a second try from nothing: what fails an install once (an entry of uv's cache removed
        # while it was linked, a download cut) is recorded as the runtime's failure only if it
        # fails again
        for attempt in (1, 2):
            shutil.rmtree(venv, ignore_errors=True)
            failure = _install(steps, venv)
            if not failure:
                break
            if attempt == 2:
                raise RuntimeError(failure)
            log.warning("%s; trying once more from nothing", failure)
        done.write_text("")
    runtime = {"kind": kind, "python": str(python), "base_python": base_python}
    if artifact.get("overlay"):  # installed (again, on reuse: idempotent) and checked
        runtime["overlay_installed"] = install_overlay(artifact, _site_packages(python))
    runtime["probe"] = _probe(str(python))
    return runtime


def _refuse_unfit(artifact, python):
    """A wheel this interpreter cannot install (a user's wheel built for another Python) is
    refused here, in words that name both, before an installer refuses it in its own."""
    wheel = artifact.get("wheel")
    if wheel and not fits(wheel, wheel_tags(info := probe(python))):
        raise RuntimeError(f"{Path(wheel).name} is not for {describe(info)}: its tags are "
                           f"{Path(wheel).name[:-4].split('-', 2)[2]}; set runtime.python to an "
                           "interpreter it is for")


def _install(steps, venv):
    """Run the steps that make a venv; what failed, or "" when all of them ran."""
    for cmd, env, what in steps:
        code, output = run_logged(cmd, f"{what} {venv.parent.name}", watch=venv, env=env)
        if code != 0:
            return f"{' '.join(cmd)} failed: {output.strip()[-800:]}"
    return ""


def _pip_steps(base_python, venv, packages, system, cache):
    make = [base_python, "-m", "venv", *(["--system-site-packages"] if system else []), str(venv)]
    steps = [(make, None, "venv")]
    if packages:  # "--": a requirement from a config is a package, never a pip option
        steps.append(([str(venv / "bin" / "python"), "-m", "pip", "install", "--progress-bar", "off",
                       "--", *packages, "numpy"], None, "pip install into venv"))
    return steps


def _uv_steps(base_python, venv, packages, system, cache):
    uv = uv_binary()
    env = uv_environment(cache)
    make = [uv, "venv", "--no-project", "--python", base_python,
            *(["--system-site-packages"] if system else []), str(venv)]
    steps = [(make, env, "uv venv")]
    if packages:
        steps.append(([uv, "pip", "install", "--python", str(venv / "bin" / "python"),
                       "--link-mode", "hardlink", *uv_index_options(), "--", *packages, "numpy"],
                      env, "uv pip install into venv"))
    return steps


def uv_binary():
    """uv, as the ``uv`` package installs it beside this package (or on PATH)."""
    try:
        from uv import find_uv_bin  # the uv package is optional: uv on PATH serves as well
        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found:
            return found
    raise ConfigError("runtime.installer is uv, but uv is not installed "
                      "(pip install uv), or set runtime.installer: pip", field="runtime.installer")


def uv_environment(cache):
    """uv's cache, beside the results (hard links need one file system), and pip's certificate
    bundle for uv's TLS (a proxy's CA, as PIP_CERT gives pip)."""
    env = dict(os.environ, UV_CACHE_DIR=str(Path(cache).resolve()), UV_NO_PROGRESS="1")
    cert = os.environ.get("PIP_CERT") or pip_setting("cert")
    if cert and "SSL_CERT_FILE" not in os.environ:
        env["SSL_CERT_FILE"] = cert
    return env


def uv_index_options():
    """pip's configured indexes and wheel folders, for uv (which does not read pip's config), with
    pip's choice among them: the best version whichever index has it."""
    options = []
    index = os.environ.get("PIP_INDEX_URL") or pip_setting("index-url")
    if index:
        options += ["--index-url", index]
    extra = (os.environ.get("PIP_EXTRA_INDEX_URL") or pip_setting("extra-index-url")).split()
    for url in extra:
        options += ["--extra-index-url", url]
    for place in (os.environ.get("PIP_FIND_LINKS") or pip_setting("find-links")).split():
        options += ["--find-links", place]
    if extra:
        options += ["--index-strategy", "unsafe-best-match"]
    return options


def _site_packages(python):
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def write_runtime(path, runtime):
    write_json(path, runtime)


class NoGpu(RuntimeError):
    """A cuda run found no GPU to run on (none listed, none assigned, or none free in time): the
    job fails with this message and leaves no record, so the run is made once a GPU is there."""


def gpu_pool(env, configured=0, nvidia_smi=("nvidia-smi", "-L"), runtime_gpus=""):
    """The GPUs a cuda run may use, and who chooses among them.

    ``("assigned", [ids])``: an executor gave this job its GPUs (SLURM sets CUDA_VISIBLE_DEVICES
    for a job that asked for them); the run uses them as given, no lock. ``("lock", [ids])``:
    nothing assigns GPUs (a local Snakemake run): the GPUs the user left visible
    (CUDA_VISIBLE_DEVICES), else ``train.gpus`` of them, else every GPU ``nvidia-smi -L`` lists;
    each run claims a free slot of one of them by a lock file. ``runtime_gpus`` (``runtime.gpus``:
    all, a count N (GPUs 0..N-1) or device=ID[,ID]) keeps the lock to those of them."""
    visible = [d for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if env.get("SLURM_JOB_ID"):
        if not visible:
            raise NoGpu("train.device is cuda, but SLURM gave this job no GPU "
                        "(CUDA_VISIBLE_DEVICES is unset): the train and reach_trace rules ask for "
                        "gpu=1; check that the partition has GPUs (gres) and the profile's partition")
        return "assigned", visible
    if visible:
        pool = visible
    elif configured:
        pool = [str(i) for i in range(configured)]
    else:
        found = list_gpus(nvidia_smi)
        if not found:
            raise NoGpu("train.device is cuda, but no GPU was found (nvidia-smi -L lists none): "
                        "set train.gpus, or train.device: cpu")
        pool = [str(i) for i in range(len(found))]
    chosen = gpu_ids(runtime_gpus, pool)
    if not chosen:
        raise NoGpu(f"runtime.gpus {runtime_gpus!r} names none of the GPUs here ({','.join(pool)})")
    return "lock", chosen


def gpu_ids(value, pool):
    """The GPUs of ``pool`` that ``runtime.gpus`` keeps: all of them for "" or all, the first N
    for a count, the listed ones for device=ID[,ID]."""
    value = str(value).strip().strip('"')
    if value in ("", "all"):
        return list(pool)
    if value.isdigit():
        return list(pool)[:int(value)]
    if value.startswith("device="):
        wanted = value[len("device="):].split(",")
        return [d for d in pool if d in wanted]
    raise ValueError(f"runtime.gpus {value!r}: expected all, a number of GPUs, or device=ID[,ID...]")


def list_gpus(nvidia_smi=("nvidia-smi", "-L")):
    """The GPU lines ``nvidia-smi -L`` prints (none where it is missing or fails)."""
    try:
        listed = subprocess.run(list(nvidia_smi), capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line for line in listed.splitlines() if line.startswith("GPU ")]


def gpu_slots(train_cfg, env=None, nvidia_smi=("nvidia-smi", "-L")):
    """How many cuda runs this machine takes at once: its GPUs (as a run would find them) times
    ``train.runs_per_gpu``; a machine without a GPU counts as one (its runs are refused at start)."""
    try:
        _, devices = gpu_pool(os.environ if env is None else env, train_cfg["gpus"], nvidia_smi)
    except NoGpu:
        devices = [None]
    return len(devices) * train_cfg["runs_per_gpu"]


class GpuLock:
    """A GPU for one run: the executor's assignment as given, or a free slot of the local pool
    claimed by a lock file (Snakemake does not hand local jobs a GPU id). Each GPU has
    ``runs_per_gpu`` slots (``train.runs_per_gpu``): small runs leave most of a GPU idle, and
    runs sharing one compute the same bits. Slots are taken breadth first, so runs spread over
    every GPU before any GPU takes a second. ``device`` is what the run's CUDA_VISIBLE_DEVICES
    becomes (None: leave it as it is); ``how`` says which applied.

    The workflow admits as many cuda jobs as there are slots (the ``gpu`` resource, Snakefile), so
    a run waits only for slots held outside it (another study, ``bugimpact check-gpu``): at most
    ``wait_s``, then ``NoGpu`` names the holders."""

    def __init__(self, pool, runs_per_gpu=1, wait_s=None, folder="/tmp", holder=""):
        self.mode, self.devices = pool if pool else (None, [])
        self.slots = [(device, slot) for slot in range(runs_per_gpu) for device in self.devices]
        self.folder, self.handle, self.wait_s, self.holder = folder, None, wait_s, holder
        # An assignment is passed on explicitly: a forked run inherits the server's environment.
        self.device = ",".join(self.devices) if self.mode == "assigned" else None
        self.how = "no GPU" if not pool else f"GPU(s) {self.device} assigned by SLURM"

    def _path(self, device, slot):
        return os.path.join(self.folder, f"bugimpact-gpu-{device}.{slot}.lock")

    def __enter__(self):
        started = time.time()
        while self.mode == "lock":
            for device, slot in self.slots:
                handle = open(self._path(device, slot), "a+")
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    handle.close()
                    continue
                handle.truncate(0)
                handle.write(f"pid {os.getpid()} {self.holder}\n")
                handle.flush()
                self.handle, self.device = handle, device
                sharing = f", slot {slot + 1} of {len(self.slots) // len(self.devices)}"
                self.how = (f"GPU {device} of {','.join(self.devices)}"
                            f"{sharing if len(self.slots) > len(self.devices) else ''}, "
                            "claimed by a local lock")
                return self
            if self.wait_s is not None and time.time() - started >= self.wait_s:
                raise NoGpu(f"no GPU slot came free in {self.wait_s:g} s; held by: "
                            f"{'; '.join(self._holders())}")
            time.sleep(0.2)
        return self

    def _holders(self):
        out = []
        for device, slot in self.slots:
            try:
                with open(self._path(device, slot)) as handle:
                    out.append(f"GPU {device} slot {slot + 1}: {handle.read().strip() or '?'}")
            except OSError:
                pass
        return out

    def __exit__(self, *exc):
        if self.handle is not None:
            fcntl.flock(self.handle, fcntl.LOCK_UN)
            self.handle.close()


def harness_env(threads, device=None, host_packages=False):
    """A harness process's environment: this package's ``src`` first on its path, then, for a
    kind whose runs see the host's packages (``RuntimeKind.host_packages``), the host's own
    PYTHONPATH (where a model's package may be found, as the host found it: ``models``)."""
    env = dict(os.environ)
    path = [str(SRC)] + ([env["PYTHONPATH"]] if host_packages and env.get("PYTHONPATH") else [])
    env.update({"PYTHONHASHSEED": "0", "CUBLAS_WORKSPACE_CONFIG": ":4096:8",
                "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
                "PYTHONPATH": os.pathsep.join(path), "PYTHONDONTWRITEBYTECODE": "1"})
    if device is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(device)
    return env


def made_with(value):
    """The runtime rule's tracked ``requirements`` param as settings: the requirements list alone
    (as it was before the model's needs and kind settings existed), or all of them."""
    return value if isinstance(value, dict) else {"requirements": value}
