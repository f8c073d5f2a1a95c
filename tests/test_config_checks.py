"""Every config value is checked at start, in one place that the workflow and validate-config
share (issue: NaN and inf accepted, an empty metric list, a metric twice, a bad regex or version
range, a version with '/', a fix id equal to a control id, each failing late or never)."""
import json
import math
import re
import subprocess
import sys

import pytest
import yaml
from conftest import ROOT, config_with

from bugimpact.config import validate_config
from bugimpact.io import InputError


def default():
    return yaml.safe_load((ROOT / "config.yaml").read_text())


def test_an_override_checks_run_records_where_it_diverged(tmp_path):
    """A check's run (``record_divergence``) is a measurement of a build, and a fix's arm may
    diverge where the release trains (pr32062 on 1.5.0): it stops there and its record says where,
    with the fingerprints it has; a bug's run still fails."""
    from bugimpact.challenges import prepare
    from bugimpact.harness.run import execute
    meta = prepare("digits", tmp_path / "digits.npz", tmp_path / "digits.json")
    spec = {"bug": "__check__", "arm": "check", "run": 0, "seed": 3, "model": "smallcnn", "challenge": "digits",
            "data": str(tmp_path / "digits.npz"), "data_sha256": meta["sha256"], "epochs": 1, "batch_size": 32,
            "lr": 1e12, "momentum": 0.9, "threads": 1, "test_fraction": 0.25, "max_steps": 20,
            "record_divergence": True}
    assert execute(spec, str(tmp_path / "check.json")) == 0
    record = json.loads((tmp_path / "check.json").read_text())
    assert re.match(r"(loss (nan|inf) at epoch 1, step \d+|parameter .* is not finite)", record["diverged"])
    assert record["fingerprints"]["epochs"] == [] and len(record["fingerprints"]["logits"]) == 64
    assert execute(dict(spec, record_divergence=False), str(tmp_path / "run.json")) == 5


@pytest.mark.parametrize("dotted, value, message", [
    ("train.lr", math.nan, "key 'train.lr': nan is not a finite number"),
    ("train.momentum", math.inf, "key 'train.momentum': inf is not a finite number"),
    ("stats.min_effect", math.nan, "key 'stats.min_effect': nan is not a finite number"),
    ("stats.metrics", [], "key 'stats.metrics': [] should be non-empty"),
    ("stats.metrics", ["accuracy", "accuracy"], "key 'stats.metrics': ['accuracy', 'accuracy'] has non-unique elements"),
    ("mine.section_patterns", ["Bug (Fixes"], "key 'mine.section_patterns[0]': not a regular expression"),
    ("mine.versions", ">=1.1.0,<<1.7", "key 'mine.versions': '>=1.1.0,<<1.7' is not a version range"),
    ("train.model", "resnet50", "key 'train.model': unknown model 'resnet50'"),
    ("train.sequential", {"enabled": True, "stages": [10, 5]},
     "key 'train.sequential.stages': [10, 5] do not increase"),
    ("train.sequential", {"enabled": True, "stages": [5, 5]},
     "key 'train.sequential.stages': [5, 5] do not increase"),
])
def test_a_bad_value_is_refused_naming_its_key(dotted, value, message):
    with pytest.raises(InputError, match=re.escape(message)):
        config_with(**{dotted: value})


def test_a_group_sequential_design_tests_paired_seeds():
    with pytest.raises(InputError, match=re.escape(
            "key 'train.sequential.enabled': the group-sequential design tests paired seeds")):
        config_with(**{"train.sequential": {"enabled": True}, "train.seed_policy": "fixed"})


def test_the_monitored_metric_is_one_of_those_tested():
    with pytest.raises(InputError, match=re.escape(
            "key 'train.sequential.metric': 'f1' is not among the metrics tested (stats.metrics: "
            "accuracy, recall)")):
        config_with(**{"stats.metrics": ["accuracy", "recall"], "train.sequential.metric": "f1"})
    assert config_with()["train"]["sequential"]["metric"] == "accuracy"


def test_a_pypi_version_is_a_version_and_ids_are_used_once():
    config = default()
    config["bugs"]["controls"]["aa"]["buggy"] = {"source": "pypi", "version": "1.5/../../x"}
    with pytest.raises(InputError, match=r"key 'bugs.controls.aa.buggy.version'"):
        validate_config(config)
    config = default()
    config["bugs"]["fixes"] = {"aa": {"release": {"source": "pypi", "version": "1.5.1"},
                                      "patch": "data/patches/pytorch/pr37881.diff"}}
    with pytest.raises(InputError, match="key 'bugs.fixes.aa': the id is also a control"):
        validate_config(config)


