"""``bugimpact check-gpu``: its one line on a machine without a GPU, and every measurement it
makes, run here on the CPU (the same code, with device cpu; on a GPU, tests/test_gpu.py)."""
import json
import subprocess
import sys

import pytest
from conftest import ROOT

from bugimpact import gpucheck
from bugimpact.artifacts.runtimes import list_gpus
from bugimpact.config import load_config


def test_without_a_gpu_it_says_so_in_one_line_and_fails(tmp_path):
    if list_gpus():
        pytest.skip("this machine has a GPU")
    out = subprocess.run([sys.executable, "-m", "bugimpact", "--config",
                          str(ROOT / "config.yaml"), "check-gpu"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.strip().splitlines() == [
        "bugimpact check-gpu: no GPU on this machine (nvidia-smi -L lists none): nothing to check; "
        "GPU studies need a machine with one"]
    assert not (tmp_path / "results").exists()  # nothing made before the refusal


def test_the_check_measures_determinism_the_floor_and_sharing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no prepared data here: random pixels in the digits' shapes
    config = load_config(str(ROOT / "config.yaml"))
    result = gpucheck.check(config, device="cpu", epochs=1, shares=(1, 2), out_dir="checks")
    det = result["determinism"]
    assert det["identical"] and det["first_divergence_epoch"] is None and det["epoch_s"] > 0
    floor = result["floor"]
    flops = floor["flops"]
    assert flops["train_images"] == 1347 and flops["test_images"] == 450
    # a training image costs about three forward passes (forward and two backward products)
    per_train, per_test = flops["train"] / 1347, flops["test"] / 450
    assert 2.5 < per_train / per_test < 3.5
    assert 0 < floor["floor_s"] < det["epoch_s"] and floor["matmul_flops_per_s"] > 1e8
    assert [r["runs_per_gpu"] for r in result["sharing"]] == [1, 2]
    for row in result["sharing"]:
        assert row["study_run_s"] == pytest.approx(row["fixed_s"] + 15 * row["epoch_s"])
        assert row["runs_per_gpu_hour"] == pytest.approx(3600 * row["runs_per_gpu"] / row["study_run_s"])
    assert result["recommended_runs_per_gpu"] == gpucheck.recommend(result["sharing"])
    written = json.loads((tmp_path / result["path"]).read_text())
    assert written["sharing"] == result["sharing"] and result["path"].startswith("checks/cpu-smallcnn-digits-e15-")
    text = gpucheck.text(result)
    assert "bit-identical" in text and "recommended: train.runs_per_gpu:" in text
    assert "% of that rate" in text
    assert gpucheck._duration(2.92) == "2.92 s" and gpucheck._duration(5.8e-5) == "58 µs"  # small models' floors


def test_the_recommendation_is_the_smallest_share_near_the_best():
    rows = [{"runs_per_gpu": 1, "runs_per_gpu_hour": 100.0}, {"runs_per_gpu": 2, "runs_per_gpu_hour": 130.0},
            {"runs_per_gpu": 4, "runs_per_gpu_hour": 110.0}]
    assert gpucheck.recommend(rows) == 2
    rows[2]["runs_per_gpu_hour"] = 140.0  # 4 is best, but 2 is within 10% of it
    assert gpucheck.recommend(rows) == 2
    rows[2]["runs_per_gpu_hour"] = 390.0  # small runs: sharing pays
    assert gpucheck.recommend(rows) == 4
    rows[2] = {"runs_per_gpu": 4, "error": "the share4-0 run failed (exit 1): CUDA out of memory"}
    assert gpucheck.recommend(rows) == 2  # what did not fit is never recommended
