"""Every input of an arm proves itself where it is read, and a runtime is known by its content:
each case seen on a finished compiled study (the issue's fault matrix) at the level of the part
that reads it. The same cases through the workflow, on a real compiled fix on torch 1.5.1:
``tests/faults/test_arm_faults.py``. Real compiles (the host's g++), real records; no torch 1.x."""
import hashlib
import io
import json
import sys
from pathlib import Path

import pytest

from bugimpact.failures import cause_line
from bugimpact.io import InputError, write_json
from bugimpact.overrides import check, objects
from bugimpact.overrides.release_build import compile_job, run_all

RELEASE = b"int scale(int x) { return 3 * x; }\nint f(int x) { return scale(x) + 1; }\n"


def builds(tmp_path, arm, cache=None):
    """The arm's and the release's file compiled as an override compiles them (the cache, if any,
    shared); returns the jobs and the objects taken from the cache."""
    jobs = [compile_job("g++", name, "aten/src/ATen/native/X.cpp", data, tmp_path / "override", ["-O2", "-fPIC"])
            for name, data in (("arm", arm), ("faithful", RELEASE))]
    return jobs, run_all(jobs, io.StringIO(), 2, cache)


# --- compiled objects kept by what was compiled ------------------------------------------------

@pytest.mark.parametrize("harm, says", [
    (lambda kept, seal, other: kept.write_bytes(kept.read_bytes()[:100]), "cut short or replaced"),
    (lambda kept, seal, other: kept.write_bytes(other.read_bytes()), "cut short or replaced"),
    (lambda kept, seal, other: seal.unlink(), "has no seal"),
    (lambda kept, seal, other: seal.write_text(json.dumps({**json.loads(seal.read_text()), "key": "f" * 64})),
     "is sealed for another compile"),
])
def test_a_kept_object_that_is_not_what_it_was_kept_as_is_compiled_again_and_named(tmp_path, harm, says):
    """Seen: a cached object cut short was linked ("file too short", naming the runtime's copy, not
    the cache file), and `run --bug` failed the same way again; the faithful build's object in the
    arm's place built the arm from the release's code, and the check said verified."""
    cache = tmp_path / "objects"
    jobs, _ = builds(tmp_path / "first", RELEASE.replace(b"+ 1", b"+ 2"), cache)
    arm_kept = next(p for p in cache.glob("*.o") if p.read_bytes() == Path(jobs[0][2][-1]).read_bytes())
    faithful_kept = next(p for p in cache.glob("*.o") if p != arm_kept)
    harm(arm_kept, arm_kept.with_suffix(".json"), faithful_kept)
    log = io.StringIO()
    again = [compile_job("g++", "arm", "aten/src/ATen/native/X.cpp", RELEASE.replace(b"+ 1", b"+ 2"),
                         tmp_path / "again", ["-O2", "-fPIC"])]
    assert run_all(again, log, 1, cache) == {}  # compiled, not taken
    said = log.getvalue()
    assert f"(the kept object {arm_kept} " in said and says in said and "compiled again)" in said
    assert Path(again[0][2][-1]).read_bytes() == Path(jobs[0][2][-1]).read_bytes()
    assert objects.unsealed(arm_kept, arm_kept.with_suffix(".json"), arm_kept.stem) == ""  # kept whole again


def test_an_arm_whose_object_holds_the_releases_code_is_refused_naming_where_it_came_from(tmp_path):
    """A check cannot pass where the arm is not the fix: the arm compiles other source than the
    release, so its object must hold other code. One alike is refused: taken from the cache (a
    kept object resealed as the arm's), the kept file is named; compiled, the build compiles the
    fix out."""
    cache = tmp_path / "objects"
    fixed = RELEASE.replace(b"+ 1", b"+ 2")
    jobs, kept = builds(tmp_path / "first", fixed, cache)
    assert objects.the_release_in_the_arm(jobs, kept) == ""  # the fix's object is its own
    arm_kept = objects.kept(cache, objects.key(jobs[0][2]))
    arm_kept.write_bytes(Path(jobs[1][2][-1]).read_bytes())
    seal = arm_kept.with_suffix(".json")
    seal.write_text(json.dumps({**json.loads(seal.read_text()), "sha256": hashlib.sha256(arm_kept.read_bytes()).hexdigest()}))
    jobs, kept = builds(tmp_path / "again", fixed, cache)
    assert f"its object, taken from {arm_kept}, holds the release's code" in objects.the_release_in_the_arm(jobs, kept)
    unused = RELEASE + b"static int unused(int x) { return x - 1; }\n"  # gone from the object at -O2
    jobs, kept = builds(tmp_path / "dead", unused)
    assert "its object holds the release's code: this build compiles the fix out" in \
        objects.the_release_in_the_arm(jobs, kept)
    # seen: IndexKernel.cpp, rebuilt as an includer of a header whose declarations pr36539 changes
    assert objects.the_release_in_the_arm(jobs, kept, changed={"aten/src/ATen/native/Other.cpp"}) == ""
    assert "compiles the fix out" in objects.the_release_in_the_arm(jobs, kept, changed={"aten/src/ATen/native/X.cpp"})


