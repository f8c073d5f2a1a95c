"""Which fixes can touch which models: every fix judged for every workload of a study on every
release, with no build and no training (``bugimpact reach --config X``, where ``workloads``
names the models and ``reach.releases`` the torch releases).

Each release is a venv of its wheel (and of what a workload's model needs, e.g. the torchvision
released for that torch), each workload traced in it once (its model, challenge and options, on
shaped data) and the trace kept with what it was made of, so a second call traces nothing. The
fixes are judged against every trace at once (``batch.judge_rows``) into ``matrix.csv``: one row
per fix, workload and release, with its verdict and why; ``matrix.md`` and ``matrix.png``
(``reach.matrix``) show it fixes first that touch the most workloads."""
import logging
from pathlib import Path

from .. import workloads
from ..artifacts import interpreters
from ..artifacts.source_kinds import release_version
from ..harness import TRACE_VERSION
from ..io import ConfigError, read_json, write_csv, write_json
from ..layout import REACH_TABLES
from ..models import model_of
from ..reach.batch import UNRESOLVED, judge_rows, rows_of, trace_in
from ..reach.matrix import COLUMNS, Matrix
from .builds import artifact
from .runtime import runtime

log = logging.getLogger("bugimpact.reach")


def traces(config, sources, folder):
    """({"<workload>@<release>": trace}, {"<workload>@<release>": why it has none}): each workload
    of ``workloads`` traced on each release of ``reach.releases`` (venvs of the release wheels,
    had from ``sources``, for ``runtime.python``), made once and kept under ``folder`` with what
    they were made of. A workload that cannot run on a release (its model needs what the venv
    lacks) is said, and the others go on. ``config``: its ``workloads``, ``reach``, ``train`` and
    ``runtime``."""
    reach = config["reach"]
    interpreter = interpreters.find(config["runtime"].get("python") or "python3")
    found, failed = {}, {}
    for release in reach["releases"]:
        manifest = Path(folder) / "artifacts" / f"pypi-{release}" / "manifest.json"
        if not manifest.exists() or read_json(manifest).get("status") != "ok":
            made = artifact(sources, {"source": "pypi", "version": release, "python": interpreter}, manifest)
            if made.get("status") != "ok":
                raise ConfigError(f"torch {release}: {made.get('reason', 'its wheel could not be had')}",
                                  field="reach.releases")
        for workload in config["workloads"]:
            train = workloads.train_of(config["train"], workload)
            made_of = {"workload": workload, "release": release, "steps": reach["steps"],
                       "trace_version": TRACE_VERSION, "python": interpreter["executable"]}
            out = Path(folder) / "traces" / f"{workload['name']}@{release}.json"
            kept = read_json(out) if out.exists() else None
            name = f"{workload['name']}@{release}"
            if kept is None or kept.get("made_of") != made_of:
                try:
                    python = _runtime(manifest, train, interpreter, sources, config["runtime"], folder)
                    seconds = trace_in(python, train, out, reach["steps"])
                except RuntimeError as exc:
                    failed[name] = str(exc).strip().splitlines()[-1]
                    log.warning("%s: no trace: %s", name, exc)
                    continue
                write_json(out, {**read_json(out), "made_of": made_of})
                log.info("traced %s on torch %s: %.1f s", workload["name"], release, seconds)
            found[name] = read_json(out)
    return found, failed


def _runtime(manifest, train, interpreter, sources, runtime_cfg, folder):
    """The python of a venv of ``manifest``'s release holding what ``train``'s model needs (one
    venv per release and needs, kept)."""
    needs = model_of(train).requirements(release_version(read_json(manifest)))
    name = "-".join([release_version(read_json(manifest)), *(f"{d}{v}" for d, v in needs)])
    out = Path(folder) / "runtimes" / name / "runtime.json"
    if not out.exists() or read_json(out).get("status", "ok") != "ok":
        runtime("venv", manifest, out, {"interpreter": interpreter, "sources": sources,
                                              "cache": runtime_cfg["cache"], "installer": runtime_cfg["installer"],
                                              "model": {k: train.get(k) for k in ("model", "model_options")}})
    record = read_json(out)
    if record.get("status", "ok") != "ok":
        raise RuntimeError(f"{out}: the runtime could not be made: {record.get('reason')}")
    return record["python"]


def matrix(rows, found, sources, reach_cfg, cache_dir, patches=None):
    """One row per fix, workload and release (``COLUMNS``), from ``judge_rows`` over the traces;
    a row of the sheet with neither commits nor a diff is no fix to judge, and is left out."""
    out = []
    for r in judge_rows(rows, found, sources, reach_cfg, cache_dir, patches):
        if r["detail"] == UNRESOLVED:
            continue
        workload, release = r["trace"].rsplit("@", 1)
        out.append({"fix": r["id"], "workload": workload, "release": release, "verdict": r["verdict"],
                    "why": r["detail"]})
    return out


def write(folder, table, workloads, releases, failed=None):
    """``matrix.csv``, ``matrix.md`` and ``matrix.png`` (``reach.matrix.Matrix``)."""
    folder = Path(folder)
    write_csv(folder / "matrix.csv", table, COLUMNS)
    shown = Matrix(table, workloads, releases)
    shown.write_markdown(folder / "matrix.md", failed)
    shown.draw(folder / "matrix.png")


def study_matrix(config, rows, sources, reach_cfg, patches, folder):
    """The matrix of ``config``'s workloads and releases over the fixes of ``rows`` (sheet rows),
    written under ``folder`` (``write``), with every trace made there first (``traces``).
    Returns (its rows, {"<workload>@<release>": why it has no trace}): a workload that cannot
    run is said in the matrix, and the others are answered."""
    found, failed = traces(config, sources, folder)
    table = matrix(rows, found, sources, reach_cfg, REACH_TABLES, patches)
    write(folder, table, [w["name"] for w in config["workloads"]], config["reach"]["releases"], failed)
    return table, failed


def reach_matrix(workloads_cfg, reach_cfg, train_cfg, runtime_cfg, sources, patches, sheet, folder):
    """The workflow's step: ``study_matrix`` over every fix of ``sheet``, from the diffs of
    ``patches`` (the config's ``artifacts.onefix.patches``) or the commits of the clone
    ``sources`` name; the traces that failed are said in the log and in ``matrix.md``."""
    config = {"workloads": workloads_cfg, "reach": reach_cfg, "train": train_cfg, "runtime": runtime_cfg}
    _, failed = study_matrix(config, rows_of(sheet, None), sources, reach_cfg, patches or None, folder)
    for name, why in sorted(failed.items()):
        log.warning("no trace of %s: %s", name, why)
