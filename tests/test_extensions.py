"""Extending bugimpact from outside its package (docs/development.md): the example plugin in
examples/bugimpact-example-plugin, installed as pip installs it (its code and its entry point in
a site folder), adds an artifact source and a runtime kind, each with settings of its own under the
schema it contributes, a challenge with its own raw file, a metric, and a model for train.model; a
study on all of them validates, passes preflight, trains the plugin's model and is kept or redone
exactly as its inputs say, with no file of bugimpact edited."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import yaml
from conftest import ROOT
from workflow import job_counts, project_copy, snakemake

from bugimpact.io import read_csv

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


def study_config(work, **changes):
    config = yaml.safe_load((ROOT / "tests" / "configs" / "fast.yaml").read_text())
    config["bugs"]["controls"] = {"noise": {
        "label": "3% label noise, on the site's torch",
        "buggy": {"source": "site-torch", "fault": "label_noise"}, "corrected": {"source": "site-torch"}}}
    config["runtime"].update(kind="niced", niced={"priority": 7})
    config["artifacts"] = {"site-torch": {"module": "torch/site"}}
    config["data"] = {"digits-subset": "subset.txt"}
    config["train"].update(challenge="digits-subset", model="bugimpact_example.model:TinyNet", runs=3,
                           epochs=2)
    config["train"]["early_decision"]["enabled"] = False
    config["stats"]["metrics"] = ["accuracy", "kappa"]
    config["train"]["sequential"] = {"metric": "accuracy"}
    for dotted, value in changes.items():
        *parents, leaf = dotted.split(".")
        node = config
        for key in parents:
            node = node[key]
        node[leaf] = value
    path = work / "extended.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def cli(work, env, *args):
    return subprocess.run([sys.executable, "-m", "bugimpact", *args], cwd=work, capture_output=True,
                          text=True, env=dict(os.environ, **env))


def test_a_plugin_adds_a_source_a_runtime_kind_a_challenge_a_metric_and_a_model(tmp_path):
    work = project_copy(tmp_path / "p")
    (work / "subset.txt").write_text("".join(f"{i}\n" for i in range(600)))
    config = study_config(work)
    site = installed(tmp_path / "site")
    without = {"PYTHONPATH": str(work / "src")}
    plugged = {"PYTHONPATH": os.pathsep.join([str(work / "src"), str(site)])}
    # without the plugin, each new name, and each new settings key, is refused where it stands
    refused = cli(work, without, "validate-config", str(config))
    assert refused.returncode == 2
    for name in ("'niced' is not one of", "'site-torch' is not one of", "'digits-subset' is not one of",
                 "'kappa' is not one of"):
        assert name in refused.stderr, refused.stderr
    # with it installed, the config is valid; a setting its schema does not take is refused by key
    assert cli(work, plugged, "validate-config", str(config)).returncode == 0, config
    for key, value, said in (("runtime.niced.priority", 40, "key 'runtime.niced.priority': 40 is greater than the maximum of 19"),
                             ("artifacts.site-torch.module", 5, "key 'artifacts.site-torch.module': 5 is not of type 'string'"),
                             ("runtime.niced.speed", 1, "key 'runtime.niced': unknown key(s) 'speed'")):
        wrong = cli(work, plugged, "validate-config", str(study_config(work, **{key: value})))
        assert wrong.returncode == 2 and said in wrong.stderr, wrong.stderr
    config = study_config(work)
    # preflight asks the plugin's challenge about its raw file (it was taken for MNIST's folder)
    assert cli(work, plugged, "preflight", "--config", str(config)).returncode == 0
    (work / "subset.txt").write_text("1\n2\n9999\n")
    bad = cli(work, plugged, "preflight", "--config", str(config))
    assert bad.returncode != 0 and "line(s) are not an index of digits' 1797 images" in bad.stdout + bad.stderr
    (work / "subset.txt").write_text("".join(f"{i}\n" for i in range(600)))

    dry = snakemake(work, "--configfile", str(config), "--dry-run", env=plugged)
    counts = job_counts(dry.stdout)
    assert (counts["artifact"], counts["runtime"], counts["arms"]) == (1, 1, 1), counts
    # and run, on the plugin's own model, in the niced kind's runtime (its runs forked from a
    # server started by the kind, as the kind starts a run: at its priority)
    snakemake(work, "--configfile", str(config), env=plugged)
    manifest = json.loads(next((work / "results" / "artifacts").glob("site-torch/manifest.json")).read_text())
    assert (manifest["source"], manifest["site_module"]) == ("site-torch", "torch/site")
    runtime = json.loads(next((work / "results" / "runtimes").glob("niced-*/site-torch/runtime.json")).read_text())
    assert (runtime["kind"], runtime["settings"]) == ("niced", {"priority": 7})
    records = sorted((work / "results" / "runs" / "noise").rglob("*.json"))
    assert len(records) == 6
    found = [json.loads(r.read_text()) for r in records]
    assert {(f["spec"]["model"], f["spec"]["challenge"]) for f in found} == {
        ("bugimpact_example.model:TinyNet", "digits-subset")}
    assert {f["status"] for f in found} == {"ok"}
    assert {f["environment"]["nice"] for f in found} == {min(19, os.nice(0) + 7)}  # below ours
    data = json.loads(next((work / "results" / "data").glob("digits-subset*.json")).read_text())
    assert data["source"] == "sklearn digits, subset.txt" and data["shapes"]["x"][0] == 600
    verdicts = read_csv(work / "results" / "calibration" / "stats" / "verdicts.csv")[1]
    assert [v["bug"] for v in verdicts] == ["noise"]
    assert verdicts[0]["verdict"] != "incomplete", verdicts[0]["reason"]
    assert (verdicts[0]["n_buggy"], verdicts[0]["n_corrected"]) == ("3", "3")
    # the plugin's metric is tested beside accuracy, each run's from its confusion counts
    kappa = next(r for r in read_csv(next((work / "results" / "calibration" / "stats" / "noise").glob("*.csv")))[1]
                 if r["metric"] == "kappa")
    assert kappa["values_compared"] == "exact counts" and kappa["mde_alpha"] == "0.025"  # 2 metrics
    corrected = []
    for record in found:
        if record["spec"]["arm"] == "corrected":
            matrix = np.array(record["counts"]["matrix"], dtype=float)
            n = matrix.sum()
            chance = (matrix.sum(axis=0) * matrix.sum(axis=1)).sum() / n ** 2
            corrected.append((np.trace(matrix) / n - chance) / (1 - chance))
    assert abs(float(kappa["mean_corrected"]) - float(np.mean(corrected))) < 1e-12

    def planned():
        return job_counts(snakemake(work, "--configfile", str(config), "--dry-run", env=plugged).stdout)
    # nothing edited: nothing to train
    assert "train" not in planned()
    # the challenge's raw file edited: its data is made again, and the runs on it, nothing else
    (work / "subset.txt").write_text("".join(f"{i}\n" for i in range(1, 601)))
    counts = planned()
    assert (counts.get("prepare_data"), counts.get("train")) == (1, 6), counts
    assert not {"artifact", "runtime"} & set(counts), counts
    (work / "subset.txt").write_text("".join(f"{i}\n" for i in range(600)))
    snakemake(work, "--configfile", str(config), env=plugged)
    # the model's code edited (where the host finds it: the site's copy): a new experiment key,
    # so its runs are trained again beside the old ones, which keep their bytes
    before = {r: r.read_bytes() for r in records}
    model = site / "bugimpact_example" / "model.py"
    model.write_text(model.read_text().replace("nn.Conv2d(in_channels, 8, 3", "nn.Conv2d(in_channels, 8, 5"))
    counts = planned()
    assert (counts.get("experiment"), counts.get("arms")) == (1, 1), counts  # runs: after its gate
    snakemake(work, "--configfile", str(config), env=plugged)
    keys = sorted(p.name for p in (work / "results" / "runs" / "noise").iterdir())
    assert len(keys) == 2 and all(len(list((work / "results" / "runs" / "noise" / k).rglob("*.json"))) == 6
                                  for k in keys), keys
    assert all(r.read_bytes() == data for r, data in before.items())
    assert "train" not in planned()


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
