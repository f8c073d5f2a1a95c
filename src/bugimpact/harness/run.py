"""Train one run from a spec and write one JSON record, atomically.

Usage: ``python -m bugimpact.harness --spec SPEC.json --out RECORD.json`` (``--spec -`` reads
standard input). The record appears only when the run finished; a crashed or killed run leaves
neither a record nor a partial file, and is simply run again.
"""
import argparse
import hashlib
import json
import math
import os
import sys
import tempfile
import time
import warnings

import numpy as np
import torch
import torch.nn.functional as F

from . import HARNESS_VERSION, data, determinism, environment, faults, metrics, models

from .registry import RECORD_SCHEMA, sealed


def _log(spec, message):
    sys.stderr.write("[%s %s run %s] %s\n" % (spec.get("bug"), spec.get("arm"), spec.get("run"),
                                               message))
    sys.stderr.flush()


DIVERGED = 5  # the exit code of a run whose loss or parameters stopped being finite


class Diverged(Exception):
    """Training produced a non-finite loss or parameter: a failed measurement, not a result."""


def check_finite(model, where):
    for name, tensor in model.state_dict().items():
        values = tensor.detach().cpu().numpy()
        if values.dtype.kind == "f" and not np.isfinite(values).all():
            raise Diverged("parameter %s is not finite %s" % (name, where))


def state_fingerprint(model):
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        digest.update(name.encode("utf-8"))
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def predict(model, x, batch_size, device):
    """Test-set outputs (log-probabilities) and predicted classes."""
    model.eval()
    out = []
    with torch.no_grad():
        for start in range(0, len(x), batch_size):
            xb = torch.from_numpy(x[start:start + batch_size]).to(device)
            out.append(model(xb).float().cpu().numpy())
    logits = np.concatenate(out)
    return logits, logits.argmax(axis=1).astype(np.int64)


def learning_rate(spec, epoch):
    """The rate for an epoch (1-based), set by hand in the optimizer's param groups: no
    lr_scheduler, whose step order changed in torch 1.1."""
    lr = float(spec["lr"])
    if spec.get("lr_schedule") == "cosine":
        return lr * 0.5 * (1.0 + math.cos(math.pi * (epoch - 1) / float(spec["epochs"])))
    return lr


