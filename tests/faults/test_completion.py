"""Fault matrix, completion: nothing finished is ever trained again.

Each case starts from a copy of one finished study (records, decisions, Snakemake's metadata),
breaks something as a user or a crash would, runs the workflow again, and proves that every
record that existed before is there after, byte for byte; only the records the case needs are
new. Before the completion model (decisions are checkpoints that ask for records, never gates a
record depends on), each of these retrained finished runs.
"""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from workflow import project_copy, snakemake

pytestmark = pytest.mark.slow
FAST = ROOT / "tests" / "configs" / "fast.yaml"


def records(work):
    """Every run record and repeat of the study, with its bytes."""
    res = Path(work) / "results"
    return {str(p.relative_to(res)): p.read_bytes()
            for folder in ("runs", "repeats") for p in sorted((res / folder).rglob("*.json"))}


def write_config(work, name, edit):
    config = yaml.safe_load(FAST.read_text())
    config["bugs"]["controls"] = {k: v for k, v in config["bugs"]["controls"].items()
                                  if k in ("aa", "fault-momentum")}
    config["train"].update(runs=4, epochs=1)
    config["stats"]["metrics"] = ["accuracy"]
    edit(config)
    (Path(work) / name).write_text(yaml.safe_dump(config))
    return name


def early_study(config):
    config["train"]["early_decision"] = {"enabled": True, "runs": 2, "repeat": "always"}


def sequential_study(config):
    """Momentum ignored over 3 epochs is a clear effect: the design stops it after 6 pairs."""
    config["bugs"]["controls"] = {"fault-momentum": config["bugs"]["controls"]["fault-momentum"]}
    config["train"].update(runs=12, epochs=3, early_decision={"enabled": False},
                           sequential={"enabled": True, "stages": [6], "spending": "pocock"})


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """Two finished studies: the early decision (A/A control stopped after 2 pairs), and the
    group-sequential design (a clear impact stopped at its first look)."""
    base = tmp_path_factory.mktemp("finished")
    early = project_copy(base / "early")
    snakemake(early, "--configfile", write_config(early, "study.yaml", early_study))
    seq = project_copy(base / "seq")
    snakemake(seq, "--configfile", write_config(seq, "study.yaml", sequential_study))
    return {"early": early, "seq": seq}


def copy_of(finished, which, tmp_path):
    dest = tmp_path / which
    shutil.copytree(finished[which], dest, symlinks=True)
    return dest


def key_dir(work, bug):
    return next((Path(work) / "results" / "runs" / bug).iterdir())


def verdicts(work):
    from bugimpact.io import read_csv
    return {r["bug"]: r for r in read_csv(Path(work) / "results" / "calibration" / "stats" / "verdicts.csv")[1]}


def assert_kept(before, after, new=()):
    """Every record of ``before`` unchanged in ``after``; the new ones exactly ``new``."""
    changed = sorted(p for p in before if p in after and after[p] != before[p])
    lost = sorted(set(before) - set(after))
    assert not changed and not lost, f"retrained: {changed}, lost: {lost}"
    assert sorted(set(after) - set(before)) == sorted(new)


def test_the_finished_studies_stopped_where_their_decisions_said(finished):
    early = verdicts(finished["early"])
    assert early["aa"]["verdict"] == "not triggered" and early["aa"]["skipped"] == "4"
    assert sorted(p.name for p in key_dir(finished["early"], "aa").glob("*/*.json")) == \
        ["0.json", "0.json", "1.json", "1.json"]  # the runs after the decision were never made
    seq = verdicts(finished["seq"])["fault-momentum"]
    assert seq["verdict"] == "impact" and seq["stopped_at_stage"].startswith("1 of 2 (6 pairs")
    assert len(list(key_dir(finished["seq"], "fault-momentum").glob("*/*.json"))) == 12


def test_a_truncated_early_record_removed_by_verify_is_the_only_run_made_again(finished, tmp_path):
    """The documented recovery (docs/usage.md): `verify --remove`, rerun. Before, the early decision job failed on the
    cut record, Snakemake deleted its output, and every later run of the bug was retrained."""
    work = copy_of(finished, "early", tmp_path)
    cut = key_dir(work, "fault-momentum") / "buggy" / "1.json"
    cut.write_bytes(cut.read_bytes()[:200])
    before = records(work)
    failed = snakemake(work, "--configfile", "study.yaml", check=False)  # the cut record is named
    assert failed.returncode != 0 and "buggy/1.json" in failed.stdout + failed.stderr
    assert records(work) == before
    out = subprocess.run([sys.executable, "-m", "bugimpact", "verify", "--runs", "results",
                          "--remove"], cwd=work, capture_output=True, text=True,
                         env={"PYTHONPATH": str(work / "src"), "PATH": "/usr/bin:/bin"})
    assert "1 broken record(s) removed" in out.stdout, out.stdout + out.stderr
    del before[str(cut.relative_to(work / "results"))]
    snakemake(work, "--configfile", "study.yaml")
    assert_kept(before, records(work), new=[str(cut.relative_to(work / "results"))])


