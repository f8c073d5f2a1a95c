"""A small study through a real one-node SLURM cluster (munge, slurmctld, slurmd on localhost) with
profiles/slurm and snakemake-executor-plugin-slurm, compared with the same study run locally."""
import json
import shutil
import subprocess
import time

import pytest
import yaml
from conftest import ROOT
from workflow import project_copy, snakemake

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not shutil.which("slurmctld"),
                                 reason="SLURM is not installed (bin/setup-host --test installs it)")]

STUDY = """
bugs:
  controls:
    aa:
      label: "A/A negative control"
      buggy: {source: installed}
      corrected: {source: installed}
    fault-momentum:
      label: "strong positive control"
      buggy: {source: installed, fault: momentum_ignored}
      corrected: {source: installed}
train: {epochs: 2, runs: 3, lr: 0.02, momentum: 0.5,
        early_decision: {enabled: true, runs: 2, repeat: always}}
"""

# What only the local and the cluster job can differ in: how long a run took and where its
# project folder was (and so the digest a record is sealed with, which covers both).
VOLATILE = ("wall_s", "build_seconds", "digest", "judged_at")
# The rest holds no timing: equal byte for byte. (builds/summary.csv and report.html show the
# artifacts' seconds; the report's tables are these files.)
BYTE_FOR_BYTE = ("mined", "resolved", "filter", "data", "seeds", "early", "stats", "figures")


def kind(rel):
    """What a result file is: results/<what>/..., or results/<study>/<what>/... for the study's own."""
    return rel.parts[2] if rel.parts[1] == "calibration" else rel.parts[1]


def comparable(path, folder):
    """A JSON file with its timings dropped and its project folder written as <project>."""
    def strip(node):
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k not in VOLATILE}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node.replace(str(folder), "<project>") if isinstance(node, str) else node
    return strip(json.loads(path.read_text()))


def start_slurm():
    return subprocess.run([str(ROOT / "bin" / "start-slurm")], capture_output=True, text=True)


def test_a_cluster_started_again_after_its_daemons_died_drops_the_jobs_they_left(tmp_path):
    """A machine made from an image of one whose cluster was running jobs (CI, stop 77) has their
    saved state: the controller recovered them as running, held the node allocated, and it never
    became idle. A controller this script starts begins with no jobs."""
    out = start_slurm()
    assert out.returncode == 0, out.stderr
    job = subprocess.run(["sbatch", "--parsable", "--exclusive", "--chdir", str(tmp_path),
                          "--wrap", "sleep 6543"],
                         capture_output=True, text=True, check=True).stdout.strip()
    for _ in range(30):
        states = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"],
                                capture_output=True, text=True).stdout.split()
        if states == ["RUNNING"]:
            break
        time.sleep(1)
    assert states == ["RUNNING"]
    # what a machine image keeps of a cluster: its saved state, not its processes
    for daemon in ("slurmctld", "slurmd", "slurmstepd"):
        subprocess.run(["pkill", "-9", "-x", daemon])
    subprocess.run(["pkill", "-9", "-f", "sleep 6543"])
    time.sleep(1)
    out = start_slurm()
    assert out.returncode == 0, out.stderr
    assert subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True,
                          check=True).stdout.split() == []


@pytest.fixture(scope="module")
def cluster():
    out = start_slurm()
    assert out.returncode == 0, out.stderr
    return subprocess.run(["sinfo", "-h", "-o", "%P %T"], capture_output=True, text=True).stdout


def test_a_study_through_slurm_equals_the_local_run(cluster, tmp_path):
    assert "cpu* idle" in cluster and "gpu idle" in cluster
    runs = {}
    for where in ("slurm", "local"):
        work = project_copy(tmp_path / where)
        # the study's controls in place of the default's three (a config file given after another
        # is merged into it: it can add controls, never take one away)
        config = yaml.safe_load((work / "config.yaml").read_text())
        study = yaml.safe_load(STUDY)
        config["bugs"]["controls"] = study["bugs"]["controls"]
        config["train"].update(study["train"])
        (work / "small.yaml").write_text(yaml.safe_dump(config))
        args = ["--configfile", "small.yaml"]
        if where == "slurm":
            # The profile as shipped; only the polling is made fast, and this cluster has no accounts
            # and no accounting database (job states come from squeue).
            args += ["--profile", "profiles/slurm", "--slurm-no-account", "--slurm-status-command",
                     "squeue", "--seconds-between-status-checks", "2",
                     "--slurm-init-seconds-before-status-checks", "1"]
        runs[where] = (work, snakemake(work, *args))
    slurm, local = runs["slurm"][0], runs["local"][0]
    submitted = [line for line in runs["slurm"][1].stderr.splitlines()
                 if "has been submitted with SLURM jobid" in line]
    assert len(submitted) >= 20  # every job but `all` went through sbatch
    # 2 bugs x 2 arms x 3 runs, but the A/A control's third pair: its early decision (2 pairs)
    # found it not triggered, so that run is never asked for
    assert sum("/rule_train/" in line for line in submitted) == 10
    assert sum("/rule_train_repeat/" in line for line in submitted) == 2

    files = sorted(p.relative_to(local) for p in (local / "results").rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(slurm) for p in (slurm / "results").rglob("*") if p.is_file())
    # Data, seeds, decisions, statistics and figures: byte for byte.
    same = [rel for rel in files if kind(rel) in BYTE_FOR_BYTE]
    assert len(same) >= 20
    for rel in same:
        assert (local / rel).read_bytes() == (slurm / rel).read_bytes(), rel
    # Run records, repeats, manifests, build statuses: equal apart from timings and the folder.
    records = [rel for rel in files if rel.suffix in (".json", ".status") and rel not in same]
    assert sum(kind(rel) == "runs" for rel in records) == 10
    for rel in records:
        assert comparable(local / rel, local) == comparable(slurm / rel, slurm), rel
    print(f"{len(submitted)} jobs through sbatch; {len(same)} files equal byte for byte; "
          f"{len(records)} records and manifests equal apart from timings and the folder")
    verdicts = (slurm / "results" / "calibration" / "stats" / "verdicts.csv").read_text()
    assert "fault-momentum" in verdicts and "not triggered" in verdicts
