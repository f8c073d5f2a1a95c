"""Step 5: the harness trains real runs on real data (scikit-learn's digits), deterministically."""
import ast
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT

from bugimpact.challenges import prepare
from bugimpact.experiment import derive_seeds, experiment_key
from bugimpact.harness.metrics import confusion_counts, recorded_metrics

HARNESS = ROOT / "src" / "bugimpact" / "harness"
ENV = dict(os.environ, PYTHONPATH=str(ROOT / "src"), PYTHONHASHSEED="0", OMP_NUM_THREADS="1")


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    folder = tmp_path_factory.mktemp("data")
    meta = prepare("digits", folder / "digits.npz", folder / "digits.json")
    return folder / "digits.npz", meta


def spec(digits, **over):
    npz, meta = digits
    base = {"bug": "t", "arm": "buggy", "run": 0, "seed": 11, "model": "smallcnn",
            "challenge": "digits", "data": str(npz), "data_sha256": meta["sha256"], "epochs": 3,
            "batch_size": 32, "lr": 0.02, "momentum": 0.5, "threads": 1, "test_fraction": 0.25}
    base.update(over)
    return base


def run_harness(tmp_path, spec_, name="r.json", wait=True):
    out = tmp_path / name
    proc = subprocess.Popen([sys.executable, "-m", "bugimpact.harness", "--spec", "-", "--out",
                             str(out)], stdin=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV,
                            text=True)
    proc.stdin.write(json.dumps(spec_))
    proc.stdin.close()
    if not wait:
        return proc, out
    err = proc.stderr.read()
    assert proc.wait() == 0, err
    return json.loads(out.read_text()), err


def test_same_seed_is_bit_identical_other_seed_differs(tmp_path, digits):
    a, log = run_harness(tmp_path, spec(digits), "a.json")
    b, _ = run_harness(tmp_path, spec(digits), "b.json")
    c, _ = run_harness(tmp_path, spec(digits, seed=12), "c.json")
    assert a["fingerprints"] == b["fingerprints"] and a["metrics"] == b["metrics"]
    assert [e["train_loss"] for e in a["epochs"]] == [e["train_loss"] for e in b["epochs"]]
    assert a["fingerprints"]["init"] != c["fingerprints"]["init"]
    assert a["fingerprints"]["predictions"] != c["fingerprints"]["predictions"]
    assert len(a["fingerprints"]["epochs"]) == 3 and "epoch 3/3" in log
    assert len(a["fingerprints"]["losses"]) == 3 and a["fingerprints"]["logits"]
    assert a["fingerprints"]["losses"] != c["fingerprints"]["losses"]

    env = a["environment"]
    assert env["threads"] == 1 and env["dataset_sha256"] == digits[1]["sha256"]
    assert env["determinism"]["cudnn_deterministic"] and env["determinism"]["PYTHONHASHSEED"] == "0"
    assert env["torch"] and env["python"] and env["harness_version"] == a["harness_version"]
    assert a["metrics"]["accuracy"] > 0.5


def test_cosine_schedule_sets_the_rate_per_epoch():
    from bugimpact.harness.run import learning_rate
    rates = [learning_rate({"lr": 0.1, "epochs": 4, "lr_schedule": "cosine"}, e) for e in range(1, 5)]
    # 0.1 * (1 + cos(pi * (e - 1) / 4)) / 2
    assert rates == pytest.approx([0.1, 0.0853553, 0.05, 0.0146447], rel=1e-5)
    assert learning_rate({"lr": 0.1, "epochs": 4}, 3) == 0.1


def test_real_aa_records_are_not_triggered_without_the_early_decision(tmp_path, digits):
    from bugimpact.stats.analysis import analyse_bug
    from bugimpact.stats.verdicts import verdict
    records = []
    for run_index, seed in enumerate((21, 22, 23)):
        for arm in ("buggy", "corrected"):
            rec, _ = run_harness(tmp_path, spec(digits, arm=arm, run=run_index, seed=seed, epochs=2),
                                 f"{arm}{run_index}.json")
            records.append(rec)
    rows, info = analyse_bug("aa", records, ["accuracy"], 3, "paired")
    for row in rows:
        row["adjusted_p"] = row["primary_p"]
    label, reason = verdict(info, rows, 0.05, 0.0)
    assert label == "not triggered" and "identical in all 3 run pairs" in reason
    assert rows[0]["std_buggy"] > 0  # different seeds did differ