def test_objects_of_one_source_compiled_in_two_folders_hold_the_same_code(tmp_path):
    """Debug information names the folder a file was compiled in; the code does not."""
    made = []
    for folder in ("a", "b"):
        job = compile_job("g++", folder, "x.cpp", RELEASE, tmp_path, ["-O2", "-g", "-fPIC"])
        run_all([job], io.StringIO(), 1)
        made.append(job[2][-1])
    assert objects.same_code(*made)
    other = compile_job("g++", "c", "x.cpp", RELEASE.replace(b"3 *", b"4 *"), tmp_path, ["-O2", "-g", "-fPIC"])
    run_all([other], io.StringIO(), 1)
    assert not objects.same_code(made[0], other[2][-1])


# --- a check record is one whole, or broken ----------------------------------------------------

LIBRARIES = {build: {"library": f"/r/{build}.so", "sha256": build[0] * 64} for build in ("arm", "faithful", "canary")}
RUNTIME = {"kind": "venv", "python": "/r/python", "override": {"route": "registered", "libraries": LIBRARIES}}
WHOLE = {"outcome": "verified", "passed": True, "reason": "", "route": "registered", "workload_calls": ["conv2d"],
         "faithful_identical": True, "faithful_calls": {"conv2d": 90, "conv1d": 0}, "canary_entries": 1352,
         "changed_calls": {}, "libraries": LIBRARIES}


@pytest.mark.parametrize("change, field, says", [
    ({"faithful_identical": False, "faithful_calls": {"conv2d": 7}}, "faithful_identical",
     "yet its faithful build did not train as the release"),
    ({"workload_calls": []}, "workload_calls", "verified with none"),
    ({"workload_calls": ["conv2d", "linear"]}, "workload_calls", "names linear among the workload's calls, with no count"),
    ({"faithful_calls": {"conv2d": 0}}, "workload_calls", "names conv2d among the workload's calls, with no count"),
    ({"outcome": "not exercised"}, "workload_calls", "outcome 'not exercised' with the workload's calls"),
    ({"canary_entries": 0}, "canary_entries", "the canary (the rebuilt code, instrumented) never ran"),
    ({"passed": False}, "passed", "outcome 'verified' with passed False"),
])
def test_a_check_record_whose_fields_contradict_each_other_is_broken(tmp_path, change, field, says):
    """Seen: a check record saying verified with faithful_identical false and made-up counts opened
    the arms gate, and `verify` found nothing broken."""
    path = tmp_path / "check.json"
    write_json(path, {**WHOLE, **change})
    with pytest.raises(InputError) as broken:
        check.read(path, RUNTIME)
    assert broken.value.field == field and says in str(broken.value)
    write_json(path, WHOLE)
    assert check.read(path, RUNTIME)["outcome"] == "verified"


def test_a_check_is_of_its_arms_runtime_as_it_is_now_and_sealed(tmp_path):
    """Seen: {"override": false, "passed": true} in an override arm's place opened the gate, leaving
    a verdict with no check behind it. A check names the runtime it checked and its libraries'
    bytes; a runtime made again with other bytes since makes it stale; a sealed record edited by
    hand is broken."""
    from bugimpact.harness.registry import sealed
    path = tmp_path / "check.json"
    runtime = tmp_path / "runtime.json"
    write_json(runtime, RUNTIME)
    write_json(path, {"override": False, "passed": True})
    with pytest.raises(InputError, match="says the arm has no override library to check .* its runtime carries one"):
        check.read(path, RUNTIME)
    assert check.read(path, {"kind": "venv", "python": "/r/python"})  # an arm without one
    write_json(path, {**WHOLE, "runtime": str(runtime)})  # read with the runtime it names
    other = {**RUNTIME, "override": {**RUNTIME["override"], "libraries": {**LIBRARIES, "arm": {"sha256": "9" * 64}}}}
    write_json(runtime, other)
    with pytest.raises(InputError, match=r"checked other libraries than the runtime holds \(arm.so sha256 aaaaaaaaaaaa, "
                                         r"the runtime's 999999999999\): the runtime was made again since"):
        check.read(path)
    assert check.read(path, RUNTIME)  # the runtime given, as the gate gives it
    write_json(path, sealed(WHOLE))
    assert check.read(path, RUNTIME)
    edited = json.loads(path.read_text())
    edited["faithful_calls"]["conv2d"] = 91
    write_json(path, edited)
    with pytest.raises(InputError, match="do not match its digest: edited by hand"):
        check.read(path, RUNTIME)


