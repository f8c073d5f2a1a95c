"""``bugimpact check-gpu``: what a GPU VM will do with the study's runs, in minutes, before hours
of them. With the study's model and data (or random pixels in its shapes when the data is not
prepared yet) on this machine's GPU:

1. determinism: two runs with one seed, each in a process of its own, bit-identical or not (and
   the kernels the runs reported as non-deterministic);
2. an epoch's time against its floor: the epoch's FLOPs (counted by torch) at the FP32
   matrix-product rate measured here;
3. sharing: k runs on the GPU at once, for each k asked (1, 2 and 4), launched as the workflow
   launches them (forked from the runtime's server), and the study's runs per GPU-hour at each k:
   k runs of ``train.epochs`` epochs take the runs' own fixed cost plus that many of their
   epochs; the k recommended for ``train.runs_per_gpu`` is the smallest within 10% of the best.

The measurement and its figures are written to ``results/gpu-check/<GPU>-<experiment key>.json``
(the same GPU and experiment give the same file).
"""
import concurrent.futures
import contextlib
import dataclasses
import json
import os
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from . import layout
from .artifacts.launch import RunOptions, launch
from .artifacts.runtimes import harness_env, list_gpus, prepare_local
from .artifacts.source_kinds import host_source
from .challenges import named_challenge
from .experiment import experiment, experiment_key
from .io import write_json
from .stats.decisions import first_divergence
from .train import RunTarget, build_spec

SHARES = (1, 2, 4)
WITHIN_BEST = 0.9  # a larger k must give more than this share of the best to be recommended


class NoGpuHere(Exception):
    """This machine cannot run the check (no GPU, or a torch without CUDA)."""


@dataclasses.dataclass
class Workload:
    """The runs the check makes: the study's runtime and a spec of its experiment."""
    runtime: dict
    spec: dict
    data_note: str


def workload(config, folder, device="cuda", epochs=1):
    """The study's experiment on ``device`` for ``epochs`` epochs, in the host's runtime, on the
    study's prepared data or random pixels in its shapes."""
    from .datasets import sha256_file  # numpy: only for the GPU check's workload
    from .reach.batch import shaped_data  # numpy: only for the GPU check's workload
    train = dict(config["train"], device=device)
    runtime = prepare_local({"source": host_source()})
    prepared = Path(layout.DATA.format(challenge=train["challenge"]))
    if prepared.exists():
        data, note = prepared, f"the study's {train['challenge']} ({prepared})"
    else:
        challenge = named_challenge(train["challenge"])
        n_train, n_test = challenge.sizes
        data = shaped_data(train["challenge"], Path(folder) / "shaped.npz", n_train, n_test)
        note = (f"random pixels in the shapes of {train['challenge']} {challenge.shape}, "
                f"{n_train} + {n_test} images (prepare the data for the real thing)")
    spec = build_spec(dict(experiment(train), epochs=epochs),
                      RunTarget("__gpucheck__", "check", {"artifact": host_source()}, 0), 0, data,
                      sha256_file(data))  # each run of the check sets its own run and seed
    return Workload(runtime, spec, note)


def require_gpu(nvidia_smi=("nvidia-smi", "-L")):
    """The GPUs nvidia-smi lists, or ``NoGpuHere``."""
    gpus = list_gpus(nvidia_smi)
    if not gpus:
        raise NoGpuHere("no GPU on this machine (nvidia-smi -L lists none): nothing to check; "
                        "GPU studies need a machine with one")
    return gpus


def require_cuda_build(runtime):
    if not runtime["probe"].get("cuda"):
        raise NoGpuHere(f"{runtime['python']} has torch {runtime['probe'].get('version')} without "
                        "CUDA: install its CUDA build (bin/setup-host does where a GPU is present)")


