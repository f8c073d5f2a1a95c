"""Reach against ground truth: every fix of the shipped notes that a release wheel can take (the
sheet's rows with ``onefix`` yes: the 21 Python-only fixes, and the 8 kernel fixes whose op files
are rebuilt over the release's) accepted and run as a one-fix study on its own release (real torch
1.4.0, 1.5.0 and 1.5.1 wheels), with reach on. A one-fix study runs the release with and without
exactly the fix, so a fix that reach calls ``not reached`` must train bit-identically in both arms:
``not triggered`` (or ``not exercised``, where the override check saw none of a kernel fix's
operators called). The table it prints is docs/reach.md's agreement table."""
import csv
import json

import pytest
import yaml
from conftest import ROOT
from workflow import project_copy, snakemake

from bugimpact.io import read_csv

pytestmark = [pytest.mark.slow, pytest.mark.long]  # 27 one-fix studies: make test-long
WHEEL_CACHE = str(ROOT / "data" / "cache" / "wheels")  # one download, shared with the other tests


def test_no_fix_reach_calls_not_reached_changes_training(tmp_path):
    work = project_copy(tmp_path / "p")
    config = yaml.safe_load((ROOT / "configs" / "releases.yaml").read_text())
    config["bugs"]["controls"], config["bugs"]["fixes"] = {}, {}
    config["artifacts"]["wheel_cache"] = WHEEL_CACHE
    config["train"].update(runs=2, epochs=2)  # bit-identity holds in each run, or it does not
    path = work / "ground-truth.yaml"
    path.write_text(yaml.safe_dump(config))
    snakemake(work, "--configfile", str(path), "--until", "sheet_merge")
    sheet = work / "data" / "filter" / "pytorch.csv"
    columns, rows = read_csv(sheet)
    python = sorted(r["id"] for r in rows if r["onefix"] == "yes")
    kernels = sorted(r["id"] for r in rows if r["onefix"].startswith("yes: kernels (op"))  # registered
    assert len(python) == 21 and len(kernels) == 6  # (the sheet: the notes' fixes, not the paper's)
    fixes = sorted(python + kernels)
    for row in rows:
        row["decision"] = "accept" if row["id"] in fixes else row["decision"]
    with open(sheet, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)

    snakemake(work, "--configfile", str(path), timeout=3600)
    verdicts = {r["bug"]: r for r in read_csv(work / "results" / "releases" / "stats" / "verdicts.csv")[1]}
    assert sorted(verdicts) == fixes
    print("\n| fix | reach | one-fix study | how the diff was placed |")
    for bug in fixes:
        v = verdicts[bug]
        print(f"| {bug} | {v['reach']} | {v['verdict']} | {placed(work, bug, v)} |")
    # a fix whose diff the release cannot take (a changed line is not in it) has no runs: no truth
    studied = {bug: v for bug, v in verdicts.items() if v["verdict"] != "incomplete"}
    # (a cuda-tagged fix: "not triggered on cpu"; a kernel fix whose override check found none of its
    # operators called: "not exercised", the arm being the release for this workload)
    wrong = {bug: v["verdict"] for bug, v in studied.items() if v["reach"] == "not reached"
             and not (v["verdict"].startswith("not triggered") or v["verdict"] == "not exercised")}
    assert not wrong, f"reach said not reached, yet the runs differ: {wrong}"
    assert sum(v["reach"] == "not reached" for v in studied.values()) >= 10  # it did judge
    assert sum(verdicts[bug]["verdict"] == "incomplete" for bug in python) <= 4
    assert {"pr38156", "pr36503"} <= set(studied)  # placed within the line, and re-indented
    for bug, v in verdicts.items():  # refused, and said why: a line the release lacks, or the build
        if v["verdict"] == "incomplete":
            assert ("is not in the copy" if bug in python else "override build refused: ") in v["reason"], \
                (bug, v["reason"])
    for bug in kernels:  # every kernel fix studied, its override checked, or refused naming why
        gate = json.loads(next((work / "results" / "arms" / bug).glob("*.json")).read_text())
        assert gate["runnable"] == (verdicts[bug]["verdict"] != "incomplete"), gate
        if gate["runnable"]:
            assert gate["override_checks"]["buggy"]["passed"], (bug, gate["override_checks"])
    assert sum(verdicts[bug]["verdict"] != "incomplete" for bug in kernels) >= 5


def placed(work, bug, verdict):
    """How the buggy arm's artifact placed the fix's diff (its placements that were not exact),
    or, for a fix that could not be made, why."""
    import json
    for manifest in (work / "results" / "artifacts").glob("onefix-buggy-*/manifest.json"):
        found = json.loads(manifest.read_text())
        if found.get("diff_origin", "").endswith(f"/{bug}.diff"):
            moved = [f"{p['file']}:{p['line']} {p['placed']}" for p in found.get("placement", [])
                     if p["placed"] != "exact"]
            return "; ".join(moved) or "exact"
    return verdict["reason"].split("the diff does not apply to the release's files, in either "
                                   "direction: ")[-1][:200]