# --- a seeds archive is the study's derivation ---------------------------------------------------

def test_a_seeds_archive_edited_to_keep_its_shape_stops_the_study_naming_it(tmp_path):
    """Seen: every seed changed by one kept the archive's shape and went unnoticed: new runs trained
    with seeds the study's derivation does not give."""
    from bugimpact.experiment import check_seeds, derive_seeds, write_seeds
    path = tmp_path / "seeds.json"
    write_seeds(path, 7, "pr1", "paired")
    check_seeds(path, "pr1", 7, "paired")
    seeds = json.loads(path.read_text())
    seeds["seeds"] = [s + 1 for s in seeds["seeds"]]
    path.write_text(json.dumps(seeds))
    with pytest.raises(InputError) as edited:
        check_seeds(path, "pr1", 7, "paired")
    want = derive_seeds(7, "pr1", "paired", 1)[0]
    assert f"run 0's seed is {want + 1}, the derivation's {want}" in str(edited.value) and str(path) in str(edited.value)
    write_seeds(path, 8, "pr1", "paired")  # another study seed's archive under this key
    with pytest.raises(InputError, match="not the seeds the study derives for bug pr1 from study seed 7"):
        check_seeds(path, "pr1", 7, "paired")


def test_a_run_record_whose_seed_is_not_the_derivations_is_broken():
    from bugimpact.experiment import run_seed
    from bugimpact.harness.registry import RECORD_SCHEMA
    from bugimpact.records import problem
    spec = {"bug": "pr1", "run": 3, "study_seed": 7, "seed_policy": "paired", "seed": run_seed(7, "pr1", "paired", 3)}
    record = {"status": "ok", "spec": spec, "record_schema": RECORD_SCHEMA, "metrics": {}, "fingerprints": {}}
    assert problem(record) is None
    record["spec"] = dict(spec, seed=spec["seed"] + 1)
    assert "not run 3's as the study derives it" in problem(record)
    assert run_seed(7, "pr1", "fixed", 3) == run_seed(7, "pr1", "fixed", 0)


# --- why a process stopped -----------------------------------------------------------------------

@pytest.mark.parametrize("output, cause", [
    ("Traceback (most recent call last):\n  File \"x.py\", line 3\nRuntimeError: expected Float\n"
     "Exception raised from conv at aten/src/ATen/x.cpp:12 (most recent call first):\n"
     "frame #0: c10::Error::Error(c10::SourceLocation, std::string const&) + 0x46\n"
     "frame #23: __libc_start_main + 0xf3\n", "RuntimeError: expected Float"),
    ("terminate called after throwing an instance of 'c10::Error'\n  what():  invalid argument 0\n"
     "frame #0: x + 0x1\nAborted (core dumped)\n", "what():  invalid argument 0"),
    ("epoch 1 loss 2.1\nSegmentation fault\n", "Segmentation fault"),
    ("epoch 1 loss 2.1\n", "epoch 1 loss 2.1"),
])
def test_a_failure_is_said_by_its_cause_never_by_a_backtraces_last_frame(output, cause):
    """Seen: a check whose run aborted on torch 1.6.0 recorded as its reason the last frame of the
    backtrace."""
    assert cause_line(output) == cause


# --- a runtime is known by its content ---------------------------------------------------------

@pytest.fixture
def installed(tmp_path):
    """The installed torch's artifact manifest, as its step makes it."""
    from bugimpact.artifacts.sources import installed_manifest
    manifest = tmp_path / "artifact" / "manifest.json"
    write_json(manifest, installed_manifest())
    return manifest