def _run(work, folder, name, seed, options):
    """One run of the workload; its record (a failed run raises)."""
    out = Path(folder) / f"{name}.json"
    with open(Path(folder) / f"{name}.log", "w") as log:
        code = launch(work.runtime, dict(work.spec, run=seed, seed=seed), out, log, options)
    if code != 0 or not out.exists():
        raise RuntimeError(f"the {name} run failed (exit {code}): "
                           f"{(Path(folder) / f'{name}.log').read_text()[-1500:]}")
    return json.loads(out.read_text())


def determinism(work, folder):
    """Two runs with one seed in processes of their own: identical, or where they part."""
    records = [_run(work, folder, f"same-seed-{i}", 1, RunOptions(threads=work.spec["threads"]))
               for i in (1, 2)]
    epoch = first_divergence(*records)
    flagged = sorted(set(records[0].get("nondeterministic_ops", [])) |
                     set(records[1].get("nondeterministic_ops", [])))
    return {"identical": epoch is None, "first_divergence_epoch": epoch,
            "nondeterministic_ops": flagged, "epoch_s": _epoch_seconds(records)}


def _epoch_seconds(records):
    return statistics.median(e["wall_s"] for r in records for e in r["epochs"])


def floor(work):
    """The epoch's FLOPs and this device's measured FP32 rate (``harness.flops``)."""
    out = subprocess.run([work.runtime["python"], "-m", "bugimpact.harness.flops"],
                         input=json.dumps(work.spec), capture_output=True, text=True,
                         env=harness_env(work.spec["threads"]), timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"counting the epoch's FLOPs failed: {out.stderr[-1500:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    flops = result["flops"]
    result["floor_s"] = ((flops["train"] + flops["test"]) / result["matmul_flops_per_s"]
                         if flops else None)
    return result


def sharing(work, folder, shares, study_epochs):
    """For each k: k runs at once (forked, as the workflow runs them), their epoch time and fixed
    cost, and the study's runs per GPU-hour at that k; the first k whose runs fail ends it."""
    _run(work, folder, "warm", 0, RunOptions(threads=work.spec["threads"], fork_server=True))
    rows = []  # (the fork server's start above is not a run's cost)
    for k in shares:
        options = RunOptions(threads=work.spec["threads"], fork_server=True, runs_per_gpu=k)
        started = time.time()
        try:
            with concurrent.futures.ThreadPoolExecutor(k) as pool:  # a failed run raises here
                records = list(pool.map(
                    lambda i, k=k, options=options: _run(work, folder, f"share{k}-{i}", 100 * k + i,
                                                         options), range(k)))
        except RuntimeError as exc:  # k runs do not fit (out of memory, say): nor will more
            rows.append({"runs_per_gpu": k, "error": str(exc).splitlines()[0][:300]})
            break
        wall = time.time() - started
        epoch = _epoch_seconds(records)
        fixed = max(0.0, wall - max(sum(e["wall_s"] for e in r["epochs"]) for r in records))
        run_s = fixed + study_epochs * epoch
        rows.append({"runs_per_gpu": k, "wall_s": wall, "epoch_s": epoch, "fixed_s": fixed,
                     "study_run_s": run_s, "runs_per_gpu_hour": 3600.0 * k / run_s})
    return rows


def recommend(rows):
    """The smallest k within ``WITHIN_BEST`` of the best runs per GPU-hour: sharing more for
    less than that gain only costs memory."""
    measured = [r for r in rows if "error" not in r]
    best = max(r["runs_per_gpu_hour"] for r in measured)
    return min(r["runs_per_gpu"] for r in measured if r["runs_per_gpu_hour"] >= WITHIN_BEST * best)


def check(config, device="cuda", epochs=1, shares=SHARES, out_dir="results/gpu-check"):
    """The whole check, on one GPU (the first one visible); returns its result (also written
    under ``out_dir``)."""
    if device == "cuda":
        require_gpu()
    first = (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0]
    with tempfile.TemporaryDirectory() as folder, _environment(CUDA_VISIBLE_DEVICES=first):
        work = workload(config, folder, device, epochs)
        if device == "cuda":
            require_cuda_build(work.runtime)
        result = {"model": work.spec["model"], "challenge": work.spec["challenge"],
                  "data": work.data_note, "epochs_measured": epochs,
                  "study_epochs": config["train"]["epochs"],
                  "determinism": determinism(work, folder), "floor": floor(work)}
        result["sharing"] = sharing(work, folder, shares, config["train"]["epochs"])
    result["recommended_runs_per_gpu"] = recommend(result["sharing"])
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", result["floor"]["device_name"])
    path = Path(out_dir) / f"{name}-{experiment_key(dict(config['train'], device=device))}.json"
    write_json(path, result)
    result["path"] = str(path)
    return result


def _si(value):
    """1.5e14 as '150 T'."""
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M")):
        if value >= factor:
            return f"{value / factor:.3g} {prefix}"
    return f"{value:.3g} "


def _duration(seconds):
    """2.92 as '2.92 s', 5.8e-05 as '58 µs': a small model's floor is far below a second."""
    for factor, unit in ((1, "s"), (1e-3, "ms")):
        if seconds >= factor:
            return f"{seconds / factor:.3g} {unit}"
    return f"{seconds / 1e-6:.3g} µs"


@contextlib.contextmanager
def _environment(**values):
    """These variables set in this process (and the runs it starts) for a while."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def text(result):
    """The check's figures, as the command prints them."""
    det, fl = result["determinism"], result["floor"]
    lines = [f"bugimpact check-gpu: {result['model']} on {result['data']}, "
             f"{fl['device_name']}, torch {fl['torch']}"]
    if det["identical"]:
        lines.append("determinism: two runs with one seed in separate processes are bit-identical "
                     "(every epoch's parameters, every batch's loss, the logits)")
    else:
        lines.append(f"determinism: two runs with one seed differ from epoch "
                     f"{det['first_divergence_epoch']}: non-deterministic kernels reported: "
                     f"{', '.join(det['nondeterministic_ops']) or 'none (measured, not flagged)'}")
    if det["nondeterministic_ops"] and det["identical"]:
        lines.append(f"  (flagged, yet identical here: {', '.join(det['nondeterministic_ops'])})")
    if fl["floor_s"]:
        flops = fl["flops"]["train"] + fl["flops"]["test"]
        lines.append(f"epoch: {det['epoch_s']:.2f} s; its {_si(flops)}FLOP at the "
                     f"{_si(fl['matmul_flops_per_s'])}FLOP/s measured for FP32 matrix products "
                     f"here take {_duration(fl['floor_s'])}: the epoch runs at "
                     f"{100 * fl['floor_s'] / det['epoch_s']:.2g}% of that rate")
    else:
        lines.append(f"epoch: {det['epoch_s']:.2f} s (FLOPs not counted: {fl.get('why')})")
    lines.append(f"runs sharing the GPU ({result['study_epochs']} epochs a run, from "
                 f"{result['epochs_measured']} measured):")
    lines.append("  runs/GPU  epoch (s)  fixed (s)  runs per GPU-hour  vs 1")
    base = result["sharing"][0]["runs_per_gpu_hour"]
    for row in result["sharing"]:
        if "error" in row:
            lines.append(f"  {row['runs_per_gpu']:8d}  failed: {row['error']}")
            continue
        lines.append(f"  {row['runs_per_gpu']:8d}  {row['epoch_s']:9.2f}  {row['fixed_s']:9.2f}  "
                     f"{row['runs_per_gpu_hour']:17.1f}  {row['runs_per_gpu_hour'] / base:4.2f}x")
    lines.append(f"recommended: train.runs_per_gpu: {result['recommended_runs_per_gpu']} "
                 f"(the smallest within {1 - WITHIN_BEST:.0%} of the most runs per GPU-hour); "
                 f"written to {result['path']}")
    return "\n".join(lines)
