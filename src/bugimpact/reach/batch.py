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
from ..io import InputError, read_json, write_csv
from .run import map_fix, trace_spec
from .verdict import judge

log = logging.getLogger("bugimpact.reach")


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
            code = launch({"kind": "local", "python": python}, spec, out, log,
                          RunOptions(threads=train_cfg.get("threads", 1), timeout=timeout))
        if code != 0:
            raise RuntimeError(f"{python}: the trace failed (exit {code}): "
                               f"{log_path.read_text()[-800:]}")
    return time.time() - started


def rows_of(path, ids=None):
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return [r for r in rows if not ids or r["id"] in ids]


def judge_rows(rows, traces, sources, reach_cfg, cache_dir, patches=None):
    """One verdict per (row, trace): rows of a known-commits CSV or a sheet (id, buggy_sha,
    corrected_sha), with a patch ``<patches>/<id>.diff`` or ``<patches>/<corrected_sha>.patch``
    (``git show`` of the landing commit, as ``../shared/pytorch-history`` has them) where one is."""
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
            log.warning("%s: its fix could not be mapped", row["id"], exc_info=True)
            for name in traces:
                out.append({"id": row["id"], "trace": name, "verdict": "unknown",
                            "detail": f"{type(exc).__name__}: {exc}", "static_s": ""})
            continue
        static_s = time.time() - started
        for name, trace in traces.items():
            v = judge(mapping, trace)
            detail = v["reached"] or v["unknown"] or v["not_reached"]
            out.append({"id": row["id"], "trace": name, "verdict": v["verdict"],
                        "detail": "; ".join(detail[:4]), "static_s": f"{static_s:.2f}"})
    return out


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
        stream.write(f"{r['id']:<16} {r['trace']:<24} {r['verdict']:<19} {r['detail'][:160]}\n")


def write_table(path, rows):
    write_csv(path, rows, ("id", "trace", "verdict", "detail", "static_s"))