def test_a_lost_early_decision_is_made_again_from_the_records(finished, tmp_path):
    """A SIGKILL during the early-decision job (or its failure) leaves no decision: it is
    recomputed from the records that exist; no record depends on it."""
    work = copy_of(finished, "early", tmp_path)
    before = records(work)
    decision = next((work / "results" / "early" / "aa").glob("*.json"))
    kept = decision.read_text()
    decision.unlink()
    snakemake(work, "--configfile", "study.yaml")
    assert_kept(before, records(work))
    assert json.loads(decision.read_text()) == json.loads(kept)
    assert verdicts(work)["aa"]["verdict"] == "not triggered"


def test_lost_seeds_experiment_and_record_remake_that_record_only(finished, tmp_path):
    """The seeds archive and the experiment file are made again by their own rules (before: by the
    run that found them lost, writing another rule's output), identical."""
    work = copy_of(finished, "early", tmp_path)
    key = key_dir(work, "fault-momentum").name
    seeds = work / "results" / "seeds" / "fault-momentum" / f"{key}.json"
    experiment = work / "results" / "experiments" / f"{key}.json"
    archived = {path: path.read_bytes() for path in (seeds, experiment)}
    seeds.unlink()
    experiment.unlink()
    lost = key_dir(work, "fault-momentum") / "corrected" / "3.json"
    lost.unlink()
    before = records(work)
    out = snakemake(work, "--configfile", "study.yaml")
    assert_kept(before, records(work), new=[str(lost.relative_to(work / "results"))])
    for path, content in archived.items():  # identical: functions of the config
        assert path.read_bytes() == content
    for rule in ("seeds", "experiment"):
        assert f"rule {rule}:" in out.stdout + out.stderr


@pytest.mark.parametrize("change", ["early_runs_3", "sequential_on"])
def test_changing_the_decisions_of_a_finished_study_trains_only_what_they_newly_need(
        finished, tmp_path, change):
    """Before: the set of a run's inputs held the decisions, so changing them retrained it."""
    work = copy_of(finished, "early", tmp_path)
    before = records(work)

    def edit(config):
        early_study(config)
        if change == "early_runs_3":
            config["train"]["early_decision"]["runs"] = 3
        else:
            config["train"]["early_decision"] = {"enabled": False}
            config["train"]["sequential"] = {"enabled": True, "stages": [2], "spending": "pocock"}
    name = write_config(work, "changed.yaml", edit)
    snakemake(work, "--configfile", name)
    after = records(work)
    aa = key_dir(work, "aa").relative_to(work / "results")
    if change == "early_runs_3":  # the A/A control's decision needs a third pair, and only that
        assert_kept(before, after, new=[f"{aa}/buggy/2.json", f"{aa}/corrected/2.json"])
    else:  # the first look is at 2 pairs: whatever it says, what exists is kept
        assert_kept(before, after, new=sorted(set(after) - set(before)))
        assert all(path.startswith(str(aa)) for path in set(after) - set(before))
    assert not any(v["verdict"] == "incomplete" for v in verdicts(work).values())


def test_a_stricter_alpha_after_a_sequential_stop_redoes_the_look_not_the_runs(finished, tmp_path):
    """Before: the old stop was carried forward, the statistics (at the new alpha) disagreed with
    it, and the bug stayed "incomplete: records missing" for ever."""
    work = copy_of(finished, "seq", tmp_path)
    before = records(work)

    def stricter(config):
        sequential_study(config)
        config["stats"]["alpha"] = 0.001
    name = write_config(work, "strict.yaml", stricter)
    snakemake(work, "--configfile", name)
    after = records(work)
    assert_kept(before, after, new=sorted(set(after) - set(before)))
    look = json.loads(next((work / "results" / "stages" / "fault-momentum").glob("*/6.json")).read_text())
    verdict = verdicts(work)["fault-momentum"]
    assert verdict["verdict"] != "incomplete"
    if look["decision"] == "continue":  # the stricter bound is not crossed: all 12 pairs are run
        assert len(after) == 24 and verdict["stopped_at_stage"].startswith("2 of 2 (12 pairs")
    else:
        assert after == before
    again = snakemake(work, "--configfile", name, "-n")
    assert "Nothing to be done" in again.stdout + again.stderr