def test_sigkill_midway_leaves_nothing_and_rerun_matches(tmp_path, digits):
    long_spec = spec(digits, epochs=12)
    reference, _ = run_harness(tmp_path, long_spec, "ref.json")
    proc, out = run_harness(tmp_path, long_spec, "killed.json", wait=False)
    seen = ""
    while "epoch 4/12" not in seen:
        line = proc.stderr.readline()
        assert line, "harness ended before epoch 4"
        seen += line
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".killed.json")]
    rerun, _ = run_harness(tmp_path, long_spec, "killed.json")
    assert rerun["fingerprints"] == reference["fingerprints"]
    assert rerun["metrics"] == reference["metrics"]


def test_dataset_hash_mismatch_is_refused(tmp_path, digits):
    proc, out = run_harness(tmp_path, spec(digits, data_sha256="0" * 64), wait=False)
    err = proc.stderr.read()
    assert proc.wait() == 3 and "refusing to train" in err and not out.exists()


@pytest.mark.parametrize("fault", ["relu_leak", "momentum_ignored", "dropout_shift", "grad_scale",
                                   "label_noise"])
def test_each_fault_changes_training(tmp_path, digits, fault):
    base, _ = run_harness(tmp_path, spec(digits, epochs=1), "base.json")
    faulty, _ = run_harness(tmp_path, spec(digits, epochs=1, fault=fault), "f.json")
    assert faulty["fingerprints"]["init"] == base["fingerprints"]["init"] or fault == "dropout_shift"
    assert faulty["fingerprints"]["epochs"] != base["fingerprints"]["epochs"]


def test_label_noise_relabels_a_fixed_three_percent():
    from bugimpact.harness.faults import adjust_labels
    labels = np.arange(1000) % 10
    noisy = adjust_labels("label_noise", labels, 10)
    assert (noisy != labels).sum() == 30  # always another class, never the same one
    assert (adjust_labels("label_noise", labels, 10) == noisy).all()  # the same subset every run
    assert adjust_labels("", labels, 10) is labels


def test_seeded_augmentation_is_reproducible(tmp_path, digits):
    a, _ = run_harness(tmp_path, spec(digits, epochs=1, augment=True), "a.json")
    b, _ = run_harness(tmp_path, spec(digits, epochs=1, augment=True), "b.json")
    plain, _ = run_harness(tmp_path, spec(digits, epochs=1), "c.json")
    assert a["fingerprints"] == b["fingerprints"] != plain["fingerprints"]


def classification_metrics(y_true, y_pred):
    """What the harness records of these predictions."""
    return recorded_metrics(confusion_counts(y_true, y_pred))


def test_metrics_match_scikit_learn():
    from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score
    rng = np.random.RandomState(0)
    for classes in (2, 3, 10):
        y = rng.randint(0, classes, 300)
        p = np.where(rng.rand(300) < 0.6, y, rng.randint(0, classes + 1, 300))  # an unseen label too
        ours = classification_metrics(y, p)
        assert ours["accuracy"] == pytest.approx(accuracy_score(y, p), abs=1e-12)
        for name, fn in (("precision", precision_score), ("recall", recall_score), ("f1", f1_score)):
            assert ours[name] == pytest.approx(fn(y, p, average="macro", zero_division=0), abs=1e-12)


def test_metrics_by_hand():
    # classes 0,1: precision (1/2 + 1/1)/2, recall (1/1 + 1/2)/2, f1 (2/3 + 2/3)/2
    m = classification_metrics([0, 1, 1], [0, 0, 1])
    assert m == pytest.approx({"accuracy": 2 / 3, "precision": 0.75, "recall": 0.75, "f1": 2 / 3})


def test_models():
    import torch

    from bugimpact.harness import models
    vggx = models.build("vggx", 3, 10, 32)
    # by hand: convs 3*64*9+64, 64*256*9+256, 256*512*9+512; dense 12800*1024+1024,
    # 1024*1024+1024, 1024*10+10: "about 15M parameters" as the paper says
    assert sum(p.numel() for p in vggx.parameters()) == (1792 + 147712 + 1180160 + 13108224
                                                          + 1049600 + 10250)
    assert vggx(torch.zeros(2, 3, 32, 32)).shape == (2, 10)
    adaptive = models.build("vggx", 3, 10, 32, pooling="adaptive")
    assert list(adaptive.state_dict()) == list(vggx.state_dict())  # the same parameters either way
    assert models.build("alexnet", 3, 10, 32)(torch.zeros(2, 3, 32, 32)).shape == (2, 10)
    assert models.build("smallcnn", 1, 10, 8)(torch.zeros(2, 1, 8, 8)).shape == (2, 10)
    user = models.build("bugimpact.harness.models:SmallCNN", 1, 4, 8)
    assert user(torch.zeros(1, 1, 8, 8)).shape == (1, 4)
    with pytest.raises(ValueError, match="unknown model"):
        models.build("resnet", 3, 10, 32)