def test_validate_config_refuses_what_the_workflow_refuses(tmp_path):
    config = default()
    config["train"]["lr"] = float("nan")
    path = tmp_path / "nan.yaml"
    path.write_text(yaml.safe_dump(config))
    out = subprocess.run([sys.executable, "-m", "bugimpact", "validate-config", str(path)],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 2 and "key 'train.lr': nan is not a finite number" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_diverged_run_is_a_failed_measurement_not_a_fingerprint(tmp_path):
    from bugimpact.challenges import prepare
    from bugimpact.train import RunOptions, train_one
    meta = prepare("digits", tmp_path / "digits.npz", tmp_path / "digits.json")
    spec = {"bug": "t", "arm": "buggy", "run": 0, "seed": 3, "model": "smallcnn",
            "challenge": "digits", "data": str(tmp_path / "digits.npz"), "data_sha256": meta["sha256"],
            "epochs": 2, "batch_size": 32, "lr": 1e12, "momentum": 0.9, "threads": 1,
            "test_fraction": 0.25}
    runtime = {"kind": "local", "python": sys.executable}
    out, log = tmp_path / "r.json", tmp_path / "r.log"
    assert train_one(spec, out, log, runtime, RunOptions(retries=2)) == "failed"
    record = json.loads(out.read_text())
    assert record["status"] == "failed" and record["failure_class"] == "diverged"
    assert record["exit_codes"] == [5]  # the same seed diverges again: not retried
    assert "diverged: loss nan" in record["log_tail"] or "diverged: loss inf" in record["log_tail"] \
        or "is not finite" in record["log_tail"]


@pytest.mark.parametrize("dotted, value, message", [
    ("sheet", "data", "key 'sheet': data is a folder, not the sheet's CSV file"),
    ("mine.snapshot", "data/release_notes/pytorh", "key 'mine.snapshot': data/release_notes/pytorh does not exist"),
    ("mine.tags", ["v1.5.1", "v1.5.O"], "key 'mine.tags': v1.5.O not in data/release_notes/pytorch"),
    ("resolve.known", "data/known_commits/missing.csv", "key 'resolve.known': data/known_commits/missing.csv is not a file"),
])
def test_a_wrong_path_is_refused_at_the_start_by_the_workflow_and_validate_config(
        tmp_path, dotted, value, message):
    """Before: a folder as the sheet, a misspelt tag, a missing snapshot or known-commits file
    failed late with a traceback, warned in a log, or was ignored once outputs existed."""
    from bugimpact.config import check_paths
    config = config_with(**{dotted: value})
    import os
    here = os.getcwd()
    os.chdir(ROOT)
    try:
        with pytest.raises(InputError, match=re.escape(message)):
            check_paths(config)
    finally:
        os.chdir(here)
    path = tmp_path / "bad.yaml"
    raw = default()
    node = raw
    *keys, last = dotted.split(".")
    for key in keys:
        node = node[key]
    node[last] = value
    path.write_text(yaml.safe_dump(raw))
    out = subprocess.run([sys.executable, "-m", "bugimpact", "validate-config", str(path)],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr
    dry = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--configfile",
                          str(path)], capture_output=True, text=True, cwd=ROOT)
    assert dry.returncode != 0 and message in dry.stdout + dry.stderr


def test_a_misspelt_tag_stops_mining_from_the_api_too():
    from bugimpact.mine.releases import select_releases
    releases = [{"tag_name": "v1.5.0"}, {"tag_name": "v1.4.0"}]
    assert [r["tag_name"] for r in select_releases(releases, ["v1.5.0"])] == ["v1.5.0"]
    with pytest.raises(InputError, match=r"field 'mine.tags'.*v1.5.O"):
        select_releases(releases, ["v1.5.0", "v1.5.O"])


def test_cuda_on_a_machine_without_a_gpu_is_refused_at_the_start(tmp_path):
    from bugimpact.preflight import require_gpu
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho 'No devices were found'\n")
    fake.chmod(0o755)
    with pytest.raises(InputError, match="train.device is cuda, but this machine shows no GPU"):
        require_gpu(str(fake))
    with pytest.raises(InputError, match="train.device"):
        require_gpu(str(tmp_path / "absent"))
    fake.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)'\n")
    import os
    if os.environ.get("CUDA_VISIBLE_DEVICES") not in ("", "-1"):
        require_gpu(str(fake))  # a GPU: nothing to say


def test_a_cuda_study_without_a_gpu_stops_before_any_job_but_a_dry_run_plans_it(tmp_path):
    import shutil
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has nvidia-smi")
    path = tmp_path / "cuda.yaml"
    raw = default()
    raw["train"]["device"] = "cuda"
    path.write_text(yaml.safe_dump(raw))
    dry = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--configfile",
                          str(path)], capture_output=True, text=True, cwd=ROOT)
    assert dry.returncode == 0, dry.stderr[-2000:]
    work = tmp_path / "p"
    from workflow import project_copy
    project_copy(work)
    real = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--configfile",
                           str(path)], capture_output=True, text=True, cwd=work)
    assert real.returncode != 0 and "this machine shows no GPU" in real.stdout + real.stderr
    assert not (work / "results").exists()


