"""Which fixes can touch which models: every fix judged for every workload of a study on every
release, with no build and no training (``bugimpact reach --config X``, where ``reach.workloads``
names the models and ``reach.releases`` the torch releases).

Each release is a venv of its wheel (and of what a workload's model needs, e.g. the torchvision
released for that torch), each workload traced in it once (its model, challenge and options, on
shaped data) and the trace kept with what it was made of, so a second call traces nothing. The
fixes are judged against every trace at once (``batch.judge_rows``) into ``matrix.csv``: one row
per fix, workload and release, with its verdict and why; ``matrix.md`` and ``matrix.png`` show it
fixes first that touch the most workloads."""
import logging
from pathlib import Path

from ..artifacts import interpreters
from ..artifacts.source_kinds import release_version
from ..artifacts.sources import artifact_sources
from ..harness import TRACE_VERSION
from ..io import ConfigError, read_json, write_csv, write_json, write_text
from ..models import model_of
from ..reach.batch import UNRESOLVED, judge_rows, trace_in
from .builds import artifact
from .runtime import runtime

log = logging.getLogger("bugimpact.reach")
COLUMNS = ("fix", "workload", "release", "verdict", "why")
# the verdicts in the order a reader weighs them: what a workload can run first
ORDER = ("reached", "unknown", "not reached on cpu", "not reached")


def workload_train(train_cfg, workload):
    """The study's experiment with one workload's model, challenge and options in place."""
    return {**train_cfg, "model": workload["model"], "model_options": workload.get("model_options") or {},
            "challenge": workload.get("challenge") or train_cfg["challenge"]}


def traces(config, folder):
    """({"<workload>@<release>": trace}, {"<workload>@<release>": why it has none}): each workload
    of ``reach.workloads`` traced on each release of ``reach.releases`` (venvs of the release
    wheels for ``runtime.python``), made once and kept under ``folder`` with what they were made
    of. A workload that cannot run on a release (its model needs what the venv lacks) is said, and
    the others go on."""
    reach, sources = config["reach"], artifact_sources(config)
    interpreter = interpreters.find(config["runtime"].get("python") or "python3")
    found, failed = {}, {}
    for release in reach["releases"]:
        manifest = Path(folder) / "artifacts" / f"pypi-{release}" / "manifest.json"
        if not manifest.exists() or read_json(manifest).get("status") != "ok":
            made = artifact(sources, {"source": "pypi", "version": release, "python": interpreter}, manifest)
            if made.get("status") != "ok":
                raise ConfigError(f"torch {release}: {made.get('reason', 'its wheel could not be had')}",
                                  field="reach.releases")
        for workload in reach["workloads"]:
            train = workload_train(config["train"], workload)
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
    """``matrix.csv``, and ``matrix.md`` and ``matrix.png``: fixes that touch the most workloads
    first, the count per workload, the fixes no workload reaches, the traces that failed."""
    folder = Path(folder)
    write_csv(folder / "matrix.csv", table, COLUMNS)
    cells = {(r["fix"], r["workload"], r["release"]): r["verdict"] for r in table}
    fixes = sorted({r["fix"] for r in table}, key=lambda f: (-_reaching(cells, f), f))
    columns = [(w, rel) for rel in releases for w in workloads]
    lines = [f"# Which fixes can touch which models: {len(fixes)} fixes, {len(workloads)} workloads, "
             f"torch {', '.join(releases)}", "", "| workload | " + " | ".join(
                 f"{v} ({rel})" for rel in releases for v in ORDER) + " |",
             "|---" * (1 + len(ORDER) * len(releases)) + "|"]
    for w in workloads:
        lines.append(f"| {w} | " + " | ".join(str(sum(cells.get((f, w, rel)) == v for f in fixes))
                                             for rel in releases for v in ORDER) + " |")
    lines += [f"\nNo trace of {name}: {why}" for name, why in sorted((failed or {}).items())]
    nowhere = [f for f in fixes if not _reaching(cells, f) and not any(
        cells.get((f, w, rel)) == "unknown" for w, rel in columns)]
    lines += ["", f"Reached by no workload on any release, and unknown for none: {len(nowhere)} fixes"
              f"{': ' + ', '.join(nowhere) if nowhere else ''}.", "",
              "| fix | workloads reaching it | " + " | ".join(f"{w}@{rel}" for w, rel in columns) + " |",
              "|---" * (2 + len(columns)) + "|"]
    for f in fixes:
        lines.append(f"| {f} | {_reaching(cells, f)} | " + " | ".join(
            _short(cells.get((f, w, rel), "")) for w, rel in columns) + " |")
    write_text(folder / "matrix.md", "\n".join(lines) + "\n")
    _figure(folder / "matrix.png", fixes, columns, cells)


def _reaching(cells, fix):
    """How many (workload, release) cells a fix is reached in."""
    return sum(v == "reached" for (f, _, _), v in cells.items() if f == fix)


def _short(verdict):
    return {"reached": "R", "unknown": "?", "not reached on cpu": "cpu", "not reached": "."}.get(verdict, "")


def _figure(path, fixes, columns, cells):
    # the figure alone needs matplotlib (steps import it only where used: a train job imports steps)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after use("Agg"): no display is asked for
    from matplotlib.colors import ListedColormap  # with pyplot, for the figure alone

    colours = ("#c0392b", "#95a5a6", "#5dade2", "#f4f6f7")  # ORDER's
    grid = [[ORDER.index(cells[(f, w, rel)]) if (f, w, rel) in cells else len(ORDER) - 1
             for w, rel in columns] for f in fixes]
    fig, ax = plt.subplots(figsize=(max(7, 2 + 0.45 * len(columns)), 1.5 + 0.16 * len(fixes)))
    ax.imshow(grid, cmap=ListedColormap(colours), vmin=0, vmax=len(ORDER) - 1, aspect="auto",
              interpolation="nearest")
    ax.set_xticks(range(len(columns)))
    ax.set_xticklabels([f"{w}@{rel}" for w, rel in columns], rotation=90, fontsize=7)
    ax.set_yticks(range(len(fixes)))
    ax.set_yticklabels(fixes, fontsize=6)
    ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=c, label=v) for c, v in zip(colours, ORDER)],
              loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7)
    ax.set_title("fixes x workloads: reach (fixes touching the most workloads first)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
