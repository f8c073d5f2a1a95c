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

from . import HARNESS_VERSION, data, determinism, environment, faults, loader, metrics, models, overrides
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


def predict(model, x, batch_size):
    """Test-set outputs (log-probabilities) and predicted classes, from the test set where it
    lives (``x``: a tensor on the run's device); one copy to the host per evaluation."""
    model.eval()
    out = []
    with torch.no_grad():
        for start in range(0, len(x), batch_size):
            out.append(model(x[start:start + batch_size]).float())
    logits = torch.cat(out).cpu().numpy()
    return logits, logits.argmax(axis=1).astype(np.int64)


def device_batches(on_device, on_host, batch_size, rng, augment=False):
    """Training batches in the order ``data.batches`` gives them (the same draws from ``rng``), as
    tensors on the run's device. The training set (x, y) was moved there once (``on_device``;
    ``on_host``: the same arrays) and each batch is gathered there by the epoch's permutation: no
    copy from the host per step. A gather copies values, so a batch holds the very bits the
    host's indexing gives. Augmented batches are drawn and cropped on the host (their draws
    follow each batch's), then moved."""
    device = on_device[0].device
    if augment:
        for xb, yb in data.batches(on_host[0], on_host[1], batch_size, rng, True):
            yield torch.from_numpy(np.ascontiguousarray(xb)).to(device), torch.from_numpy(yb).to(device)
        return
    order = torch.from_numpy(rng.permutation(len(on_host[1]))).to(device)
    for start in range(0, len(order), batch_size):
        index = order[start:start + batch_size]
        yield on_device[0].index_select(0, index), on_device[1].index_select(0, index)


def learning_rate(spec, epoch):
    """The rate for an epoch (1-based), set by hand in the optimizer's param groups: no
    lr_scheduler, whose step order changed in torch 1.1."""
    lr = float(spec["lr"])
    if spec.get("lr_schedule") == "cosine":
        return lr * 0.5 * (1.0 + math.cos(math.pi * (epoch - 1) / float(spec["epochs"])))
    return lr


def make_optimizer(spec, model, fault):
    if spec.get("optimizer", "sgd") == "adam":
        return torch.optim.Adam(model.parameters(), lr=spec["lr"])
    return torch.optim.SGD(model.parameters(), lr=spec["lr"],
                           momentum=faults.adjust_momentum(fault, spec.get("momentum", 0.0)))


def train_epoch(model, optimizer, batches, fault, counts):
    """One epoch's steps: ``counts`` is (epoch, steps before it, the step to stop at or 0).
    Returns the digest of every batch's loss (the float ``loss.item()`` gives, bit for bit), the
    epoch's mean loss and the steps made so far. The losses stay on the device until the epoch
    ends: no step waits for the GPU."""
    epoch, steps, max_steps = counts
    model.train()
    batch_losses, sizes = [], []
    for xb, yb in batches:
        optimizer.zero_grad()
        loss = F.nll_loss(model(xb), yb)
        loss.backward()
        faults.adjust_gradients(fault, model)
        optimizer.step()
        batch_losses.append(loss.detach())
        sizes.append(len(yb))
        steps += 1
        if steps == max_steps:
            break
    values = torch.stack(batch_losses).cpu().numpy().astype(np.float64)
    finite = np.isfinite(values)
    if not finite.all():
        bad = int(np.argmin(finite))
        raise Diverged("loss %r at epoch %d, step %d"
                       % (float(values[bad]), epoch, steps - len(values) + bad + 1))
    losses, total = hashlib.sha256(), 0.0
    for value, size in zip(values, sizes):
        losses.update(value.tobytes())
        total += float(value) * size
    return losses.hexdigest(), total / max(sum(sizes), 1), steps