def test_a_runtime_made_again_with_the_content_it_had_keeps_its_bytes(tmp_path, installed):
    """Seen: remaking a runtime retrained finished runs, and another experiment on the same runtime
    retrained its runs and its check too: the remade runtime.json is newer. Made again with the
    same content in the same files, it keeps its bytes (its time stamp decides nothing: the train
    jobs read it as ancient, the checks compare its checksum)."""
    from bugimpact import steps
    from bugimpact.artifacts.kinds import content_digest
    out = tmp_path / "runtime" / "runtime.json"
    first = steps.runtime("local", installed, out, {"interpreter": {"executable": sys.executable}, "threads": 1})
    made = out.read_bytes()
    assert first["made_with"]["threads"] == 1 and content_digest(first)
    again = steps.runtime("local", installed, out, {"interpreter": {"executable": sys.executable}, "threads": 2})
    assert out.read_bytes() == made and again == json.loads(made)


def test_a_stale_runtime_is_made_again_before_a_job_runs_in_it_and_must_have_the_planned_content(tmp_path, installed):
    """Seen: with an arm's override/arm.so deleted, status said the runtime was stale, yet the next
    runs were not preceded by a rebuild: 4 runs failed "cannot open shared object file". A job
    makes its runtime whole first, from the settings its record keeps; a runtime whose content is
    not the one the run was planned for is refused (the next workflow run gives it its own key)."""
    from bugimpact import steps
    from bugimpact.artifacts.kinds import content_digest
    from bugimpact.steps.runtime import RuntimeChanged, whole
    out = tmp_path / "runtime" / "runtime.json"
    made = steps.runtime("local", installed, out, {"interpreter": {"executable": sys.executable}})
    stale = {**made, "python": str(tmp_path / "gone" / "python")}  # its interpreter gone
    write_json(out, stale)
    again = whole(out, content_digest(made))
    assert again["python"] == sys.executable and json.loads(out.read_text())["python"] == sys.executable
    with pytest.raises(RuntimeChanged, match="was made again with other content .*planned with 000000000000"):
        whole(out, "0" * 64)
    assert whole(out, "") == again  # no content planned: any
    write_json(out, {**stale, "made_with": None})
    with pytest.raises(RuntimeError, match="does not keep the settings it was made with"):
        whole(out)


def test_a_bug_whose_runs_ran_in_another_content_gets_a_key_beside_them_and_a_gone_runtime_is_named(
        tmp_path, monkeypatch):
    """A runtime made again with other content is another runtime: the plan gives the bugs whose runs
    ran in the content before a new key (new runs beside the old), and going back finds them. A
    runtime whose record is gone while finished runs ran in it is named: made again by the
    workflow, Snakemake would train them again (a missing input is a changed one)."""
    from conftest import config_with

    from bugimpact.artifacts.kinds import content_digest
    from bugimpact.config import SHEET_SCHEMA
    from bugimpact.plan import Plan
    monkeypatch.chdir(tmp_path)
    config = config_with()
    plan = Plan(config, SHEET_SCHEMA)
    key, artifact = plan.bug("aa").key, plan.artifact_of("aa", "buggy")
    runtime = {"kind": "local", "python": sys.executable, "probe": {"version": "2.13.0"}, "artifact": {}}
    write_json(artifact.runtime_json, runtime)
    write_json(Path(plan.bug("aa").record("buggy", 0)),
               {"status": "ok", "spec": {"artifact": artifact.ident, "runtime_sha256": content_digest(runtime)}})
    again = Plan(config, SHEET_SCHEMA)
    assert again.bug("aa").key == key and again.runtime_contents["aa"]["buggy"] == content_digest(runtime)
    other = {**runtime, "probe": {"version": "2.13.1"}}
    write_json(artifact.runtime_json, other)
    moved = Plan(config, SHEET_SCHEMA)
    assert moved.bug("aa").key != key and moved.runtime_contents["aa"]["buggy"] == content_digest(other)
    assert moved.bug("fault-momentum").key == plan.bug("fault-momentum").key  # no run of it ran anywhere yet
    write_json(artifact.runtime_json, runtime)
    assert Plan(config, SHEET_SCHEMA).bug("aa").key == key  # made again as it was: its runs found
    Path(artifact.runtime_json).unlink()
    assert Plan(config, SHEET_SCHEMA).lost_runtimes() == {artifact.runtime_json: ["aa"]}
