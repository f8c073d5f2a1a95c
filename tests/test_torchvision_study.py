"""A torchvision model trained as a user runs configs/torchvision.yaml, made small: ResNet-18 on
real torch 1.5.1 for Python 3.7, each venv given the torchvision released for its torch (0.6.1),
in a release arm and in both arms of a fix isolated on the release."""
import json

import pytest
import yaml
from conftest import ROOT
from workflow import project_copy, snakemake

from bugimpact.io import read_csv

pytestmark = pytest.mark.slow
WHEEL_CACHE = str(ROOT / "data" / "cache" / "wheels")  # one download, shared with the other tests


def test_a_torchvision_model_trains_in_release_and_one_fix_runtimes(tmp_path):
    work = project_copy(tmp_path / "p")
    config = yaml.safe_load((ROOT / "configs" / "torchvision.yaml").read_text())
    config["bugs"]["controls"] = {"aa-1.5.1": config["bugs"]["controls"]["aa-1.5.1"]}
    config["artifacts"] = {"wheel_cache": WHEEL_CACHE}
    config["train"].update(runs=3, epochs=1)
    (work / "small.yaml").write_text(yaml.safe_dump(config))
    snakemake(work, "--configfile", "small.yaml")
    runtimes = [json.loads(p.read_text()) for p in (work / "results" / "runtimes").rglob("runtime.json")]
    assert len(runtimes) == 3  # the release, and the fix's two arms
    assert {json.dumps(r.get("model_requirements")) for r in runtimes} == {'{"torchvision": "0.6.1"}'}
    found = [json.loads(p.read_text()) for p in (work / "results" / "runs").rglob("*.json")]
    assert found and {(r["status"], r["spec"]["model"], r["environment"]["torchvision"]) for r in found} == {
        ("ok", "torchvision.resnet18", "0.6.1")}
    verdicts = {r["bug"]: r for r in read_csv(work / "results" / "torchvision" / "stats" / "verdicts.csv")[1]}
    assert verdicts["aa-1.5.1"]["verdict"] == "not triggered"
    # ResNet-18 pads with zeros: the circular padding #37881 fixed never runs, and the runs agree
    assert verdicts["pr37881"]["verdict"] == "not triggered"
    assert verdicts["pr37881"]["reach"] == "not reached", verdicts["pr37881"]["reach_detail"]
    again = snakemake(work, "--configfile", "small.yaml")
    assert "Nothing to be done" in again.stdout + again.stderr
