"""Reach outside the workflow: trace a workload in any interpreter, and judge many fixes at once
(``bugimpact reach-trace`` and ``bugimpact reach``)."""
import csv
import logging
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ..artifacts.diffs import fix_diff
from ..artifacts.launch import RunOptions, launch
from ..challenges import named_challenge
from ..datasets import sha256_file, write_npz
from ..io import InputError, read_json, write_csv, write_json
from ..overrides.parts import Refused
from ..train import RunTarget, short_spec
from .loader import BLIND_SPOTS, contradicted, recording_calls
from .run import map_fix, trace_spec
from .verdict import judge

log = logging.getLogger("bugimpact.reach")
UNRESOLVED = "unresolved: no commits and no patch"  # a row of the sheet that is no fix to judge


def shaped_data(challenge, path, n_train=256, n_test=256, seed=0):
    """Random pixels in a challenge's shapes and value range: what a model dispatches depends on
    shapes and dtypes, not on pixel values (except where code branches on values, e.g. a NaN
    check); for tracing where the real dataset is not at hand."""
    shape, top = named_challenge(challenge).shape, named_challenge(challenge).top
    rng = np.random.RandomState(seed)
    arrays = {"x_train": rng.randint(0, top + 1, (n_train,) + shape).astype(np.uint8),
              "y_train": rng.randint(0, 10, n_train).astype(np.int64),
              "x_test": rng.randint(0, top + 1, (n_test,) + shape).astype(np.uint8),
              "y_test": rng.randint(0, 10, n_test).astype(np.int64)}
    write_npz(path, arrays)
    return path


def trace_in(python, train_cfg, out, steps=3, data=None, challenge=None, timeout=900):
    """Run a reach trace with ``python`` (any interpreter with torch and numpy), launched as the
    workflow launches a local run; ``data``: a prepared .npz, else shaped random data of the
    challenge. Returns the seconds it took."""
    with tempfile.TemporaryDirectory() as tmp:
        if data is None:
            data = shaped_data(challenge or train_cfg["challenge"], Path(tmp) / "shaped.npz")
        spec = trace_spec(train_cfg, steps, data, sha256_file(data), python)
        log_path = Path(tmp) / "trace.log"
        started = time.time()
        with open(log_path, "w") as log:
            code = recording_calls(lambda asked: launch({"kind": "local", "python": python}, asked, out, log,
                                               RunOptions(threads=train_cfg.get("threads", 1), timeout=timeout)),
                          spec, out)
        if code != 0:
            raise RuntimeError(f"{python}: the trace failed (exit {code}): "
                               f"{log_path.read_text()[-800:]}")
    return time.time() - started


def called_in(python, train_cfg, out, epochs=None, data=None, challenge=None, timeout=3600):
    """The ground truth of what the release's C++ runs for a workload: one whole run of the
    study's experiment (``epochs``: the config's unless given) with ``python``, not traced, and
    the release's exported functions it called, by the dynamic loader's word
    (``reach.loader``, whose module doc names its blind spots). Written to ``out``: the torch
    version, the workload, the functions. Returns how many."""
    with tempfile.TemporaryDirectory() as tmp:
        if data is None:
            data = shaped_data(challenge or train_cfg["challenge"], Path(tmp) / "shaped.npz")
        spec = short_spec(train_cfg, RunTarget("__truth__", "truth", {"artifact": python}, 0), data,
                          sha256_file(data), epochs=epochs or train_cfg["epochs"])
        run, log_path = Path(tmp) / "run.json", Path(tmp) / "run.log"
        with open(log_path, "w") as log:
            code = recording_calls(lambda asked: launch({"kind": "local", "python": python}, asked, run, log,
                                                        RunOptions(threads=train_cfg.get("threads", 1),
                                                                   timeout=timeout)), spec, run)
        record = read_json(run) if code == 0 and run.exists() else None
        if record is None or record.get("cpp_called") is None:
            raise RuntimeError(f"{python}: no record of the release's calls (exit {code}): "
                               f"{log_path.read_text()[-800:]}")
    spec = record["spec"]
    write_json(out, {"kind": "cpp-called", "torch_version": record["environment"].get("torch"),
                     "workload": f"{spec['model']} on {spec['challenge']}, {spec['epochs']} epochs, "
                                 f"{spec['optimizer']}, batch {spec['batch_size']}",
                     "called": record["cpp_called"], "blind_spots": BLIND_SPOTS})
    return len(record["cpp_called"])