def train(spec):
    fault = spec.get("fault") or ""
    faults.check(fault)
    flags = determinism.configure(spec.get("threads", 1), spec.get("device", "cpu"),
                                  bool(spec.get("allow_tf32", False)))
    device = torch.device("cuda" if spec.get("device") == "cuda" else "cpu")
    # a compiled fix's kernels, over the release's (an interposed library was preloaded)
    override = overrides.load(spec.get("override"), bool(spec.get("preload")))
    seed = int(spec["seed"])
    dataset = data.load(spec["data"], spec.get("data_sha256"), spec.get("test_fraction", 0.25))
    determinism.seed_everything(seed)
    faults.patch_framework(fault)
    x_train = dataset["x_train"]
    y_train = faults.adjust_labels(fault, dataset["y_train"], dataset["num_classes"])
    model = models.of_spec(spec, x_train, dataset["num_classes"])
    faults.adjust_model(fault, model)
    model.to(device)
    optimizer = make_optimizer(spec, model, fault)
    # The data order has its own generator, so model code that draws random numbers cannot shift it.
    order_rng = np.random.RandomState((seed * 7919 + 17) % (2 ** 32))
    record = {"fingerprints": {"init": state_fingerprint(model), "epochs": [], "losses": []},
              "epochs": []}
    nondeterministic = []
    max_steps = int(spec.get("max_steps") or 0)  # a reach trace: a few steps, then one evaluation
    keep = spec.get("test_batch_size", 1000) if max_steps else None  # a trace evaluates one batch
    x_test, y_test = dataset["x_test"][:keep], dataset["y_test"][:keep]
    on_device = (torch.from_numpy(x_train).to(device), torch.from_numpy(y_train).to(device))  # once
    test_set = torch.from_numpy(x_test).to(device)
    steps = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for epoch in range(1, int(spec["epochs"]) + 1):
            start = time.time()
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(spec, epoch)
            batches = device_batches(on_device, (x_train, y_train), spec.get("batch_size", 64),
                                     order_rng, bool(spec.get("augment")))
            try:
                losses, mean_loss, steps = train_epoch(model, optimizer, batches, fault,
                                                       (epoch, steps, max_steps))
                check_finite(model, "after epoch %d" % epoch)
            except Diverged as exc:
                if not spec.get("record_divergence"):
                    raise
                # an override check's run: how the build diverged is what it measures
                record["diverged"] = str(exc)
                logits, predictions = predict(model, test_set, spec.get("test_batch_size", 1000))
                break
            logits, predictions = predict(model, test_set, spec.get("test_batch_size", 1000))
            accuracy = float(np.mean(predictions == y_test))
            wall = time.time() - start
            fingerprint = state_fingerprint(model)
            record["fingerprints"]["epochs"].append(fingerprint)
            record["fingerprints"]["losses"].append(losses)
            record["epochs"].append({"epoch": epoch, "train_loss": mean_loss,
                                     "test_accuracy": accuracy, "wall_s": wall})
            _log(spec, "epoch %d/%d loss %.4f test accuracy %.4f (%.2fs)"
                 % (epoch, spec["epochs"], mean_loss, accuracy, wall))
        nondeterministic = sorted({str(w.message).splitlines()[0] for w in caught
                                   if "determinis" in str(w.message)})
    record["counts"] = metrics.confusion_counts(y_test, predictions)
    record["metrics"] = metrics.recorded_metrics(record["counts"])
    record["fingerprints"]["logits"] = hashlib.sha256(np.ascontiguousarray(logits).tobytes()).hexdigest()
    record["fingerprints"]["predictions"] = hashlib.sha256(predictions.tobytes()).hexdigest()
    record["nondeterministic_ops"] = nondeterministic
    record["environment"] = environment.describe(spec.get("device", "cpu"), flags,
                                                 dataset["sha256"], HARNESS_VERSION)
    if override is not None:
        record["override"] = dict(overrides.counts(override), library=spec["override"])
    return record


def profiled(spec):
    """``train`` under the autograd profiler, which computes nothing: the record adds the operators
    the run dispatched (``trace.dispatched``)."""
    from .trace import dispatched  # only a profiled check traces (the harness imports the least a run needs)
    with torch.autograd.profiler.profile() as prof:
        record = train(spec)
    record["ops"] = dispatched(prof)
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
        from .trace import traced  # only a reach trace traces (the harness imports the least a run needs)
        write_atomic(out, traced(spec, train))
        _log(spec, "reach trace written: %s" % out)
        return 0
    try:
        record = profiled(spec) if spec.get("profile_ops") else train(spec)
    except data.DataError as exc:
        _log(spec, "refused: %s" % exc)
        return 3
    except Diverged as exc:
        _log(spec, "diverged: %s: a failed measurement, no record" % exc)
        return DIVERGED
    record.update({"status": "ok", "record_schema": RECORD_SCHEMA, "spec": spec,
                   "harness_version": HARNESS_VERSION, "wall_s": time.time() - started})
    if loader.MARK:  # where the loader's record of this run's calls begins, where it was asked for
        record["loader"] = loader.MARK
    write_atomic(out, sealed(record))
    _log(spec, "accuracy %.4f, record %s" % (record["metrics"]["accuracy"], out))
    return 0
