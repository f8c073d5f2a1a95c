"""Extending bugimpact from outside its package (docs/development.md): the example plugin in
examples/bugimpact-example-plugin, installed as pip installs it (its code and its entry point in
a site folder), adds an artifact source, a runtime kind, a challenge and a metric, and a model for
train.model; a study that uses all five validates and is planned, and one on the plugin's
source, kind, challenge and metric runs, with no file of bugimpact edited."""
import json
import os
import shutil
import subprocess
import sys

import yaml

from bugimpact.io import read_csv
from conftest import ROOT
from workflow import job_counts, project_copy, snakemake

PLUGIN = ROOT / "examples" / "bugimpact-example-plugin"


def dist_info(site, distribution, entry, module):
    """What pip leaves in ``site`` beside an installed package's code: a .dist-info whose
    entry_points.txt names the plugin module (what bugimpact looks for)."""
    info = site / f"{distribution.replace('-', '_')}-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(f"[bugimpact.plugins]\n{entry} = {module}\n")


def installed(site):
    """The example plugin installed in ``site`` (``pip install --target`` makes the same files)."""
    shutil.copytree(PLUGIN / "bugimpact_example", site / "bugimpact_example")
    dist_info(site, "bugimpact-example-plugin", "example", "bugimpact_example.plugin")
    return site


def study_config(work):
    config = yaml.safe_load((ROOT / "tests" / "configs" / "fast.yaml").read_text())
    config["bugs"]["controls"] = {"noise": {
        "label": "3% label noise, on the site's torch",
        "buggy": {"source": "site-torch", "fault": "label_noise"}, "corrected": {"source": "site-torch"}}}
    config["runtime"]["kind"] = "niced"
    config["train"].update(challenge="digits-600", model="bugimpact_example.model:TinyNet", runs=3,
                           epochs=2)
    config["train"]["early_decision"]["enabled"] = False
    config["stats"]["metrics"] = ["accuracy", "kappa"]
    config["train"]["sequential"] = {"metric": "accuracy"}
    path = work / "extended.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def cli(work, env, *args):
    return subprocess.run([sys.executable, "-m", "bugimpact", *args], cwd=work, capture_output=True,
                          text=True, env=dict(os.environ, **env))


def test_a_plugin_adds_a_source_a_runtime_kind_a_challenge_a_metric_and_a_model(tmp_path):
    work = project_copy(tmp_path / "p")
    config = study_config(work)
    site = installed(tmp_path / "site")
    without = {"PYTHONPATH": str(work / "src")}
    plugged = {"PYTHONPATH": os.pathsep.join([str(work / "src"), str(site)])}
    # without the plugin, each new name is refused where it stands
    refused = cli(work, without, "validate-config", str(config))
    assert refused.returncode == 2
    for name in ("'niced' is not one of", "'site-torch' is not one of", "'digits-600' is not one of",
                 "'kappa' is not one of"):
        assert name in refused.stderr, refused.stderr
    # with it installed, the config is valid and the study planned and run, nothing edited
    assert cli(work, plugged, "validate-config", str(config)).returncode == 0
    dry = snakemake(work, "--configfile", str(config), "--dry-run", env=plugged)
    counts = job_counts(dry.stdout)
    assert (counts["artifact"], counts["runtime"], counts["arms"]) == (1, 1, 1), counts
    # and run, on the built-in model: a model is imported inside the runtime, where the local
    # kind has the host's installed packages only (a venv runtime takes it from
    # runtime.requirements: test_release_study's own model)
    built_in = yaml.safe_load(config.read_text())
    built_in["train"]["model"] = "smallcnn"
    config.write_text(yaml.safe_dump(built_in))
    snakemake(work, "--configfile", str(config), env=plugged)
    manifest = next((work / "results" / "artifacts").glob("site-torch/manifest.json"))
    assert json.loads(manifest.read_text())["source"] == "site-torch"
    runtime = next((work / "results" / "runtimes").glob("niced-*/site-torch/runtime.json"))
    assert json.loads(runtime.read_text())["kind"] == "niced"
    records = sorted((work / "results" / "runs" / "noise").rglob("*.json"))
    assert len(records) == 6
    spec = json.loads(records[0].read_text())["spec"]
    assert (spec["model"], spec["challenge"]) == ("smallcnn", "digits-600")
    data = json.loads(next((work / "results" / "data").glob("digits-600*.json")).read_text())
    assert data["source"] == "sklearn digits, first 600" and data["shapes"]["x"][0] == 600
    assert {json.loads(r.read_text())["status"] for r in records} == {"ok"}
    verdicts = read_csv(work / "results" / "calibration" / "stats" / "verdicts.csv")[1]
    assert [v["bug"] for v in verdicts] == ["noise"]
    assert verdicts[0]["verdict"] != "incomplete", verdicts[0]["reason"]
    assert (verdicts[0]["n_buggy"], verdicts[0]["n_corrected"]) == ("3", "3")
    # the plugin's metric is tested beside accuracy, each run's from its confusion counts
    kappa = next(r for r in read_csv(work / "results" / "calibration" / "stats" / "noise.csv")[1]
                 if r["metric"] == "kappa")
    assert kappa["values_compared"] == "exact counts" and kappa["mde_alpha"] == "0.025"  # 2 metrics
    import numpy as np
    corrected = []
    for record in records:
        found = json.loads(record.read_text())
        if found["spec"]["arm"] == "corrected":
            matrix = np.array(found["counts"]["matrix"], dtype=float)
            n = matrix.sum()
            chance = (matrix.sum(axis=0) * matrix.sum(axis=1)).sum() / n ** 2
            corrected.append((np.trace(matrix) / n - chance) / (1 - chance))
    assert abs(float(kappa["mean_corrected"]) - float(np.mean(corrected))) < 1e-12


def test_a_plugin_that_fails_to_import_or_takes_a_name_is_named(tmp_path):
    work = project_copy(tmp_path / "p")
    for name, code, said in (
            ("broken", "import no_such_module\n", "plugin broken (broken_plugin, entry point group "
                                                  "bugimpact.plugins): cannot be imported: "
                                                  "ModuleNotFoundError: No module named 'no_such_module'"),
            ("taker", "from bugimpact.artifacts import source_kinds\n\n"
                      "@source_kinds.register\nclass Mine(source_kinds.Installed):\n    pass\n",
             "artifact source 'installed' is registered already: choose another name")):
        site = tmp_path / f"site-{name}"
        dist_info(site, f"{name}-plugin", name, f"{name}_plugin")
        (site / f"{name}_plugin.py").write_text(code)
        out = cli(work, {"PYTHONPATH": os.pathsep.join([str(work / "src"), str(site)])},
                  "validate-config")
        assert out.returncode != 0 and said in out.stderr, out.stderr[-2000:]
