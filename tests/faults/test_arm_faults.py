"""Fault matrix, the inputs of a compiled arm: each proves itself where it is read, and a runtime
is known by its content, never by its time stamp.

One finished compiled one-fix study, as a user runs it: pr38674 (a Convolution.cpp fix listed in
1.5.1's notes) on the real torch 1.5.1 wheel, with the release source shipped beside its patch,
the override built by the host's g++ (``pr38674`` below); and a second study of the same arms
under another experiment, sharing their runtimes (``other.yaml``). Each case starts from that
state (restored file by file, the venvs left as they are), breaks one input as a user or a
crash would, runs the command the README names, and checks what is said and that every finished
run record keeps its bytes. Before these were fixed, each case gave a wrong answer, lost work or
said nothing (the issue's 18-case matrix, of which these are the 8 that failed)."""
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from workflow import project_copy, snakemake

pytestmark = pytest.mark.slow
WHEEL_CACHE = str(ROOT / "data" / "cache" / "wheels")  # one download, shared with the other tests
BUG = "pr38674"


def config(release="1.5.1", lr=0.02, patch="data/patches/pytorch/pr38674.diff", bug=BUG, name="arms"):
    study = yaml.safe_load((ROOT / "configs" / "releases.yaml").read_text())
    study.update(study=name, runtime={"kind": "venv", "python": "3.7"})
    study["bugs"] = {"from_sheet": False, "controls": {},
                     "fixes": {bug: {"release": {"source": "pypi", "version": release}, "patch": patch}}}
    study["artifacts"]["wheel_cache"] = WHEEL_CACHE
    study["train"].update(runs=4, epochs=1, lr=lr)
    return yaml.safe_dump(study)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """The finished studies, and a copy of every file of them but the venvs."""
    work = project_copy(tmp_path_factory.mktemp("arms") / "p")
    (work / "study.yaml").write_text(config())
    (work / "other.yaml").write_text(config(lr=0.03, name="other"))  # another experiment, the same runtimes
    snakemake(work, "--configfile", "study.yaml")
    [key] = [p.name for p in (work / "results" / "runs" / BUG).iterdir()]
    snakemake(work, "--configfile", "other.yaml")
    pristine = tmp_path_factory.mktemp("pristine")
    for path in files(work):
        (pristine / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(work / path, pristine / path)
    return work, pristine, key


def files(root):
    """Every file under ``root`` but the venvs' (relative paths)."""
    return {str(p.relative_to(root)) for p in Path(root).rglob("*")
            if p.is_file() and "venv" not in p.relative_to(root).parts}


@pytest.fixture
def work(finished):
    """The finished studies as they were (each case starts there): a runtime a case made, venv and
    all, is removed."""
    work, pristine, _ = finished
    for runtime in (work / "results" / "runtimes").glob("*/*"):
        if not (pristine / runtime.relative_to(work)).is_dir():
            shutil.rmtree(runtime)
    for path in files(work) - files(pristine):
        (work / path).unlink()
    for path in files(pristine):
        if not (work / path).is_file() or (work / path).read_bytes() != (pristine / path).read_bytes():
            (work / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(pristine / path, work / path)
    return work


def records(work):
    """Every run record, with a digest of its bytes."""
    return {str(p.relative_to(work)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((work / "results" / "runs").rglob("*.json"))}


def bugimpact(work, *args, env=None):
    return subprocess.run([sys.executable, "-m", "bugimpact", *args], cwd=work, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(work / "src"), **(env or {})))


def gate(work):
    """The bug's arms gate made last (the study's: the other study's is older, or the same)."""
    return json.loads(max((work / "results" / "arms" / BUG).glob("*.json"), key=os.path.getmtime).read_text())


def arm_runtime(work):
    """The folder of the buggy arm's runtime (the one holding the override library)."""
    [found] = (work / "results" / "runtimes").glob("*/onefix-buggy-*")
    return found


def test_an_archive_of_another_release_is_used_for_no_other(work):
    """Before: with the study's release changed from 1.5.1 to 1.5.0, the 1.5.1 archive was read as
    1.5.0's source, both arms ran the bug and the check said verified; another fix's valid archive
    swapped in was refused with a message that named no archive."""
    before = records(work)
    (work / "study.yaml").write_text(config(release="1.5.0"))
    snakemake(work, "--configfile", "study.yaml")
    archive = "data/patches/pytorch/pr38674.release.tar.xz"
    reason = gate(work)["reason"]
    assert f"{archive} is not torch 1.5.0's: it is torch 1.5.1's source, not torch 1.5.0's" in reason, reason
    assert not gate(work)["runnable"] and not gate(work).get("override_checks")
    # another fix's archive (1.5.0's ConstantPadNd.cpp) beside this fix's patch
    patches = work / "data" / "patches" / "pytorch"
    (patches / "prswap.diff").write_text((patches / "pr38674.diff").read_text() + "\n")
    shutil.copy(patches / "study-pr32350.release.tar.xz", patches / "prswap.release.tar.xz")
    (work / "study.yaml").write_text(config(patch="data/patches/pytorch/prswap.diff"))
    snakemake(work, "--configfile", "study.yaml")
    reason = gate(work)["reason"]
    assert ("data/patches/pytorch/prswap.release.tar.xz is not torch 1.5.1's: it is torch 1.5.0's source, "
            "not torch 1.5.1's") in reason, reason
    assert records(work).items() >= before.items()


def test_a_kept_object_cut_short_is_compiled_again_naming_the_file_and_nothing_is_retrained(work):
    """Before: a cached object cut short was linked ("file too short", naming the runtime's copy),
    and `run --bug` failed the same way again; status said the runtime with its library deleted was
    stale, next to the verdict made before."""
    before = records(work)
    runtime = arm_runtime(work)
    made = (runtime / "runtime.json").read_bytes()
    arm_object = (runtime / "override" / "arm" / "aten/src/ATen/native/Convolution.cpp.o").read_bytes()
    kept = next(p for p in (work / "data" / "cache" / "objects").glob("*.o") if p.read_bytes() == arm_object)
    kept.write_bytes(arm_object[:len(arm_object) // 2])
    (runtime / "override" / "arm.so").unlink()
    status = bugimpact(work, "status", "--config", "study.yaml").stdout
    assert "not triggered (stale: 1 of its records to make again)" in status and "arm.so gone" in status, status
    out = bugimpact(work, "run", "--bug", BUG, "--config", "study.yaml")
    assert out.returncode == 0 and f"made again results/runtimes/{runtime.parent.name}/{runtime.name}" in out.stdout
    log = (runtime / "override.log").read_text()
    assert f"(the kept object {kept.relative_to(work)} is not the object it was kept as" in log
    assert (runtime / "runtime.json").read_bytes() == made  # the same content: the same record
    assert records(work) == before
    # the other study on these runtimes finds them as they were: no run, no check made again
    again = snakemake(work, "--configfile", "other.yaml")
    assert "Nothing to be done" in again.stdout + again.stderr and records(work) == before


def test_a_kept_object_resealed_as_the_arms_is_refused_naming_it(work):
    """Before: the faithful build's object in the arm's place built the arm from the release's
    code, and the check said verified. Its seal remade to pass, the arm's object holds the
    release's code where its source is the fix's: refused, the kept file named."""
    runtime = arm_runtime(work)
    arm_object = (runtime / "override" / "arm" / "aten/src/ATen/native/Convolution.cpp.o").read_bytes()
    faithful = (runtime / "override" / "faithful" / "aten/src/ATen/native/Convolution.cpp.o").read_bytes()
    kept = next(p for p in (work / "data" / "cache" / "objects").glob("*.o") if p.read_bytes() == arm_object)
    kept.write_bytes(faithful)
    seal = json.loads(kept.with_suffix(".json").read_text())
    kept.with_suffix(".json").write_text(json.dumps({**seal, "sha256": hashlib.sha256(faithful).hexdigest()}))
    (runtime / "override" / "arm.so").unlink()
    out = bugimpact(work, "run", "--bug", BUG, "--config", "study.yaml")
    assert f"its object, taken from {kept.relative_to(work)}, holds the release's code" in out.stdout, out.stdout


@pytest.mark.parametrize("edit, says", [
    (lambda record: {**{k: v for k, v in record.items() if k != "digest"}, "faithful_identical": False,
                     "faithful_calls": {**record["faithful_calls"], "conv2d": 7}},
     "outcome 'verified', yet its faithful build did not train as the release (faithful_identical False)"),
    (lambda record: {"override": False, "passed": True},
     "says the arm has no override library to check (or that its runtime failed), and its runtime carries one"),
])
def test_a_check_record_that_contradicts_itself_or_its_runtime_is_broken_and_made_again(finished, work, edit, says):
    """Before: a check record saying verified with faithful_identical false and made-up counts, or
    saying the override arm has no override, opened the arms gate, and `verify` found nothing."""
    before = records(work)
    check = next((work / "results" / "checks" / finished[2]).glob("onefix-buggy-*.json"))
    check.write_text(json.dumps(edit(json.loads(check.read_text()))))
    verify = bugimpact(work, "verify")
    assert verify.returncode == 1 and says in verify.stdout, verify.stdout
    snakemake(work, "--configfile", "study.yaml")
    assert not gate(work)["runnable"] and says in gate(work)["reason"]
    assert bugimpact(work, "retry-failed", "--config", "study.yaml").returncode == 0
    snakemake(work, "--configfile", "study.yaml")
    assert gate(work)["runnable"] and gate(work)["override_checks"]["buggy"]["outcome"] == "verified"
    assert records(work) == before


def test_a_seeds_archive_edited_to_keep_its_shape_stops_the_study_before_anything_runs(finished, work):
    """Before: every seed changed by one went unnoticed; new runs trained with other seeds."""
    seeds = work / "results" / "seeds" / BUG / f"{finished[2]}.json"
    archive = json.loads(seeds.read_text())
    seeds.write_text(json.dumps({**archive, "seeds": [s + 1 for s in archive["seeds"]]}))
    out = snakemake(work, "--configfile", "study.yaml", check=False)
    assert out.returncode != 0
    assert f"{seeds.relative_to(work)}, field 'seeds': not the seeds the study derives for bug {BUG}" in out.stderr


def test_a_stale_runtime_is_made_again_before_the_run_that_needs_it(finished, work):
    """Before: with override/arm.so deleted the next runs failed "cannot open shared object file";
    remaking the runtime then retrained the arm's finished runs."""
    before = records(work)
    runtime = arm_runtime(work)
    made = (runtime / "runtime.json").read_bytes()
    (runtime / "override" / "arm.so").unlink()
    lost = work / "results" / "runs" / BUG / finished[2] / "buggy" / "1.json"
    lost.unlink()
    snakemake(work, "--configfile", "study.yaml")
    after = records(work)
    assert {k: v for k, v in after.items() if k != str(lost.relative_to(work))} == \
        {k: v for k, v in before.items() if k != str(lost.relative_to(work))}
    assert json.loads(lost.read_text())["status"] == "ok" and (runtime / "override" / "arm.so").is_file()
    assert (runtime / "runtime.json").read_bytes() == made


def test_a_runtime_made_again_with_other_content_gets_new_runs_beside_the_old(finished, work, tmp_path):
    """A compiler whose objects differ (here g++ recording its switches in the library) makes the
    arm's library other bytes: the run planned for the runtime before is not made in it, and the
    next run trains the bug under a new key beside the old runs, which keep their bytes."""
    before = records(work)
    compiler = tmp_path / "g++"
    compiler.write_text('#!/bin/sh\nif [ "$1" = --version ]; then g++ --version | sed "1s/$/ (switches)/"; exit; fi\n'
                        'exec g++ "$@" -frecord-gcc-switches\n')
    compiler.chmod(0o755)
    runtime = arm_runtime(work)
    (runtime / "override" / "arm.so").unlink()
    (work / "results" / "runs" / BUG / finished[2] / "buggy" / "1.json").unlink()
    out = snakemake(work, "--configfile", "study.yaml", check=False, env={"CXX": str(compiler)})
    assert "was made again with other content" in out.stdout + out.stderr
    snakemake(work, "--configfile", "study.yaml")
    after = records(work)
    lost = f"results/runs/{BUG}/{finished[2]}/buggy/1.json"
    assert all(after[k] == v for k, v in before.items() if k != lost)  # the runs before, as they were
    assert len({Path(k).parts[3] for k in after}) == len({Path(k).parts[3] for k in before}) + 1
    assert gate(work)["runnable"] and gate(work)["override_checks"]["buggy"]["outcome"] == "verified"


def test_a_runtime_deleted_by_hand_is_made_again_in_place_first_and_nothing_is_retrained(work):
    """Before: remaking a runtime (`run --bug`, or `retry-failed` then `snakemake`) retrained the
    arm's finished runs (2, then 10), and another experiment's on the same runtime, and its check."""
    before = records(work)
    runtime = arm_runtime(work)
    shutil.rmtree(runtime)
    out = snakemake(work, "--configfile", "study.yaml", check=False)
    assert out.returncode != 0 and "gone, and finished runs of pr38674 ran in it" in out.stderr
    assert f"`bugimpact run --bug {BUG} --config {work / 'study.yaml'}`" in out.stderr and records(work) == before
    made = bugimpact(work, "retry-failed", "--config", "study.yaml")
    assert f"made again results/runtimes/{runtime.parent.name}/{runtime.name}/runtime.json: gone" in made.stdout
    for study in ("study.yaml", "other.yaml"):
        snakemake(work, "--configfile", study)
    assert records(work) == before


def test_a_run_with_nothing_to_do_says_what_it_keeps_that_is_not_whole(work):
    """Before: a plain `snakemake` with nothing to do printed "Nothing to be done", with no word of
    the records it keeps that are not whole (here a runtime whose library is gone)."""
    (arm_runtime(work) / "override" / "arm.so").unlink()
    out = snakemake(work, "--configfile", "study.yaml")
    said = out.stdout + out.stderr
    assert "Nothing to be done" in said
    assert "bugimpact: 1 record(s) broken, failed or stale are kept (`bugimpact status --config" in said
    assert "`bugimpact retry-failed --config" in said
