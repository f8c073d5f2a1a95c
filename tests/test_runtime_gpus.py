"""runtime.gpus and a docker run's GPU, on a fake four-GPU host (an ``nvidia-smi`` that lists
four): the container gets exactly the GPU its run's lock claimed, numbered 0 inside, also when
runtime.gpus is left at its default; runtime.gpus keeps the lock to the GPUs it names, read when
the run starts (the runtime record keeps no copy of it). The engine is the one fake part: no GPU
runs a container here."""
import os
import stat

import pytest

from bugimpact.artifacts import docker
from bugimpact.artifacts.launch import RunOptions, launch
from bugimpact.artifacts.runtimes import GpuLock, NoGpu, gpu_ids, gpu_pool


@pytest.fixture
def four_gpu_host(tmp_path, monkeypatch):
    """``nvidia-smi -L`` lists four GPUs; nothing assigns them (no SLURM, nothing hidden); the
    runs' lock files in a folder of this test's own."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\n" + "".join(f"echo 'GPU {i}: NVIDIA H100 (UUID: GPU-{i})'\n" for i in range(4)))
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    for name in ("CUDA_VISIBLE_DEVICES", "SLURM_JOB_ID"):
        monkeypatch.delenv(name, raising=False)
    locks = tmp_path / "locks"
    locks.mkdir()
    original = GpuLock.__init__

    def in_test_folder(self, pool, runs_per_gpu=1, wait_s=None, folder="/tmp", holder=""):
        original(self, pool, runs_per_gpu, wait_s, str(locks), holder)
    monkeypatch.setattr(GpuLock, "__init__", in_test_folder)
    return locks


@pytest.fixture
def engine(monkeypatch):
    """What a docker run asks of the engine."""
    asked = []

    class Recording:
        def run(self, image, command, **settings):
            asked.append(settings)
            return 0
    monkeypatch.setattr(docker, "Engine", Recording)
    return asked


def docker_run(tmp_path, options, device="cuda"):
    spec = {"device": device, "data": str(tmp_path / "data.npz"), "bug": "b", "arm": "buggy", "run": 0}
    with open(tmp_path / "run.log", "a") as log:
        return launch({"kind": "docker", "image": "bugimpact-runtime:x"}, spec, tmp_path / "runs" / "0.json",
                      log, options)


def test_a_docker_run_gets_the_gpu_its_lock_claimed_numbered_from_0_inside(tmp_path, four_gpu_host, engine):
    # by default: the GPU the lock hands out (before: none at all, runtime.gpus "" asked for none)
    assert docker_run(tmp_path, RunOptions()) == 0
    [request] = engine[-1]["device_requests"]
    assert request["DeviceIDs"] == ["0"]
    # the host's number never goes in: inside, the container's one GPU is GPU 0 (before, a run
    # that claimed GPU 2 was told CUDA_VISIBLE_DEVICES=2 in a container that has only GPU 0)
    assert "CUDA_VISIBLE_DEVICES" not in engine[-1]["environment"]
    # runtime.gpus keeps the lock to the GPUs it names: GPU 2 held by another run, so 3
    with GpuLock(("lock", ["2"]), holder="another run"):
        assert docker_run(tmp_path, RunOptions(runtime_gpus="device=2,3")) == 0
    assert engine[-1]["device_requests"][0]["DeviceIDs"] == ["3"]
    assert "CUDA_VISIBLE_DEVICES" not in engine[-1]["environment"]
    # a CPU run's container gets no GPU
    assert docker_run(tmp_path, RunOptions(), device="cpu") == 0
    assert engine[-1]["device_requests"] == []


def test_runtime_gpus_chooses_among_the_gpus_here(four_gpu_host):
    assert gpu_pool({}) == ("lock", ["0", "1", "2", "3"])
    assert gpu_pool({}, runtime_gpus="2") == ("lock", ["0", "1"])
    assert gpu_pool({}, runtime_gpus='"device=1,3"') == ("lock", ["1", "3"])
    assert gpu_pool({"CUDA_VISIBLE_DEVICES": "2,3"}, runtime_gpus="all") == ("lock", ["2", "3"])
    with pytest.raises(NoGpu, match=r"runtime.gpus 'device=7' names none of the GPUs here \(0,1,2,3\)"):
        gpu_pool({}, runtime_gpus="device=7")
    with pytest.raises(ValueError, match="runtime.gpus 'some'"):
        gpu_ids("some", ["0"])
    # under SLURM the job's GPU is the scheduler's, whatever runtime.gpus says
    assert gpu_pool({"SLURM_JOB_ID": "7", "CUDA_VISIBLE_DEVICES": "5"}, runtime_gpus="1") == ("assigned", ["5"])