def train(spec):
    fault = spec.get("fault") or ""
    faults.check(fault)
    flags = determinism.configure(spec.get("threads", 1), spec.get("device", "cpu"),
                                  bool(spec.get("allow_tf32", False)))
    device = torch.device("cuda" if spec.get("device") == "cuda" else "cpu")
    seed = int(spec["seed"])
    dataset = data.load(spec["data"], spec.get("data_sha256"), spec.get("test_fraction", 0.25))
    determinism.seed_everything(seed)
    faults.patch_framework(fault)
    x_train = dataset["x_train"]
    y_train = faults.adjust_labels(fault, dataset["y_train"], dataset["num_classes"])
    model = models.build(spec["model"], x_train.shape[1], dataset["num_classes"], x_train.shape[2],
                         spec.get("pooling") or "deterministic")
    faults.adjust_model(fault, model)
    model.to(device)
    if spec.get("optimizer", "sgd") == "adam":
        optimizer = torch.optim.Adam(model.parameters(), lr=spec["lr"])
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=spec["lr"],
                                    momentum=faults.adjust_momentum(fault, spec.get("momentum", 0.0)))
    # The data order has its own generator, so model code that draws random numbers cannot shift it.
    order_rng = np.random.RandomState((seed * 7919 + 17) % (2 ** 32))
    record = {"fingerprints": {"init": state_fingerprint(model), "epochs": [], "losses": []},
              "epochs": []}
    nondeterministic = []
    max_steps = int(spec.get("max_steps") or 0)  # a reach trace: a few steps, then one evaluation
    x_test, y_test = dataset["x_test"], dataset["y_test"]
    if max_steps:
        x_test, y_test = x_test[:spec.get("test_batch_size", 1000)], y_test[:spec.get("test_batch_size", 1000)]
    steps = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for epoch in range(1, int(spec["epochs"]) + 1):
            start = time.time()
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(spec, epoch)
            model.train()
            total, seen = 0.0, 0
            losses = hashlib.sha256()
            for xb, yb in data.batches(x_train, y_train, spec.get("batch_size", 64), order_rng,
                                       bool(spec.get("augment"))):
                xb = torch.from_numpy(np.ascontiguousarray(xb)).to(device)
                yb = torch.from_numpy(yb).to(device)
                optimizer.zero_grad()
                loss = F.nll_loss(model(xb), yb)
                loss.backward()
                faults.adjust_gradients(fault, model)
                optimizer.step()
                value = loss.item()
                if not math.isfinite(value):
                    raise Diverged("loss %r at epoch %d, step %d" % (value, epoch, steps + 1))
                losses.update(np.float64(value).tobytes())  # every batch's loss, bit for bit
                total += float(value) * len(yb)
                seen += len(yb)
                steps += 1
                if steps == max_steps:
                    break
            logits, predictions = predict(model, x_test, spec.get("test_batch_size", 1000), device)
            accuracy = float(np.mean(predictions == y_test))
            wall = time.time() - start
            check_finite(model, "after epoch %d" % epoch)
            fingerprint = state_fingerprint(model)
            record["fingerprints"]["epochs"].append(fingerprint)
            record["fingerprints"]["losses"].append(losses.hexdigest())
            record["epochs"].append({"epoch": epoch, "train_loss": total / max(seen, 1),
                                     "test_accuracy": accuracy, "wall_s": wall})
            _log(spec, "epoch %d/%d loss %.4f test accuracy %.4f (%.2fs)"
                 % (epoch, spec["epochs"], total / max(seen, 1), accuracy, wall))
        nondeterministic = sorted({str(w.message).splitlines()[0] for w in caught
                                   if "determinis" in str(w.message)})
    record["metrics"] = metrics.classification_metrics(y_test, predictions)
    record["counts"] = metrics.confusion_counts(y_test, predictions)
    record["fingerprints"]["logits"] = hashlib.sha256(np.ascontiguousarray(logits).tobytes()).hexdigest()
    record["fingerprints"]["predictions"] = hashlib.sha256(predictions.tobytes()).hexdigest()
    record["nondeterministic_ops"] = nondeterministic
    record["environment"] = environment.describe(spec.get("device", "cpu"), flags,
                                                 dataset["sha256"], HARNESS_VERSION)
    return record


def write_atomic(path, obj):
    """Temp file in the same folder, fsync, rename (the harness cannot use the host's io module:
    it runs where only the standard library, numpy and torch exist)."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        os.makedirs(folder)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=folder)
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600: a record is as readable as any output
        with os.fdopen(fd, "w") as handle:
            json.dump(obj, handle, indent=1, sort_keys=True)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bugimpact.harness", description=__doc__)
    parser.add_argument("--spec", required=True, help="run spec JSON file, or - for stdin")
    parser.add_argument("--out", required=True, help="record to write")
    args = parser.parse_args(argv)
    if args.spec == "-":
        spec = json.load(sys.stdin)
    else:
        with open(args.spec) as handle:
            spec = json.load(handle)
    return execute(spec, args.out)


def execute(spec, out):
    """One run, in this process: the exit code (0: the record is written)."""
    started = time.time()
    if spec.get("trace"):
        from .trace import traced
        write_atomic(out, traced(spec, train))
        _log(spec, "reach trace written: %s" % out)
        return 0
    try:
        record = train(spec)
    except data.DataError as exc:
        _log(spec, "refused: %s" % exc)
        return 3
    except Diverged as exc:
        _log(spec, "diverged: %s: a failed measurement, no record" % exc)
        return DIVERGED
    record.update({"status": "ok", "record_schema": RECORD_SCHEMA, "spec": spec,
                   "harness_version": HARNESS_VERSION, "wall_s": time.time() - started})
    write_atomic(out, sealed(record))
    _log(spec, "accuracy %.4f, record %s" % (record["metrics"]["accuracy"], out))
    return 0