def test_a_metric_edited_by_hand_is_named_and_not_used(finished, tmp_path):
    """Before: `verify` passed an edited accuracy and the statistics used it."""
    work = copy_of(finished, "early", tmp_path)
    path = key_dir(work, "fault-momentum") / "buggy" / "2.json"
    record = json.loads(path.read_text())
    record["metrics"]["accuracy"] = 0.999
    path.write_text(json.dumps(record, indent=1, sort_keys=True))
    out = subprocess.run([sys.executable, "-m", "bugimpact", "verify", "--runs", "results"],
                         cwd=work, capture_output=True, text=True,
                         env={"PYTHONPATH": str(work / "src"), "PATH": "/usr/bin:/bin"})
    assert "buggy/2.json" in out.stdout and "edited by hand" in out.stdout
    assert out.returncode != 0


def test_an_updated_script_retrains_nothing(finished, tmp_path):
    """Before: Snakemake's code trigger reran every job whose script file was newer than its
    output, so a `git pull` that touched scripts/train.py retrained every finished run."""
    work = copy_of(finished, "early", tmp_path)
    before = records(work)
    for script in (work / "scripts").glob("*.py"):
        script.write_text(script.read_text() + "\n")
    dry = snakemake(work, "--configfile", "study.yaml", "-n")
    assert "Nothing to be done" in dry.stdout + dry.stderr
    assert records(work) == before


def bugimpact(work, *args):
    return subprocess.run([sys.executable, "-m", "bugimpact", *args], cwd=work, capture_output=True,
                          text=True, env={"PYTHONPATH": str(work / "src"), "PATH": "/usr/bin:/bin"})


def test_retry_failed_names_broken_records_and_the_next_run_makes_only_them(finished, tmp_path):
    """N10: a record replaced by a JSON list and one cut to 100 bytes. Before, `retry-failed`
    said "0 failed records removed" (exit 0) and `status` named neither: only `verify` did."""
    work = copy_of(finished, "early", tmp_path)
    folder = key_dir(work, "fault-momentum") / "buggy"
    a_list, cut = folder / "3.json", folder / "2.json"
    a_list.write_text("[1, 2]")
    cut.write_bytes(cut.read_bytes()[:100])
    broken = [str(p.relative_to(work)) for p in (cut, a_list)]
    # another study's failure, in the same results: its own to retry (seen: retry-failed removed
    # every study's failed records, whichever config it was given)
    other = work / "results" / "runs" / "other-study-bug" / "k" / "buggy" / "0.json"
    other.parent.mkdir(parents=True)
    other.write_text(json.dumps({"status": "failed", "spec": {}, "exit_codes": [1], "log_tail": ""}))
    before = records(work)
    status = bugimpact(work, "status", "--config", "study.yaml")
    assert status.returncode == 0, status.stderr
    assert ("2 record(s) to make again: a plain `snakemake` keeps them; `bugimpact retry-failed --config "
            "study.yaml` removes them (makes a runtime finished runs ran in again where it is) and the next run "
            "makes them again") in status.stdout
    for path in broken:
        assert f"  {path}: broken (" in status.stdout
    out = bugimpact(work, "retry-failed", "--config", "study.yaml")
    assert out.returncode == 0, out.stderr
    assert f"removed {broken[1]}: broken (not a valid run record: a list, not a record); the next " \
           "run trains it again" in out.stdout
    assert f"removed {broken[0]}: broken (" in out.stdout and "2 removed" in out.stdout
    assert other.exists() and "other-study-bug" not in out.stdout
    every = bugimpact(work, "retry-failed", "--all", "--dry-run")  # asked for: every study's
    assert every.stdout.strip() == f"would remove {other.relative_to(work)}: failed (exit [1]: no output " \
                                   "from the harness); the next run trains it again", every.stdout
    other.unlink()
    del before[str(other.relative_to(work / "results"))]
    for path in broken:
        del before[str((work / path).relative_to(work / "results"))]
    snakemake(work, "--configfile", "study.yaml")
    assert_kept(before, records(work), new=[str((work / p).relative_to(work / "results")) for p in broken])
    again = bugimpact(work, "retry-failed", "--config", "study.yaml")
    assert again.stdout.strip() == "nothing broken, failed or stale"