@pytest.mark.parametrize("size,out", [(16, 5), (8, 5), (5, 5), (7, 3), (32, 5)])
def test_matrix_pooling_equals_adaptive_average_pooling_on_cpu(size, out):
    """VGG-X's 16x16 -> 5x5 pool has overlapping windows, whose CUDA backward uses atomic adds; the
    matrix form must compute the same function and the same gradient."""
    import torch

    from bugimpact.harness.models import MatrixAvgPool2d
    torch.manual_seed(0)
    x = torch.randn(4, 6, size, size, dtype=torch.float64, requires_grad=True)
    reference = torch.nn.AdaptiveAvgPool2d((out, out))(x)
    ours = MatrixAvgPool2d((out, out))(x)
    assert torch.allclose(ours, reference, rtol=0, atol=1e-12)
    grad = torch.randn_like(reference)
    g_ref, = torch.autograd.grad(reference, x, grad)
    g_ours, = torch.autograd.grad(ours, x, grad)
    assert torch.allclose(g_ours, g_ref, rtol=0, atol=1e-12)
    x32 = x.detach().float()
    assert torch.allclose(MatrixAvgPool2d((out, out))(x32), torch.nn.AdaptiveAvgPool2d((out, out))(x32),
                          rtol=0, atol=1e-6)


def test_vggx_trains_deterministically_with_either_pooling(tmp_path):
    """Two real VGG-X runs on small CIFAR-shaped data: identical with the matrix pool; and the
    paper's adaptive pool gives the same training within float tolerance on CPU."""
    from bugimpact.harness.files import sha256_file
    rng = np.random.RandomState(0)
    npz = tmp_path / "tiny.npz"
    np.savez(npz, x_train=rng.randint(0, 255, (64, 3, 32, 32)).astype(np.uint8),
             y_train=rng.randint(0, 10, 64), x_test=rng.randint(0, 255, (32, 3, 32, 32)).astype(np.uint8),
             y_test=rng.randint(0, 10, 32))
    base = {"bug": "v", "arm": "buggy", "run": 0, "seed": 3, "model": "vggx", "challenge": "cifar10",
            "data": str(npz), "data_sha256": sha256_file(npz), "epochs": 1, "batch_size": 32,
            "lr": 0.01, "momentum": 0.9, "threads": 1}
    a, _ = run_harness(tmp_path, base, "a.json")
    b, _ = run_harness(tmp_path, base, "b.json")
    assert a["fingerprints"] == b["fingerprints"]
    paper, _ = run_harness(tmp_path, dict(base, pooling="adaptive"), "c.json")
    assert paper["fingerprints"]["init"] == a["fingerprints"]["init"]
    assert paper["epochs"][0]["train_loss"] == pytest.approx(a["epochs"][0]["train_loss"], rel=1e-5)


def test_harness_parses_as_python36_and_imports_only_numpy_and_torch():
    stdlib = set(sys.stdlib_module_names)
    files = sorted(HARNESS.glob("*.py"))
    assert len(files) >= 8
    for path in files:
        tree = ast.parse(path.read_text(), feature_version=(3, 6))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                roots = [] if node.level else [node.module.split(".")[0]]
            else:
                continue
            for root in roots:
                assert root in stdlib or root in ("numpy", "torch"), f"{path.name} imports {root}"
    init = ast.parse((ROOT / "src" / "bugimpact" / "__init__.py").read_text(), feature_version=(3, 6))
    assert not [n for n in ast.walk(init) if isinstance(n, (ast.Import, ast.ImportFrom))]


def test_an_experiment_file_that_is_not_its_key_stops_the_run(tmp_path):
    """A run reads what it computes from results/experiments/<key>.json and checks the file
    against the key in its own path: an edited file (15 epochs typed as 99) is refused, naming
    the file, and the true one is read back as written."""
    from bugimpact.experiment import experiment_file, read_experiment
    from bugimpact.io import InputError, write_json
    train = {"model": "smallcnn", "challenge": "digits", "epochs": 15, "seed_policy": "paired",
             "study_seed": 1, "threads": 1}
    found = experiment_file(train, "venv-py3.7.16-abcd1234")
    path = tmp_path / f"{found['key']}.json"
    write_json(path, found)
    assert read_experiment(path, found["key"]) == found["attributes"]
    assert found["key"] == experiment_key(train, "venv-py3.7.16-abcd1234")
    edited = dict(found, attributes=dict(found["attributes"], epochs=99))
    write_json(path, edited)
    with pytest.raises(InputError, match=f"{path}.*not the experiment {found['key']}"):
        read_experiment(path, found["key"])
    write_json(path, found)
    with pytest.raises(InputError, match="not the experiment"):  # a file under another key
        read_experiment(path, found["key"].replace("-e15-", "-e99-"))


