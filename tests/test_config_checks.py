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

from bugimpact.config import validate_config
from bugimpact.io import InputError

from conftest import ROOT, config_with


def default():
    return yaml.safe_load((ROOT / "config.yaml").read_text())


@pytest.mark.parametrize("dotted, value, message", [
    ("train.lr", math.nan, "key 'train.lr': nan is not a finite number"),
    ("train.momentum", math.inf, "key 'train.momentum': inf is not a finite number"),
    ("stats.min_effect", math.nan, "key 'stats.min_effect': nan is not a finite number"),
    ("stats.metrics", [], "key 'stats.metrics': [] should be non-empty"),
    ("stats.metrics", ["accuracy", "accuracy"], "key 'stats.metrics': ['accuracy', 'accuracy'] has non-unique elements"),
    ("mine.section_patterns", ["Bug (Fixes"], "key 'mine.section_patterns[0]': not a regular expression"),
    ("mine.versions", ">=1.1.0,<<1.7", "key 'mine.versions': '>=1.1.0,<<1.7' is not a version range"),
])
def test_a_bad_value_is_refused_naming_its_key(dotted, value, message):
    with pytest.raises(InputError, match=re.escape(message)):
        config_with(**{dotted: value})


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
    out = subprocess.run([sys.executable, "-m", "bugimpact.cli", "validate-config", str(path)],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 2 and "key 'train.lr': nan is not a finite number" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_diverged_run_is_a_failed_measurement_not_a_fingerprint(tmp_path):
    from bugimpact.datasets import prepare
    from bugimpact.train import train_one
    meta = prepare("digits", tmp_path / "digits.npz", tmp_path / "digits.json")
    spec = {"bug": "t", "arm": "buggy", "run": 0, "seed": 3, "model": "smallcnn",
            "challenge": "digits", "data": str(tmp_path / "digits.npz"), "data_sha256": meta["sha256"],
            "epochs": 2, "batch_size": 32, "lr": 1e12, "momentum": 0.9, "threads": 1,
            "test_fraction": 0.25}
    runtime = {"kind": "local", "python": sys.executable}
    out, log = tmp_path / "r.json", tmp_path / "r.log"
    assert train_one(spec, out, log, runtime, retries=2) == "failed"
    record = json.loads(out.read_text())
    assert record["status"] == "failed" and record["failure_class"] == "diverged"
    assert record["exit_codes"] == [5]  # the same seed diverges again: not retried
    assert "diverged: loss nan" in record["log_tail"] or "diverged: loss inf" in record["log_tail"] \
        or "is not finite" in record["log_tail"]
