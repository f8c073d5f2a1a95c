"""The workflow as a user runs it: lint, dry runs, and the default study end to end (faster
config) in a temporary copy of the project, with a deleted record and a SIGKILL mid-study."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from workflow import IGNORE, job_counts, project_copy, snakemake

from bugimpact.config import CONFIG_SCHEMA, SHEET_SCHEMA, load_config, validate_config
from bugimpact.io import InputError, read_csv
from bugimpact.plan import Plan

FAST = str(ROOT / "tests" / "configs" / "fast.yaml")
pytestmark = pytest.mark.slow


def test_lint_is_clean_but_for_the_declined_conda_advice():
    """The one lint left asks for a conda environment per rule; declined on purpose (docs/development.md:
    the framework under study lives in each arm's runtime, which a conda env cannot express)."""
    out = snakemake(ROOT, "--lint", check=False)
    lints = [line.strip() for line in (out.stdout + out.stderr).splitlines()
             if line.strip().startswith("* ")]
    assert set(lints) == {"* Specify a conda environment or container for each rule.:"}
    assert len(lints) == 29  # one per rule, nothing else


def test_default_config_dry_run(tmp_path):
    work = project_copy(tmp_path / "p")
    out = snakemake(work, "-n")
    counts = job_counts(out.stdout)
    # 3 controls, nothing run yet: each bug's runs join the DAG once its arms gate is written
    assert counts["arms"] == 3 and counts["bug_stats"] == 3 and counts["mine"] == 1
    assert "train" not in counts and "checkpoint jobs" in out.stdout
    # parsing writes nothing into a person's files, in a dry run or any other command that only
    # reads the workflow (parsing made an empty sheet, unless the command line said -n)
    snakemake(work, "--list-rules")
    assert not (work / "data" / "filter" / "pytorch.csv").exists()


def test_a_path_under_an_experiment_key_the_plan_does_not_know_matches_no_rule(tmp_path):
    """A typed path under a made-up key (15 epochs configured, e99 in the path) once trained and
    wrote a record whose path lied about its run. The key wildcard is now the plan's keys."""
    work = project_copy(tmp_path / "p")
    key = Plan(load_config(work / "config.yaml"), SHEET_SCHEMA).keys["aa"]
    assert "-e15-" in key
    made_up = key.replace("-e15-", "-e99-")
    out = snakemake(work, "-n", f"results/runs/aa/{made_up}/buggy/0.json", check=False)
    assert out.returncode != 0 and "MissingRuleException" in out.stderr + out.stdout, out.stderr[-2000:]
    real = snakemake(work, "-n", f"results/runs/aa/{key}/buggy/0.json")
    assert "rule train:" in real.stdout or "train" in job_counts(real.stdout), real.stdout[-2000:]


def test_paper_config_dry_run_prints_the_expected_jobs(tmp_path):
    """18 bugs x 2 arms x 50 runs, a docker build per commit, on a GPU VM (dry run here)."""
    work = project_copy(tmp_path / "p")
    (work / "data" / "raw").mkdir(exist_ok=True)
    (work / "data" / "raw" / "cifar-10-python.tar.gz").write_bytes(b"")  # the user provides it
    out = snakemake(work, "-n", "--configfile", "configs/paper.yaml")
    counts = job_counts(out.stdout)
    print(out.stdout[out.stdout.find("Job stats"):][:900])
    # first the reach step: one trace per era's release wheel (1.5.0, 1.6.0), one verdict per
    # bug; a bug's builds join the DAG once its verdict says it can be reached
    assert counts["reach"] == 18 and counts["reach_trace"] == 2 and counts["artifact"] == 2
    assert "docker_build" not in counts and counts["arms"] == 18 and counts["bug_stats"] == 18
    paper = yaml.safe_load((work / "configs" / "paper.yaml").read_text())
    paper["reach"] = {"skip": False}  # no gate: every build is asked for at once
    (work / "nogate.yaml").write_text(yaml.safe_dump(paper))
    counts = job_counts(snakemake(work, "-n", "--configfile", "nogate.yaml").stdout)
    assert counts["docker_build"] == 36 and counts["build_status"] == 36 and counts["runtime"] == 38
    # what each bug's arms gate then lets in: 2 x 50 runs; on CUDA the early decision waits for a
    # measured repeat; looks at 10, 20 and 30 pairs
    config = validate_config(yaml.safe_load((work / "configs" / "paper.yaml").read_text()))
    here = os.getcwd()
    os.chdir(work)
    try:
        plan = Plan(config, SHEET_SCHEMA)
    finally:
        os.chdir(here)
    assert sum(len(plan.bug(bug).records(plan.runs)) for bug in plan.bugs) == 1800
    assert plan.stages() == [10, 20, 30] and plan.early_runs() == 2
    assert all(len(plan.repeat_records(bug)) == 1 for bug in plan.bugs)


def test_the_torch_2_upgrade_study_makes_one_venv_per_release(tmp_path):
    """configs/upgrade.yaml: two 2.x releases and three controls on the newer one need two
    artifacts and two runtimes, whatever the number of bugs and arms that use them."""
    work = project_copy(tmp_path / "p")
    counts = job_counts(snakemake(work, "-n", "--configfile", "configs/upgrade.yaml").stdout)
    assert counts["artifact"] == 2 and counts["runtime"] == 2 and counts["arms"] == 4


def test_slurm_profile_dry_run(tmp_path):
    pytest.importorskip("snakemake_executor_plugin_slurm")
    work = project_copy(tmp_path / "p")
    (work / "data" / "raw").mkdir(exist_ok=True)
    (work / "data" / "raw" / "cifar-10-python.tar.gz").write_bytes(b"")
    out = snakemake(work, "-n", "--profile", "profiles/slurm", "--configfile", "configs/paper.yaml")
    counts = job_counts(out.stdout)
    assert counts["arms"] == 18 and counts["reach"] == 18 and counts["reach_trace"] == 2


def test_config_errors_name_the_key(tmp_path):
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    config["train"]["epoch"] = 3
    with pytest.raises(InputError, match=r"key 'train': unknown key\(s\) 'epoch'; allowed: .*epochs"):
        validate_config(config)
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    config["train"]["runs"] = "many"
    with pytest.raises(InputError, match=r"key 'train.runs': 'many' is not of type 'integer'"):
        validate_config(config)
    config["train"]["runs"] = 5
    config["stats"]["correction"] = "bonferroni"
    with pytest.raises(InputError, match=r"key 'stats.correction'"):
        validate_config(config)
    # through the workflow itself
    work = project_copy(tmp_path / "p")
    out = snakemake(work, "-n", "--config", "train={epochz: 2}", check=False)
    assert out.returncode != 0 and "unknown key(s) 'epochz'" in out.stdout + out.stderr


def test_defaults_are_filled():
    config = load_config(ROOT / "config.yaml")
    assert config["train"]["early_decision"]["repeat"] == "cuda" and config["train"]["pooling"] == "deterministic"
    assert config["artifacts"]["docker"]["build_command"].startswith("python setup.py")
    assert CONFIG_SCHEMA.exists()


def test_bad_sheet_stops_the_workflow_with_file_row_and_column(tmp_path):
    work = project_copy(tmp_path / "p")
    sheet = work / "data" / "filter" / "pytorch.csv"
    sheet.write_text("id,decision,reason,buggy_sha,corrected_sha,notes\npr1,accept,,abc,,\n")
    out = snakemake(work, "-n", check=False)
    text = out.stdout + out.stderr
    assert out.returncode != 0
    assert "data/filter/pytorch.csv, row 2, field 'buggy_sha'" in text


def test_an_accepted_row_that_cannot_run_is_said_in_one_line_and_the_rest_goes_on(tmp_path):
    """Before: accepting an unresolved row stopped the default study ("'' does not match"), and a
    resolved one stopped it too (its runtime, local, runs only the installed torch)."""
    work = project_copy(tmp_path / "p")
    sheet = work / "data" / "filter" / "pytorch.csv"
    sha = "a" * 40
    sheet.write_text("id,decision,reason,buggy_sha,corrected_sha,notes\n"
                     f"pr1,accept,,,,\npr2,accept,,{sha},{'b' * 40},\npr3,reject,other,,,x\n")
    out = snakemake(work, "-n")
    text = out.stdout + out.stderr
    assert "bugimpact: pr1 is accepted in data/filter/pytorch.csv but not run: unresolved" in text
    assert "bugimpact: pr2 is accepted in data/filter/pytorch.csv but not run: runtime.kind " \
           "local runs only the installed torch, not a docker arm" in text
    assert job_counts(out.stdout)["arms"] == 3  # the three controls go on
    status = subprocess.run([sys.executable, "-m", "bugimpact", "status"], cwd=work,
                            capture_output=True, text=True,
                            env=dict(os.environ, PYTHONPATH=str(work / "src")))
    row = next(line for line in status.stdout.splitlines() if line.startswith("pr1 "))
    assert row.split()[1:4] == ["accept", "not", "run:"] and "unresolved" in row


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    work = project_copy(tmp_path_factory.mktemp("study") / "p")
    started = time.time()
    snakemake(work, "--configfile", FAST)
    return work, time.time() - started


def rows(path):
    return read_csv(path)[1]


def test_study_outputs_and_verdicts(study):
    work, _ = study
    res = work / "results" / "calibration"  # the study's own folder; runs and the rest are shared
    plan = Plan(load_config(FAST), SHEET_SCHEMA)
    for path in ["mined/bugs.csv", "mined/releases.csv", "resolved/commits.csv",
                 "filter/funnel.csv", "stats/pvalues.csv", "stats/verdicts.csv",
                 "stats/summary.csv", "figures/std.png", "report.html"] + \
            [f"stats/{b}/{plan.bug(b).key}.csv" for b in ("aa", "fault-momentum", "fault-labelnoise")] + \
            [f"figures/{b}.png" for b in ("aa", "fault-momentum", "fault-labelnoise")]:
        assert (res / path).stat().st_size > 0, path
    assert (work / "data" / "filter" / "pytorch.csv").exists()
    verdicts = {r["bug"]: r for r in rows(res / "stats" / "verdicts.csv")}
    assert verdicts["aa"]["verdict"] == "not triggered"
    assert "early decision" in verdicts["aa"]["reason"] and verdicts["aa"]["skipped"] == "16"
    early = json.loads(next((work / "results" / "early" / "aa").glob("*.json")).read_text())
    assert early["repeat"] == "identical"  # buggy run 0, run twice for real, bit-identical
    assert next((work / "results" / "repeats" / "aa").glob("*/buggy/0.json")).exists()
    assert verdicts["aa"]["scope"].startswith("cpu; buggy torch ")
    assert "fingerprinted: parameters at initialisation" in verdicts["aa"]["reason"]
    assert float(verdicts["fault-momentum"]["effect"]) < 0 and float(verdicts["fault-momentum"]["mde"]) > 0
    # reach: the fault controls are reached (the harness injects them), the A/A control is not
    assert verdicts["fault-momentum"]["reach"] == verdicts["fault-labelnoise"]["reach"] == "reached"
    assert "injected by the harness" in verdicts["fault-momentum"]["reach_detail"]
    assert verdicts["aa"]["reach"] == "not reached"
    assert verdicts["fault-momentum"]["verdict"] == "impact"
    assert verdicts["fault-labelnoise"]["verdict"] in ("impact", "no evidence of impact")
    table = rows(res / "stats" / "pvalues.csv")
    assert [r["bug"] for r in table] == ["calibration-aa", "calibration-fault-labelnoise",
                                         "calibration-fault-momentum"]
    assert table[0]["accuracy_adjusted"] == ""  # not triggered: not part of the Holm family
    columns = read_csv(res / "stats" / "pvalues.csv")[0]
    assert columns[:5] == ["bug", "accuracy", "precision", "recall", "f1"]
    per_bug = rows(next((res / "stats" / "fault-momentum").glob("*.csv")))
    assert [r["metric"] for r in per_bug] == ["accuracy", "precision", "recall", "f1"]
    assert all(r["primary_test"] == "wilcoxon signed-rank" for r in per_bug)
    summary = {(r["section"], r["name"]): int(r["count"]) for r in rows(res / "stats" / "summary.csv")}
    assert summary[("funnel", "mined")] == 106 and summary[("verdict", "not triggered")] == 1
    # the record of a real run, as the harness wrote it inside the runtime
    record = next((work / "results" / "runs" / "fault-momentum").glob("*/buggy/0.json"))
    assert '"status": "ok"' in record.read_text()
    # what it computed is its experiment's file, the one its path names
    key = record.parent.parent.name
    found = json.loads((work / "results" / "experiments" / f"{key}.json").read_text())
    spec = json.loads(record.read_text())["spec"]
    assert found["key"] == key and spec["experiment_key"] == key
    assert {k: spec[k] for k in found["attributes"]} == found["attributes"]
    assert list((work / "results" / "seeds" / "aa").glob("*.json"))
    # Snakemake's own report, with the captions, works too
    snakemake(work, "--configfile", FAST, "--report", "results/calibration/snakemake-report.html")
    assert "Table IV" in (res / "snakemake-report.html").read_text(errors="replace")


def test_deleting_one_record_reruns_only_that_record(study):
    work, _ = study
    target = next((work / "results" / "runs" / "fault-labelnoise").glob("*/corrected/7.json"))
    others = {p: p.stat().st_mtime_ns for p in (work / "results" / "runs").rglob("*.json")
              if p != target}
    before = target.read_text()
    target.unlink()
    dry = snakemake(work, "--configfile", FAST, "-n")
    text = " ".join((dry.stdout + dry.stderr).split())
    assert "train 1" in text  # only this record's job trains; the statistics are redone
    snakemake(work, "--configfile", FAST)
    after = target.read_text()
    strip = lambda s: [line for line in s.splitlines()  # noqa: E731 (the digest covers wall_s)
                       if '"wall_s"' not in line and '"digest"' not in line]
    assert strip(after) == strip(before)
    assert {p: p.stat().st_mtime_ns for p in others} == others


def test_report_renders_in_headless_chromium(study, tmp_path):
    work, _ = study
    chromium = "/usr/bin/chromium"
    if not os.path.exists(chromium):
        pytest.skip("chromium is not installed (the CI script installs it)")
    page = tmp_path / "report.html"
    # at 1400 px every table fits inside the body: no table scrolls sideways
    probe = ("<script>window.addEventListener('load',function(){document.body.setAttribute("
             "'data-images-ok',String(Array.from(document.images).every(function(i){"
             "return i.naturalWidth>0;})));var right=document.body.getBoundingClientRect().right;"
             "document.body.setAttribute('data-wide-tables',Array.from(document.querySelectorAll("
             "'table')).filter(function(t){return t.getBoundingClientRect().right>right+1;})"
             ".map(function(t){return t.id;}).join(' ')||'none');});</script>")
    page.write_text((work / "results" / "calibration" / "report.html").read_text().replace("</body>", probe + "</body>"))
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0"]
    out = subprocess.run([chromium, *flags, "--window-size=1400,1800", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    dom = out.stdout
    assert 'data-images-ok="true"' in dom and 'data-wide-tables="none"' in dom
    assert '<table id="verdicts">' in dom and '<table id="pvalues">' in dom
    assert dom.count("<img") == 4
    assert "Uncaught" not in out.stderr and "Failed to load resource" not in out.stderr
    shot = tmp_path / "report.png"
    subprocess.run([chromium, *flags, "--window-size=1200,2400", f"--screenshot={shot}",
                    page.as_uri()], capture_output=True, timeout=120)
    assert shot.stat().st_size > 10_000


def test_sigkill_mid_study_then_rerun_gives_the_same_tables(study, tmp_path):
    work, _ = study
    again = project_copy(tmp_path / "p")
    proc = subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "2", "--configfile", FAST],
                            cwd=again, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 600
    while len(list((again / "results" / "runs").rglob("*.json"))) < 6 if (again / "results").exists() \
            else True:
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (again / "results" / "calibration" / "stats" / "pvalues.csv").exists()
    snakemake(again, "--unlock")
    snakemake(again, "--configfile", FAST)
    for name in ("pvalues.csv", "verdicts.csv"):
        assert (again / "results" / "calibration" / "stats" / name).read_text() == \
            (work / "results" / "calibration" / "stats" / name).read_text()


def test_a_yaml_error_in_the_config_names_the_file_and_line(tmp_path):
    work = project_copy(tmp_path / "p")
    (work / "config.yaml").write_text((work / "config.yaml").read_text() + "train: {epochs: 3\n")
    out = snakemake(work, "-n", check=False)
    assert out.returncode != 0
    assert "config.yaml: not valid YAML at line" in out.stdout + out.stderr


def mtimes(work):
    return {p: p.stat().st_mtime_ns for p in (work / "results" / "runs").rglob("*.json")}


def test_deleting_an_early_record_retrains_only_it(study):
    """Run 0 gates the runs after it (the early decision): rewriting that decision with the same
    content must not retrain them."""
    work, _ = study
    target = next((work / "results" / "runs" / "fault-momentum").glob("*/buggy/0.json"))
    others = {p: t for p, t in mtimes(work).items() if p != target}
    target.unlink()
    snakemake(work, "--configfile", FAST)
    assert target.exists() and {p: mtimes(work)[p] for p in others} == others


def test_garbage_in_a_seeds_file_stops_with_its_path_and_deletes_nothing(study):
    work, _ = study
    seeds = next((work / "results" / "seeds" / "fault-momentum").glob("*.json"))
    kept, before = seeds.read_bytes(), mtimes(work)
    seeds.write_text('{"bug": "fault-momentum", "seeds": [1, 2, "x')
    out = snakemake(work, "--configfile", FAST, check=False)
    assert out.returncode != 0 and f"results/seeds/fault-momentum/{seeds.name}: not valid JSON" in out.stderr
    assert mtimes(work) == before
    seeds.write_bytes(kept)  # restored: nothing to redo
    dry = snakemake(work, "--configfile", FAST, "-n")
    assert "Nothing to be done" in dry.stdout + dry.stderr and mtimes(work) == before


def test_a_truncated_record_is_named_and_verify_removes_only_it(study):
    work, _ = study
    target = next((work / "results" / "runs" / "fault-labelnoise").glob("*/buggy/5.json"))
    target.write_text(target.read_text()[:300])
    out = snakemake(work, "--configfile", FAST, check=False)
    assert out.returncode != 0
    assert f"{target.relative_to(work)}: not valid JSON" in out.stderr + out.stdout
    cli = [sys.executable, "-m", "bugimpact", "verify", "--runs", "results/runs"]
    env = dict(os.environ, PYTHONPATH=str(work / "src"))
    listed = subprocess.run(cli, cwd=work, capture_output=True, text=True, env=env)
    assert listed.returncode == 1 and "1 broken record(s)" in listed.stdout
    assert str(target.relative_to(work)) in listed.stdout
    others = {p: t for p, t in mtimes(work).items() if p != target}
    removed = subprocess.run(cli + ["--remove"], cwd=work, capture_output=True, text=True, env=env)
    assert removed.returncode == 0 and not target.exists()
    snakemake(work, "--configfile", FAST)
    assert target.exists() and {p: mtimes(work)[p] for p in others} == others


def test_a_failed_preflight_starts_no_build(tmp_path):
    """An accepted row whose commits the clone lacks: the preflight fails and no build starts. The
    study is that row alone (no controls, whose runtimes would be made beside it), in a config
    file: ``--config bugs={controls: {}}`` removes no control, and is refused."""
    work = project_copy(tmp_path / "p")
    sheet = work / "data" / "filter" / "pytorch.csv"
    sheet.write_text(f"id,decision,reason,buggy_sha,corrected_sha\npr1,accept,,{'a' * 40},{'b' * 40}\n")
    clone = tmp_path / "clone"
    subprocess.run(["git", "init", "-q", str(clone)], check=True)
    config = yaml.safe_load((work / "config.yaml").read_text())
    config["bugs"]["controls"] = {}
    config["runtime"]["kind"] = "docker"
    config["artifacts"]["docker"] = {"clone": str(clone)}
    (work / "one-row.yaml").write_text(yaml.safe_dump(config))
    out = snakemake(work, "--configfile", "one-row.yaml", check=False)
    preflight = work / "logs" / "preflight.log"
    said = (f"exit {out.returncode}\n{out.stderr[-6000:]}\n--- {preflight.name}:\n"
            f"{preflight.read_text() if preflight.exists() else '(none)'}")
    assert out.returncode != 0, said
    assert "so no build starts" in out.stderr and "commits (docker)" in out.stderr, said
    assert "2 of 2 not in" in preflight.read_text(), said
    assert not list((work / "logs").glob("artifacts/docker-*.log")), said  # no build was started
    stands = out.stderr[out.stderr.rindex("\nbug "):]  # the table of where the study stands
    assert "\npr1 " in stands and " control " not in stands, said  # that row alone


def test_a_group_sequential_study_stops_a_clear_impact_at_its_first_look(tmp_path):
    """Real runs: SGD momentum ignored is a clear effect, so the design stops it after 6 of 12
    pairs; the later runs are never made, and the verdict says where it stopped."""
    work = project_copy(tmp_path / "p")
    config = yaml.safe_load(Path(FAST).read_text())
    config["bugs"]["controls"] = {k: v for k, v in config["bugs"]["controls"].items()
                                  if k == "fault-momentum"}
    config["train"].update(runs=12, epochs=3, early_decision={"enabled": False},
                           sequential={"enabled": True, "stages": [6], "spending": "pocock"})
    (work / "seq.yaml").write_text(yaml.safe_dump(config))
    snakemake(work, "--configfile", "seq.yaml")
    res = work / "results"
    verdict = rows(res / "calibration" / "stats" / "verdicts.csv")[0]
    assert verdict["verdict"] == "impact" and verdict["runs_saved"] == "12"
    assert verdict["stopped_at_stage"] == "1 of 2 (6 pairs, impact)"
    decision = json.loads(next((res / "stages" / "fault-momentum").glob("*/6.json")).read_text())
    assert decision["decision"] == "impact" and abs(decision["z"]) >= decision["bound"]
    made = sorted(int(p.stem) for p in (res / "runs" / "fault-momentum").glob("*/buggy/*.json"))
    assert made == list(range(6))
    summary = {(r["section"], r["name"]): r["count"]
               for r in rows(res / "calibration" / "stats" / "summary.csv")}
    assert summary[("runs", "saved_by_sequential_design")] == "12"


def test_editing_the_sheet_refreshes_the_funnel_summary_and_report(study):
    """Before: rejecting rows and rerunning said "Nothing to be done", and the funnel still counted
    them undecided. The sheet is now an input of the funnel (the merge is a side effect with its own
    report), so an edit reruns the funnel, the summary and the report, and nothing else."""
    work, _ = study
    res = work / "results"
    sheet = work / "data" / "filter" / "pytorch.csv"
    columns, sheet_rows = read_csv(sheet)
    for row in sheet_rows[:3]:
        row.update(decision="reject", reason="no_application")
    from bugimpact.io import write_csv
    write_csv(sheet, sheet_rows, columns)
    runs = {p: p.stat().st_mtime_ns for p in (res / "runs").rglob("*.json")}
    dry = snakemake(work, "--configfile", FAST, "-n")
    jobs = job_counts(dry.stdout)
    assert jobs.get("funnel") == 1 and jobs.get("report") == 1 and "sheet_merge" not in jobs
    assert "train" not in jobs
    snakemake(work, "--configfile", FAST)
    study = res / "calibration"
    funnel = {r["stage"]: int(r["count"]) for r in rows(study / "filter" / "funnel.csv")}
    assert funnel["rejected"] == 3 and funnel["undecided"] == 103
    summary = {(r["section"], r["name"]): r["count"] for r in rows(study / "stats" / "summary.csv")}
    assert summary[("funnel", "rejected")] == "3"
    assert "<td>rejected</td><td>3</td>" in (study / "report.html").read_text()
    assert read_csv(sheet)[1][0]["decision"] == "reject"  # the person's edit is kept
    assert {p: p.stat().st_mtime_ns for p in (res / "runs").rglob("*.json")} == runs
    again = snakemake(work, "--configfile", FAST, "-n")
    assert "Nothing to be done" in again.stdout + again.stderr


def test_the_scripts_read_params_and_files_never_the_config_or_resources():
    for script in sorted((ROOT / "scripts").glob("*.py")):
        text = script.read_text()
        assert "snakemake.config" not in text and "snakemake.resources" not in text, script.name


def test_the_same_environment_called_by_another_name_retrains_nothing(study):
    """`python -m snakemake` (make study) then `python3 -m snakemake` (or the snakemake script) on
    one environment: one interpreter, so nothing is made again (it once remade every runtime and
    so retrained every run)."""
    work, _ = study
    here = Path(sys.executable)
    other = here.with_name("python3" if here.name != "python3" else "python")
    assert other.exists() and other != here
    out = subprocess.run([str(other), "-m", "snakemake", "--cores", "2", "-n", "--configfile", FAST],
                         cwd=work, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Nothing to be done" in out.stdout + out.stderr, (out.stdout + out.stderr)[-3000:]


def test_how_runs_are_attempted_retrains_nothing_and_a_statistic_redoes_only_statistics(study, tmp_path):
    """Retries, timeout, fork server, GPUs (train.gpus and runtime.gpus), runs per GPU, wheel
    cache and pip index are untracked params; alpha is a tracked one: its change redoes the
    statistics and the report, never a run."""
    work, _ = study
    config = yaml.safe_load(Path(FAST).read_text())
    config["train"].update(retries=2, timeout_s=999, fork_server=False, gpus=3, runs_per_gpu=2)
    config["runtime"]["gpus"] = "device=1"
    config["artifacts"] = {"wheel_cache": "elsewhere", "pip_index_url": "https://mirror.invalid/simple"}
    config["stats"]["alpha"] = 0.01
    (tmp_path / "changed.yaml").write_text(yaml.safe_dump(config))
    jobs = job_counts(snakemake(work, "--configfile", str(tmp_path / "changed.yaml"), "-n").stdout)
    assert jobs.get("bug_stats") == 3 and jobs.get("report") == 1
    assert not {"train", "train_repeat", "early_decision", "artifact", "runtime", "seeds"} & set(jobs)


def test_a_changed_experiment_is_trained_and_reported_in_one_run(study, tmp_path):
    """Another epoch count is another experiment key: its gates, runs and statistics are made in
    the run that sees it. Before, the statistics' path held no key: Snakemake made the new gates,
    then dropped the statistics it had planned (their files existed) and trained nothing, while
    the figures, the verdicts and the report were remade from the old experiment's statistics."""
    work = tmp_path / "p"
    shutil.copytree(study[0], work, symlinks=True)
    config = yaml.safe_load(Path(FAST).read_text())
    config["train"]["epochs"] += 1
    (work / "changed.yaml").write_text(yaml.safe_dump(config))
    done = snakemake(work, "--configfile", "changed.yaml")
    ran = done.stdout + done.stderr
    assert ran.count("rule train:") > 0 and ran.count("rule bug_stats:") == 3, ran[-3000:]
    key = Plan(validate_config(config), SHEET_SCHEMA).bug("fault-momentum").key
    stats = json.loads((work / "results" / "calibration" / "stats" / "fault-momentum" / f"{key}.json").read_text())
    assert stats["info"]["n_ok"]["buggy"] > 0
    epochs = {json.loads(p.read_text())["spec"]["epochs"]
              for p in (work / "results" / "runs" / "fault-momentum" / key).rglob("*.json")}
    assert epochs == {config["train"]["epochs"]}
    again = snakemake(work, "--configfile", "changed.yaml")
    assert "Nothing to be done" in again.stdout + again.stderr


def test_another_arm_trains_beside_the_runs_of_the_arm_before_and_going_back_retrains_nothing(study, tmp_path):
    """Seen: the run path named neither the artifact nor the release, so editing a fix's diff or
    its release trained the new arm's runs over the finished ones, and going back trained them all
    again. An arm here is a control's fault; a diff or a release is an artifact, keyed alike."""
    work = tmp_path / "p"
    shutil.copytree(study[0], work, symlinks=True)
    records = {p: p.read_bytes() for p in (work / "results" / "runs").rglob("*.json")}
    config = yaml.safe_load(Path(FAST).read_text())
    config["bugs"]["controls"]["fault-momentum"]["buggy"]["fault"] = "label_noise"
    config["train"]["runs"] = 4  # (not in the key: fewer runs of the new arm, for time)
    (work / "changed.yaml").write_text(yaml.safe_dump(config))
    snakemake(work, "--configfile", "changed.yaml")
    key = Plan(validate_config(config), SHEET_SCHEMA).bug("fault-momentum").key
    assert {json.loads(p.read_text())["spec"]["fault"] for p in
            (work / "results" / "runs" / "fault-momentum" / key / "buggy").glob("*.json")} == {"label_noise"}
    assert {p: p.read_bytes() for p in records} == records  # the arm before kept its runs
    back = job_counts(snakemake(work, "--configfile", str(FAST), "-n").stdout)
    assert not {"train", "train_repeat", "seeds", "early_decision", "runtime"} & set(back), back
    snakemake(work, "--configfile", str(FAST))
    assert {p: p.read_bytes() for p in records} == records


def test_a_changed_statistic_is_redone_in_the_same_run_that_redoes_the_reach_checkpoints(study, tmp_path):
    """With reach redone and alpha changed in one run, the reach verdicts came out with the bytes
    they had, so Snakemake skipped the arms gates it expected to remake, and with them dropped the
    statistics that wait on the gates: they stayed stale, with the figures and lines made from
    them, until a second run. A remade verdict now always differs (its judged_at)."""
    work = tmp_path / "p"
    shutil.copytree(study[0], work, symlinks=True)
    config = yaml.safe_load(Path(FAST).read_text())
    config["reach"] = {"steps": 4}
    config["stats"]["alpha"] = 0.04
    (work / "changed.yaml").write_text(yaml.safe_dump(config))
    ran = snakemake(work, "--configfile", "changed.yaml")
    done = ran.stdout + ran.stderr  # the jobs run, not those planned (a dropped job was planned)
    assert done.count("checkpoint reach:") == 3 and done.count("rule bug_stats:") == 3, done[-3000:]
    again = snakemake(work, "--configfile", "changed.yaml", "-n")
    assert "Nothing to be done" in again.stdout + again.stderr, (again.stdout + again.stderr)[-3000:]


# The version landed before this one: users have studies it made, and this one must take them over.
LANDED = "a15ff44"


def test_a_study_the_landed_version_made_is_taken_over_without_retraining(tmp_path):
    """A study made by the landed version, then continued by this one: no run, runtime, seed or
    experiment is made again (only what reads a changed setting: reach verdicts, statistics,
    the report), every record keeps its bytes, and then nothing is left to do."""
    work = tmp_path / "p"
    work.mkdir()
    landed = subprocess.run(["git", "-C", str(ROOT), "archive", LANDED], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(work)], input=landed.stdout, check=True)
    (work / "data" / "filter" / "pytorch.csv").unlink()  # a first run makes the sheet
    snakemake(work, "--configfile", "tests/configs/fast.yaml")
    records = {p: p.read_bytes() for p in (work / "results" / "runs").rglob("*.json")}
    sheet = (work / "data" / "filter" / "pytorch.csv").read_bytes()
    shutil.copytree(ROOT, work, ignore=IGNORE, symlinks=True, dirs_exist_ok=True)  # this version
    (work / "data" / "filter" / "pytorch.csv").write_bytes(sheet)  # the person's, as it was
    jobs = job_counts(snakemake(work, "--configfile", "tests/configs/fast.yaml", "-n").stdout)
    assert not {"train", "train_repeat", "runtime", "seeds", "experiment", "prepare_data",
                "early_decision"} & set(jobs), jobs
    snakemake(work, "--configfile", "tests/configs/fast.yaml")
    again = snakemake(work, "--configfile", "tests/configs/fast.yaml", "-n")
    assert "Nothing to be done" in again.stdout + again.stderr, (again.stdout + again.stderr)[-3000:]
    assert records and {p: p.read_bytes() for p in (work / "results" / "runs").rglob("*.json")} == records