def test_python36_syntax_check_catches_newer_syntax():
    with pytest.raises(SyntaxError):
        ast.parse("if (x := 1): pass", feature_version=(3, 6))


def test_seeds_and_experiment_keys():
    a = derive_seeds(1, "pr5", "paired", 10)
    assert a == derive_seeds(1, "pr5", "paired", 10) and len(set(a)) == 10
    assert derive_seeds(1, "pr5", "paired", 50)[:10] == a  # more runs never change earlier seeds
    assert derive_seeds(1, "pr6", "paired", 10) != a
    assert set(derive_seeds(1, "pr5", "fixed", 10)) == {a[0]}
    train = {"model": "vggx", "challenge": "cifar10", "epochs": 30, "batch_size": 64, "lr": 0.01,
             "momentum": 0.5, "seed_policy": "paired", "study_seed": 1, "threads": 1}
    key = experiment_key(train)
    assert key.startswith("vggx-cifar10-e30-paired-")
    assert experiment_key({**train, "retries": 3, "runs": 50}) == key
    assert experiment_key({**train, "test_fraction": 0.5}) == key  # official split: no effect
    assert experiment_key({**train, "epochs": 31}) != key
    assert experiment_key({**train, "lr": 0.02}) != key


def test_a_hanging_run_is_killed_and_recorded_as_a_timeout(tmp_path):
    """A hang is one of the bug classes studied: the run and every process it started are killed
    after train.timeout_s, and the record says timeout."""
    from bugimpact.train import RunOptions, train_one
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\nsleep 654.321 &\nwait\n")  # a child that would outlive its parent
    python.chmod(0o755)
    spec = {"run": 3, "seed": 1, "device": "cpu", "data": str(tmp_path / "d.npz")}
    out, log = tmp_path / "3.json", tmp_path / "3.log"
    status = train_one(spec, str(out), str(log), {"kind": "venv", "python": str(python)},
                       RunOptions(retries=1, timeout=2))
    record = json.loads(out.read_text())
    assert status == "failed" and record["failure_class"] == "timeout"
    assert record["exit_codes"] == ["timeout", "timeout"]
    assert "timed out after 2s" in record["log_tail"]
    left = subprocess.run(["pgrep", "-f", "sleep 654.321"], capture_output=True, text=True)
    assert left.stdout.strip() == ""


def test_a_run_killed_by_a_signal_from_outside_is_recorded_as_killed_with_its_log(tmp_path):
    from bugimpact.stats.failures import failure_text
    from bugimpact.train import RunOptions, train_one
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\necho 'Warning: Registered a kernel'\nkill -TERM $$\n")
    python.chmod(0o755)
    spec = {"run": 3, "seed": 1, "device": "cpu", "data": str(tmp_path / "d.npz")}
    out, log = tmp_path / "3.json", tmp_path / "3.log"
    assert train_one(spec, str(out), str(log), {"kind": "venv", "python": str(python)}, RunOptions()) == "failed"
    record = json.loads(out.read_text())
    assert record["failure_class"] == "killed" and record["exit_codes"] == [-15] and record["log"] == str(log)
    assert failure_text(record).endswith(f"its log: {log}") and "Registered" not in failure_text(record)


@pytest.mark.parametrize("augment", [False, True])
def test_batches_gathered_on_the_device_are_the_host_batches_bit_for_bit(digits, augment):
    """The training set is moved to the run's device once and each batch gathered there by the
    epoch's permutation: the same batches, the same bytes and the same draws from the order's
    generator as indexing on the host (augmented batches are still made on the host). On a GPU:
    tests/test_gpu.py."""
    import torch

    from bugimpact.harness import data
    from bugimpact.harness.run import device_batches
    dataset = data.load(str(digits[0]), digits[1]["sha256"], 0.25)
    x, y = dataset["x_train"], dataset["y_train"]
    on_device = (torch.from_numpy(x), torch.from_numpy(y))
    host_rng, device_rng = np.random.RandomState(3), np.random.RandomState(3)
    for _ in range(2):  # two epochs: each its own permutation
        host = list(data.batches(x, y, 32, host_rng, augment))
        gathered = list(device_batches(on_device, (x, y), 32, device_rng, augment))
        assert len(host) == len(gathered) == -(-len(y) // 32)
        for (hx, hy), (dx, dy) in zip(host, gathered):
            assert dx.is_contiguous() and np.ascontiguousarray(hx).tobytes() == dx.numpy().tobytes()
            assert hy.tobytes() == dy.numpy().tobytes()
    assert host_rng.randint(1 << 30) == device_rng.randint(1 << 30)  # the same draws were made
