"""A study's model as the host sees it (``models``): which protocol builds it, what of its code is
in the experiment key under every runtime kind, and what a runtime must hold for it (the
torchvision released for its torch), refused with the reason where none exists."""
import sys

import pytest
from conftest import config_with

from bugimpact import models
from bugimpact.artifacts.interpreters import find
from bugimpact.artifacts.kinds import kind
from bugimpact.config import SHEET_SCHEMA
from bugimpact.harness.registry import model_error, model_protocol
from bugimpact.plan import Plan


def test_each_model_name_has_one_protocol():
    assert [model_protocol(n) for n in ("smallcnn", "torchvision.resnet18", "pkg.mod:Net", "pkg.Net")] == [
        "builtin", "torchvision", "dotted", "dotted"]
    assert model_protocol("torchvision.resnet-18") is None
    assert "torchvision.<model>" in model_error("resnet 18")


def test_torchvision_pins_come_from_the_table_and_a_torch_it_lacks_is_refused():
    model = models.model_of({"model": "torchvision.resnet18"})
    assert model.requirements("1.5.1") == [("torchvision", "0.6.1")]
    assert model.requirements("1.6.0") == [("torchvision", "0.7.0")]
    assert model.requirements("2.13.0+cpu") == [("torchvision", "0.28.0")]
    with pytest.raises(models.Refused, match=r"the torchvision released for torch 1.5.0a0\+gitabc, and "
                                             r"compatibility.csv names none"):
        model.requirements("1.5.0a0+gitabc")  # a build from source
    # the table is in every runtime's identity; a built-in model needs nothing of a runtime
    assert set(model.runtime_needs()) == {"torchvision"}
    assert models.model_of({"model": "smallcnn"}).runtime_needs() is None


def test_a_torchvision_build_missing_for_the_runtimes_python_is_refused_with_the_versions_there():
    """torchvision 0.6.1 has wheels for CPython 3.5-3.8 only: a 3.11 venv is refused before any
    install, naming what the index has for it (asked of PyPI, as the installer would)."""
    manifest = {"source": "pypi", "version_requested": "1.5.1"}
    with pytest.raises(models.Refused, match=r"no torchvision 0.6.1 wheel for cpython 3.11.* \(torch 1.5.1's\); "
                                             r"the versions that exist for it: .*0\.\d\d"):
        models.pins({"model": "torchvision.resnet18"}, manifest, kind("venv"), find("3.11"),
                    {"pip_index_url": ""})
    assert models.pins({"model": "torchvision.resnet18"}, manifest, kind("venv"), find("3.7"),
                       {"pip_index_url": ""}) == [("torchvision", "0.6.1")]


def test_a_runtime_that_installs_nothing_must_already_hold_the_models_library():
    """The local kind runs the host's interpreter, which has no torchvision here."""
    runtime = {"kind": "local", "python": sys.executable}
    with pytest.raises(models.Refused, match=r"the local runtime \(.*\) lacks torchvision 0.28.0 \(it has none\): "
                                             r"install it there, or use runtime.kind venv"):
        models.held([("torchvision", "0.28.0")], runtime)
    assert models.held([], runtime) == {}


def package(folder, body):
    (folder / "mymodels").mkdir(parents=True, exist_ok=True)
    (folder / "mymodels" / "__init__.py").write_text("")
    (folder / "mymodels" / "net.py").write_text(body)
    return folder


@pytest.mark.parametrize("runtime", ["local", "venv", "docker"])
def test_editing_a_models_code_changes_its_experiment_key_under_every_kind(tmp_path, monkeypatch, runtime):
    """Before, the key held the dotted name only: an edited model kept the runs of the old one.
    Local kinds find its code on the host's path; venv and docker runtimes install it from
    runtime.requirements, whose content names the runtime (and so the key)."""
    site = package(tmp_path / "site", "class Net:\n    width = 8\n")
    monkeypatch.syspath_prepend(str(site))
    settings = {"sheet": str(tmp_path / "none.csv"), "train.model": "mymodels.net:Net", "runtime.kind": runtime,
                "bugs.controls": {"aa": {"buggy": {"source": "installed"}, "corrected": {"source": "installed"}}}}
    if runtime != "local":
        settings["runtime.requirements"] = [str(site)]
        settings["runtime.python"] = "3.7" if runtime == "venv" else "python3"
        settings["bugs.controls"] = {"aa": {"buggy": {"source": "pypi", "version": "1.5.1"},
                                            "corrected": {"source": "pypi", "version": "1.5.1"}}}
    before = Plan(config_with(**settings), SHEET_SCHEMA).bug("aa").key
    assert before == Plan(config_with(**settings), SHEET_SCHEMA).bug("aa").key  # nothing edited
    (site / "mymodels" / "net.py").write_text("class Net:\n    width = 16\n")
    assert Plan(config_with(**settings), SHEET_SCHEMA).bug("aa").key != before
    # options are part of the experiment too; none given keeps the key it had without them
    with_options = dict(settings, **{"train.model_options": {"width": 4}})
    assert Plan(config_with(**with_options), SHEET_SCHEMA).bug("aa").key != Plan(
        config_with(**settings), SHEET_SCHEMA).bug("aa").key


def test_no_model_options_and_a_built_in_model_keep_the_keys_of_before(tmp_path):
    """A study of a built-in model with no options keeps its experiment keys, so its runs, across
    this change: its attributes are the fields they were before (no options, no code hash)."""
    from bugimpact.experiment import KEY_FIELDS, experiment, experiment_key
    train = config_with(sheet=str(tmp_path / "none.csv"))["train"]
    assert train["model_options"] == {}
    assert set(experiment(train)) == (set(KEY_FIELDS) - {"model_options"}) | {"harness_version"}
    assert experiment_key(train) != experiment_key(dict(train, model_options={"size": 8}))


def test_a_dotted_model_the_host_cannot_import_is_said_once_not_left_out_in_silence(caplog, monkeypatch):
    """Seen in review: a model not found on the host was left out of the experiment key without a
    word."""
    monkeypatch.setattr(models, "_said", set())
    model = models.model_of({"model": "nosuchpkg_for_this_test.net:Net"})
    with caplog.at_level("WARNING", logger="bugimpact"):
        assert model.code() is None and model.code() is None
    said = [r.getMessage() for r in caplog.records if "nosuchpkg_for_this_test" in r.getMessage()]
    assert said == ["model nosuchpkg_for_this_test.net:Net: nosuchpkg_for_this_test.net is not importable on "
                    "the host, so the experiment key holds no hash of its code: only runtime.requirements "
                    "that install it name it (by their content), and without them no run can import it"]


@pytest.mark.parametrize("name", ["lstm", "transformer"])
def test_the_sequence_models_read_an_images_rows_and_train(name):
    """The recurrent and attention workloads of the zoo: any challenge's images, read row by row,
    give one log-probability per class, and a step of SGD changes every parameter."""
    import torch

    from bugimpact.harness.models import build
    for channels, size in ((1, 8), (3, 32)):
        torch.manual_seed(0)
        model = build(name, channels, 10, size)
        x, y = torch.rand(4, channels, size, size), torch.tensor([0, 1, 2, 3])
        out = model(x)
        assert out.shape == (4, 10) and torch.allclose(out.exp().sum(1), torch.ones(4), atol=1e-5)
        before = [p.detach().clone() for p in model.parameters()]
        torch.nn.functional.nll_loss(out, y).backward()
        torch.optim.SGD(model.parameters(), lr=0.1).step()
        assert all(not torch.equal(b, p) for b, p in zip(before, model.parameters()))