def test_an_inf_metric_is_a_failed_measurement_in_a_sequential_look_too(tmp_path):
    """Before: the look used inf as a value (and could stop on it); the final analysis dropped it."""
    from bugimpact.steps import stage, study_design
    records = []
    for i in range(4):
        for arm, acc in (("buggy", 0.5), ("corrected", 0.9)):
            record = {"status": "ok", "record_schema": 1, "spec": {"arm": arm, "run": i},
                      "metrics": {"accuracy": math.inf if (arm, i) == ("buggy", 2) else acc + i / 100},
                      "fingerprints": {}}
            path = tmp_path / f"{arm}{i}.json"
            path.write_text(json.dumps(record))
            records.append(str(path))
    design = study_design({"runs": 8, "seed_policy": "paired",
                           "sequential": {"enabled": True, "stages": [4], "spending": "pocock",
                                          "futility_power": None, "metric": "accuracy"}})
    stats = {"metrics": ["accuracy"], "alpha": 0.05, "power": 0.8, "min_effect": 0.0}
    decision = stage(stats, design, "b", 4, records, str(tmp_path / "look.json"))
    assert decision["decision"] == "continue"
    assert decision["reason"] == "accuracy is not a finite number in buggy run 2"


def test_a_look_uses_the_runs_the_final_analysis_uses(tmp_path):
    """A run whose reported-only metric is not a number is dropped by the final analysis. Before,
    the look checked the monitored metric alone, so it stopped the bug for impact on 8 pairs
    while the analysis of the same records tested 7."""
    from bugimpact.stats.analysis import analyse_bug
    from bugimpact.steps import sequential_options, stage, study_design
    records, paths = [], []
    for i in range(8):
        for arm, acc in (("buggy", 0.5), ("corrected", 0.9)):
            f1 = math.nan if (arm, i) == ("corrected", 5) else acc
            record = {"status": "ok", "record_schema": 1, "spec": {"arm": arm, "run": i},
                      "metrics": {"accuracy": acc + i / 100, "f1": f1}, "fingerprints": {}}
            paths.append(tmp_path / f"{arm}{i}.json")
            paths[-1].write_text(json.dumps(record))
            records.append(record)
    design = study_design({"runs": 16, "seed_policy": "paired",
                           "sequential": {"enabled": True, "stages": [8, 16], "spending": "pocock",
                                          "futility_power": None, "metric": "accuracy"}})
    stats = {"metrics": ["accuracy", "f1"], "alpha": 0.05, "power": 0.8, "min_effect": 0.0}
    decision = stage(stats, design, "b", 8, [str(p) for p in paths], str(tmp_path / "look.json"))
    assert decision["decision"] == "continue"
    assert decision["reason"] == "f1 is not a finite number in corrected run 5"
    _, info = analyse_bug("b", [dict(r, fingerprints={"init": "x", "epochs": [], "predictions": "y"})
                                for r in records], stats["metrics"], 16, "paired",
                          sequential=sequential_options(design, stats))
    assert info["pairs"] == 7 and info["sequential"] is None  # 7 pairs are no stage of the design
    # what the look said before: impact, on the monitored metric of all 8 pairs
    before = stage(dict(stats, metrics=["accuracy"]), design, "b", 8, [str(p) for p in paths],
                   str(tmp_path / "before.json"))
    assert before["decision"] == "impact"


def test_an_empty_mapping_given_with_config_that_empties_nothing_is_refused(tmp_path):
    """``--config bugs={controls: {}}`` is merged into config.yaml's controls key by key and
    removes none: a test meant as a study of one sheet row ran the three controls beside it
    (stop 77's CI). Refused at the start, naming the key; emptied in a config file, it is taken."""
    from bugimpact.config import emptied_in_vain
    config = config_with()
    assert emptied_in_vain({"bugs": {"controls": {}}}, config) == ["bugs.controls"]
    assert emptied_in_vain({"bugs": {"controls": {"aa": {}}}}, config) == ["bugs.controls.aa"]
    # empty already (bugs.fixes), or a value that replaces (runs, a list): nothing in vain
    assert emptied_in_vain({"bugs": {"fixes": {}}, "train": {"runs": 3}, "stats": {"metrics": []}},
                           config) == []
    dry = [sys.executable, "-m", "snakemake", "-n", "--cores", "1"]
    out = subprocess.run(dry + ["--config", "bugs={controls: {}}"], capture_output=True, text=True,
                         cwd=ROOT)
    assert out.returncode != 0 and "bugs.controls={} empties nothing" in out.stdout + out.stderr
    raw = default()
    raw["bugs"]["controls"] = {}
    path = tmp_path / "no-controls.yaml"
    path.write_text(yaml.safe_dump(raw))
    out = subprocess.run(dry + ["--configfile", str(path), "--config", "bugs={controls: {}}"],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
