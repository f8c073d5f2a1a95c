"""The study's self-contained HTML report: the template ``report/report.html.j2`` over the
verdicts, Table IV, the funnel, the builds and the figures. Captions live only under ``report/``
(``<name>.rst``): Snakemake's ``--report`` shows the same ones beside the same files."""
import base64
import re
from pathlib import Path

from ..io import read_csv, write_text
from ..layout import ROOT
from ..reach.matrix import Matrix

TEMPLATES = ROOT / "report"
FIGURE_CAPTIONS = {"bug": "bug_figure", "std": "std_figure"}


def render(study, setup, tables, figures, out, config=None, matrix=()):
    """``tables``: the ``verdicts``, ``pvalues``, ``summary``, ``builds`` and (where compiled fixes
    were checked) ``checks`` CSVs; ``figures``:
    ``bugs`` (the per-bug PNGs) and ``std`` (the spread figure); ``config``: what the captions'
    Jinja expressions read as ``snakemake.config`` (Snakemake's report gives them the same);
    ``matrix``: the reach matrix's csv, text and figure, shown where given (``_matrix``)."""
    import jinja2  # jinja2: only for the report
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    captions = {name: caption(name, config or {}) for name in
                ("verdicts", "pvalues", "summary", "builds", "override_checks", "matrix", "matrix_fixes",
                 *FIGURE_CAPTIONS.values())}
    checks = [_table("Override checks of compiled fixes", "checks", tables["checks"], captions["override_checks"])] \
        if tables.get("checks") and read_csv(tables["checks"])[1] else []
    page = env.get_template("report.html.j2").render(
        study=study, setup=setup, captions=captions,
        verdicts=[_verdict(row) for row in read_csv(tables["verdicts"])[1]],
        pvalues=_pvalues(tables["pvalues"]),
        tables=[_table("Funnel and counts", "summary", tables["summary"], captions["summary"]),
                _table("Builds", "builds", tables["builds"], captions["builds"],
                       ("bug", "arm", "artifact", "status", "failure_class", "build_seconds")), *checks,
                *_matrix(matrix, captions["matrix"], captions["matrix_fixes"])],
        figures=[_figure(path, f"{Path(path).stem}: {captions['bug_figure']}")
                 for path in sorted(figures["bugs"])] + [_figure(figures["std"], captions["std_figure"])]
        + ([_figure(matrix[2], captions["matrix"])] if matrix else []))
    write_text(out, page)


def caption(name, config):
    """``report/<name>.rst`` as plain text: its Jinja expressions filled from ``config`` (as
    Snakemake's report fills them) and its ``literals`` unmarked."""
    import jinja2  # jinja2: only for the report
    text = (TEMPLATES / f"{name}.rst").read_text()
    text = jinja2.Template(text).render(snakemake={"config": config})
    return re.sub(r"``(.+?)``", r"\1", " ".join(text.split()))


def _verdict(row):
    """One short row per bug: verdict, effect with its interval, adjusted p and the MDE side by
    side; the long reason folds out below the bug's name."""
    effect = ""
    if row.get("effect") not in ("", None) and row["effect"].lower() != "nan":
        effect = (f"{row['effect_metric']} {float(row['effect']):+.4f} "
                  f"[{float(row['effect_low']):+.4f}, {float(row['effect_high']):+.4f}]")
        if row.get("effect_level") not in ("", None, "nan"):
            effect += f" ({float(row['effect_level']):.1%})"
    mde = _fmt(row.get("mde", "")) if row.get("mde", "").lower() not in ("", "nan") else ""
    if mde and row.get("mde_alpha"):
        mde += f" at alpha {float(row['mde_alpha']):.3g}"
    details = [row.get("reason", "")]
    details += [f"scope: {row['scope']}"] if row.get("scope") else []
    details += [f"reach: {row['reach_detail']}"] if row.get("reach_detail") else []
    if row.get("contradiction"):  # first: a defect of reach, never a footnote
        details.insert(0, f"CONTRADICTED: {row['contradiction']}")
    reach = row.get("reach", "") + (" (contradicted)" if row.get("contradiction") else "")
    return {"css": row["verdict"].replace(" ", "-"), "bug": row["bug"], "label": row.get("label", ""),
            "details": details, "verdict": row["verdict"], "reach": reach,
            "effect": effect, "p": _fmt(row.get("min_adjusted_p", "")), "mde": mde,
            "runs": f"{row.get('n_buggy', '')} + {row.get('n_corrected', '')}"}


def _pvalues(path):
    """Table IV, one row per bug and metric (the CSV keeps the paper's wide shape): the paper's
    Mann-Whitney p, the paired Wilcoxon p, the adjusted p and A12 fit at any width."""
    columns, rows = read_csv(path)
    metrics = [c for c in columns if f"{c}_a12" in columns]
    return [{"css": (row.get("verdict") or "").replace(" ", "-"), "bug": row["bug"],
             "metrics": [{"metric": metric, "cells": [_fmt(row.get(c, "")) for c in (
                 metric, f"{metric}_wilcoxon", f"{metric}_adjusted", f"{metric}_a12")]}
                         for metric in metrics]} for row in rows]


def _table(title, element_id, path, text, only=None):
    columns, rows = read_csv(path)
    columns = [c for c in columns if not only or c in only]
    return {"title": title, "id": element_id, "caption": text, "note": "", "columns": columns,
            "rows": [{"css": (row.get("verdict") or "").replace(" ", "-"),
                      "cells": [_fmt(row.get(c, "")) for c in columns]} for row in rows]}


def _matrix(files, text, captions_fixes):
    """The reach matrix's two tables (``files``: its csv, text and figure, or none): the count of
    each verdict per workload, with the fixes no workload reaches below it, and the fixes that
    some workload reaches, the most reached first."""
    if not files:
        return []
    shown = Matrix.read(files[0])
    counts = {"title": shown.title(), "id": "matrix", "caption": text, "note": shown.nowhere_line(),
              "columns": ["workload", *shown.count_columns()],
              "rows": [{"css": "", "cells": [w, *counts]} for w, counts in shown.counts()]}
    reached = {"title": "Fixes some workload reaches, the most reached first", "id": "matrix-fixes",
               "caption": captions_fixes, "note": "",
               "columns": ["fix", "cells reached", *shown.cell_columns()],
               "rows": [{"css": "", "cells": [f, n, *cells]} for f, n, cells in shown.fix_rows() if n]}
    return [counts, reached] if reached["rows"] else [counts]


def _fmt(value):
    try:
        number = float(value)
    except (TypeError, ValueError):
        return value
    if value.strip().isdigit():
        return value
    return f"{number:.4g}"


def _figure(path, text):
    return {"alt": Path(path).stem, "data": base64.b64encode(Path(path).read_bytes()).decode(),
            "caption": text}
