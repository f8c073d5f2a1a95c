"""A bug studied with named workloads: one study item per workload, each keyed by its experiment,
and every name checked where it was written (the sheet's row and column, the config's field)."""
import pytest
from conftest import ROOT, config_with

from bugimpact.io import InputError
from bugimpact.plan import Plan
from bugimpact.sheet import COLUMNS

SHEET_SCHEMA = ROOT / "schemas" / "sheet.schema.yaml"
WORKLOADS = [{"name": "lstm", "model": "lstm"}, {"name": "vggx", "model": "vggx", "challenge": "digits32"},
             {"name": "resnet18", "model": "torchvision.resnet18", "challenge": "digits32"}]
SAME = {"buggy": {"source": "installed"}, "corrected": {"source": "installed"}}


def plan(tmp_path, **changes):
    settings = {"sheet": str(tmp_path / "none.csv"), "workloads": WORKLOADS, "reach.enabled": False,
                "bugs.controls": {"aa": SAME, "bb": {**SAME, "workloads": ["lstm", "vggx"]}}}
    return Plan(config_with(**{**settings, **changes}), SHEET_SCHEMA)


def test_a_bug_naming_workloads_is_one_item_per_workload_each_with_its_own_experiment(tmp_path):
    made = plan(tmp_path)
    assert sorted(made.bugs) == ["aa", "bb@lstm", "bb@vggx"]
    keys = {name: bug.key for name, bug in made.bugs.items()}
    assert len(set(keys.values())) == 3  # runs, seeds, statistics: each item its own
    assert made.experiment_of(keys["aa"])["model"] == "smallcnn"  # train as it is
    assert made.experiment_of(keys["bb@lstm"])["model"] == "lstm"
    assert made.experiments[keys["bb@vggx"]]["attributes"]["model"] == "vggx"  # what its runs read
    assert made.data_files(keys["bb@vggx"])[0] == "results/data/digits32.npz"
    assert made.data_files(keys["bb@lstm"])[0] == "results/data/digits.npz"
    # the item without a workload keeps the key it had before workloads existed: nothing retrains
    before = Plan(config_with(**{"sheet": str(tmp_path / "none.csv"), "reach.enabled": False,
                                 "bugs.controls": {"aa": SAME}}), SHEET_SCHEMA)
    assert before.bug("aa").key == keys["aa"]
    assert made.bug("bb@lstm").runs_folder.startswith("results/runs/bb@lstm/")


def test_a_workload_named_nowhere_is_refused_naming_the_config_field(tmp_path):
    with pytest.raises(InputError) as refused:
        plan(tmp_path, **{"bugs.controls": {"bb": {**SAME, "workloads": ["gru"]}}})
    assert "field 'bugs.controls.bb.workloads'" in str(refused.value) and "'gru' is not one of" in str(refused.value)


def test_a_sheet_rows_workload_is_checked_naming_the_sheet_row_and_column(tmp_path):
    sheet = tmp_path / "sheet.csv"
    row = {c: "" for c in COLUMNS}
    sha = "a" * 40
    lines = [",".join(COLUMNS)]
    for bug, workloads in (("pr1", "lstm; vggx"), ("pr2", "lstm;gru")):
        row.update(id=bug, decision="accept", buggy_sha=sha, corrected_sha="b" * 40, workloads=workloads)
        lines.append(",".join(row[c] for c in COLUMNS))
    sheet.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as refused:
        Plan(config_with(sheet=str(sheet), workloads=WORKLOADS, **{"reach.enabled": False, "artifacts.source": "installed"}), SHEET_SCHEMA)
    assert str(refused.value).startswith(f"{sheet}, row 3, field 'workloads': workload 'gru'"), refused.value
    sheet.write_text(sheet.read_text().replace("lstm;gru", "lstm"))
    made = Plan(config_with(sheet=str(sheet), workloads=WORKLOADS, **{"reach.enabled": False, "artifacts.source": "installed"}), SHEET_SCHEMA)
    assert sorted(b for b in made.bugs if b.startswith("pr")) == ["pr1@lstm", "pr1@vggx", "pr2@lstm"]
    assert made.bug("pr1@vggx").spec["sheet_row"]["id"] == "pr1"


def test_a_workload_whose_model_needs_more_of_a_runtime_runs_in_its_own_and_renames_none(tmp_path):
    """A torchvision model needs torchvision in its runtime. Giving every runtime of a small-CNN
    study that need would name them anew and retrain their finished runs: the workload's arms run
    in runtimes of their own, made with its model's settings, and the others keep theirs."""
    pypi = {"buggy": {"source": "pypi", "version": "1.5.1"}, "corrected": {"source": "pypi", "version": "1.5.1"}}
    settings = {"runtime.kind": "venv", "runtime.python": "3.7"}
    alone = plan(tmp_path, **settings, **{"bugs.controls": {"aa": pypi}})
    made = plan(tmp_path, **settings, **{"bugs.controls": {"aa": pypi, "bb": {**pypi, "workloads": ["resnet18", "lstm"]}}})
    ours = made.artifact_of("aa", "buggy")
    assert ours == alone.artifact_of("aa", "buggy") and made.bug("aa").key == alone.bug("aa").key
    assert made.artifact_of("bb@lstm", "buggy") == ours  # an LSTM needs what the small CNN does
    theirs = made.artifact_of("bb@resnet18", "buggy")
    assert theirs.ident == ours.ident and theirs.runtime != ours.runtime
    assert made.runtimes.settings(theirs.ident, theirs.runtime)["model"]["model"] == "torchvision.resnet18"
    assert made.runtimes.made_with(theirs.ident, theirs.runtime)["model_needs"]
    assert made.runtimes.made_with(ours.ident, ours.runtime) == alone.runtimes.made_with(ours.ident, ours.runtime)
    # its trace and check run in its runtime too, and the store keeps both runtimes
    key = made.bug("bb@resnet18").key
    assert made.placed(theirs.ident, key) == theirs and made.placed(ours.ident, made.bug("aa").key) == ours
    assert {theirs, ours} <= made.placed_artifacts()


def test_workloads_the_config_cannot_hold_are_refused_naming_the_key():
    with pytest.raises(InputError) as twice:
        config_with(workloads=[{"name": "lstm", "model": "lstm"}, {"name": "lstm", "model": "vggx"}])
    assert "key 'workloads[1].name': 'lstm' names two workloads" in str(twice.value)
    with pytest.raises(InputError) as unknown:
        config_with(workloads=[{"name": "gru", "model": "gru"}])
    assert "key 'workloads[0].model'" in str(unknown.value), unknown.value