def rows_of(path, ids=None):
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return [r for r in rows if not ids or r["id"] in ids]


def judge_rows(rows, traces, sources, reach_cfg, cache_dir, patches=None, truths=None):
    """One verdict per (row, trace): rows of a known-commits CSV or a sheet (id, buggy_sha,
    corrected_sha), with a patch ``<patches>/<id>.diff`` or ``<patches>/<corrected_sha>.patch``
    (``git show`` of the landing commit, as ``../shared/pytorch-history`` has them) where one is.
    ``truths``: ground truths (``called_in``) by torch version: each ``not reached`` of a trace
    of that version is checked against its release's C++ calls (``truth``)."""
    out = []
    for row in rows:
        names = [f"{row['id']}.diff"] + ([f"{row['corrected_sha']}.patch"] if row.get("corrected_sha") else [])
        found = [Path(patches) / n for n in names if patches and (Path(patches) / n).is_file()]
        arm = {"buggy_sha": row.get("buggy_sha"), "corrected_sha": row.get("corrected_sha"),
               "patch": str(found[0]) if found else None}
        if not (arm["patch"] or (arm["buggy_sha"] and arm["corrected_sha"])):
            for name in traces:
                out.append({"id": row["id"], "trace": name, "verdict": "unknown",
                            "detail": "unresolved: no commits and no patch", "static_s": ""})
            continue
        started = time.time()
        try:
            diff_text, _ = fix_diff(sources, {k: v for k, v in arm.items() if v})
            mapping = map_fix(diff_text, sources, reach_cfg, arm, cache_dir)
        except Exception as exc:  # noqa: BLE001 - recorded per row; the traceback goes to the log
            # a refusal names its cause (no source for the diff): its words say all, not a traceback
            log.warning("%s: its fix could not be mapped: %s", row["id"], exc, exc_info=not isinstance(exc, Refused))
            for name in traces:
                out.append({"id": row["id"], "trace": name, "verdict": "unknown",
                            "detail": f"{type(exc).__name__}: {exc}", "static_s": ""})
            continue
        static_s = time.time() - started
        for name, trace in traces.items():
            v = judge(mapping, trace)
            detail = v["reached"] or v["unknown"] or v["not_reached"]
            truth = (truths or {}).get(trace.get("torch_version"))
            out.append({"id": row["id"], "trace": name, "verdict": v["verdict"],
                        "detail": "; ".join(detail[:4]), "static_s": f"{static_s:.2f}",
                        "truth": checked(mapping, truth) if truth and v["verdict"] == "not reached" else ""})
    return out


def checked(mapping, truth):
    """A ``not reached`` against a ground truth (``called_in``), in words: ``contradicted`` (an
    operator it reaches, whose way's function the release called), ``agrees`` (none of them), or
    nothing to check (no operator: Python lines, CUDA, not shipped)."""
    ways = mapping.ways()
    if not ways:
        return "no C++ function to check"
    wrong = contradicted(mapping, truth["called"])
    if wrong:
        return "contradicted: " + "; ".join(f"operator {op}: {fn} called" for op, fn in wrong.items())
    return f"agrees: the release called none of the functions of its {len(ways)} operator(s)"


def load_traces(paths):
    traces = {}
    for path in paths:
        trace = read_json(path)
        if trace.get("kind") != "reach-trace":
            raise InputError(path, "not a reach trace (bugimpact reach-trace writes them)")
        traces[Path(path).stem] = trace
    return traces


def print_table(rows, stream=sys.stdout):
    for r in rows:
        truth = f" [truth: {r['truth'][:100]}]" if r.get("truth") else ""
        stream.write(f"{r['id']:<16} {r['trace']:<24} {r['verdict']:<19} {r['detail'][:160]}{truth}\n")


def write_table(path, rows):
    write_csv(path, rows, ("id", "trace", "verdict", "detail", "static_s", "truth"))
