"""On a CUDA device (skipped cleanly without one): determinism across processes for the small CNN
and VGG-X, the paper's adaptive pooling flagged, batches gathered on the GPU, runs sharing a GPU,
a reach trace listing CUDA kernels, and a ``device: cuda`` study to its verdicts."""
import csv
import json
import os
import threading
from pathlib import Path

import numpy as np
import pytest
from workflow import project_copy, snakemake

from bugimpact.artifacts.launch import RunOptions, launch
from bugimpact.artifacts.runtimes import prepare_local
from bugimpact.challenges import prepare
from bugimpact.reach.batch import shaped_data, trace_in
from bugimpact.stats.decisions import first_divergence

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gpu")
    meta = prepare("digits", folder / "digits.npz", folder / "digits.json")
    cifar = shaped_data("cifar10", folder / "cifar.npz", 2048, 512)
    return {"digits": (folder / "digits.npz", meta["sha256"]), "cifar10": (cifar, None)}


def spec(data, challenge="digits", **over):
    npz, sha = data[challenge]
    base = {"bug": "gpu", "arm": "buggy", "run": 0, "seed": 7, "model": "smallcnn",
            "challenge": challenge, "data": str(npz), "data_sha256": sha, "epochs": 2,
            "batch_size": 32, "lr": 0.05, "momentum": 0.9, "threads": 1, "test_fraction": 0.25,
            "device": "cuda"}
    base.update(over)
    return base


def run(tmp_path, spec_, name, options=None):
    out = tmp_path / f"{name}.json"
    with open(tmp_path / f"{name}.log", "w") as log:
        assert launch(prepare_local({"source": "installed"}), spec_, out, log, options) == 0, \
            (tmp_path / f"{name}.log").read_text()[-2000:]
    return json.loads(out.read_text())


@pytest.mark.parametrize("model", ["smallcnn", "vggx"])
def test_one_seed_in_two_processes_is_bit_identical_on_the_gpu(tmp_path, data, model):
    over = {"model": "vggx", "challenge": "cifar10", "epochs": 1, "batch_size": 64} if model == "vggx" else {}
    a = run(tmp_path, spec(data, **over), "a")
    b = run(tmp_path, spec(data, **over), "b")
    assert first_divergence(a, b) is None and a["metrics"] == b["metrics"]
    assert a["environment"]["device"] == "cuda" and not a["nondeterministic_ops"]


def test_the_papers_adaptive_pooling_is_flagged_on_the_gpu(tmp_path, data):
    record = run(tmp_path, spec(data, "cifar10", model="vggx", epochs=1, batch_size=64,
                                pooling="adaptive"), "adaptive")
    assert any("adaptive_avg_pool2d_backward" in op for op in record["nondeterministic_ops"])


def test_batches_gathered_on_the_gpu_are_the_host_batches(data):
    import torch

    from bugimpact.harness import data as harness_data
    from bugimpact.harness.run import device_batches
    dataset = harness_data.load(str(data["digits"][0]), data["digits"][1], 0.25)
    x, y = dataset["x_train"], dataset["y_train"]
    on_gpu = (torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda())
    host = list(harness_data.batches(x, y, 32, np.random.RandomState(1)))
    for (hx, hy), (gx, gy) in zip(host, device_batches(on_gpu, (x, y), 32, np.random.RandomState(1))):
        assert gx.is_cuda and hx.tobytes() == gx.cpu().numpy().tobytes()
        assert hy.tobytes() == gy.cpu().numpy().tobytes()


def test_runs_sharing_a_gpu_compute_what_they_compute_alone(tmp_path, data):
    alone = [run(tmp_path, spec(data, run=i, seed=i, epochs=3), f"alone{i}") for i in range(2)]
    shared = [None, None]
    options = RunOptions(runs_per_gpu=2, gpus=1)

    def one(i):
        shared[i] = run(tmp_path, spec(data, run=i, seed=i, epochs=3), f"shared{i}", options)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for a, s in zip(alone, shared):
        assert first_divergence(a, s) is None
    logs = [(tmp_path / f"shared{i}.log").read_text() for i in range(2)]
    assert sum("slot 2 of 2" in log for log in logs) == 1  # at once, in the GPU's two slots


def test_a_cuda_reach_trace_lists_cuda_kernels(tmp_path, data):
    import sys
    train = {"model": "smallcnn", "challenge": "digits", "epochs": 1, "batch_size": 32,
             "test_batch_size": 1000, "optimizer": "sgd", "lr": 0.05, "momentum": 0.9,
             "lr_schedule": "constant", "pooling": "deterministic", "seed_policy": "paired",
             "study_seed": 1, "threads": 1, "device": "cuda", "allow_tf32": False, "augment": False,
             "test_fraction": 0.25}
    ops = {}
    for device in ("cuda", "cpu"):
        trace_in(sys.executable, dict(train, device=device), tmp_path / f"{device}.json", steps=3,
                 data=str(data["digits"][0]))
        ops[device] = set(json.loads((tmp_path / f"{device}.json").read_text())["ops"])
    # the model's shape probe convolves on the CPU in both, so the CPU kernel is in both traces
    assert "cudnn_convolution" in ops["cuda"] and "cudnn_convolution" not in ops["cpu"]
    assert "cudaLaunchKernel" in ops["cuda"] and "_slow_conv2d_forward" in ops["cpu"]


@pytest.mark.slow
def test_the_default_study_on_the_gpu_reaches_its_verdicts(tmp_path):
    work = project_copy(tmp_path / "p")
    snakemake(work, "--cores", str(os.cpu_count()), "--config", "train={device: cuda}")
    with open(work / "results" / "calibration" / "stats" / "verdicts.csv") as handle:
        verdicts = {row["bug"]: row for row in csv.DictReader(handle)}
    assert verdicts["aa"]["verdict"] == "not triggered"
    assert verdicts["fault-momentum"]["verdict"] == "impact"
    assert verdicts["fault-labelnoise"]["verdict"] == "impact"
    records = list(Path(work, "results", "runs", "fault-momentum").glob("*/*/*.json"))
    assert records and all(json.loads(p.read_text())["environment"]["device"] == "cuda" for p in records)
