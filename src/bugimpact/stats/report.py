"""A self-contained HTML report: the verdicts, Table IV, the funnel, figures with captions."""
import base64
import html
from pathlib import Path

from ..io import read_csv, write_text

CSS = """body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}
.scroll{overflow-x:auto}img{max-width:100%}
table{border-collapse:collapse;margin:1em 0;font-size:13px}td,th{border:1px solid #bbb;padding:3px 6px}
th{background:#eee}.impact{background:#f5b7b1}.not-triggered,.not-triggered-on-cpu{background:#d5f5e3}
.incomplete{background:#fcf3cf}figure{margin:1.5em 0}figcaption{font-size:13px;color:#444}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
details{font-size:12px;color:#444}summary{cursor:pointer}"""


def _table(path, element_id, limit_cols=None):
    columns, rows = read_csv(path)
    columns = [c for c in columns if not limit_cols or c in limit_cols]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = []
    for row in rows:
        css = (row.get("verdict") or "").replace(" ", "-")
        cells = "".join(f"<td>{html.escape(_fmt(row.get(c, '')))}</td>" for c in columns)
        body.append(f'<tr class="{css}">{cells}</tr>')
    return (f'<div class="scroll"><table id="{element_id}"><tr>{head}</tr>{"".join(body)}</table>'
            "</div>")


def _verdicts(path):
    """One short row per bug: verdict, effect with its interval, adjusted p and the MDE side by
    side; the long reason folds out below the bug's name."""
    _, rows = read_csv(path)
    head = "".join(f"<th>{h}</th>" for h in ("bug", "verdict", "reach", "effect [interval] (level)",
                                               "smallest p adj.", "detectable (MDE)", "runs"))
    body = []
    for row in rows:
        effect = ""
        if row.get("effect") not in ("", None) and row["effect"].lower() != "nan":
            effect = (f"{row['effect_metric']} {float(row['effect']):+.4f} "
                      f"[{float(row['effect_low']):+.4f}, {float(row['effect_high']):+.4f}]")
            if row.get("effect_level") not in ("", None, "nan"):
                effect += f" ({float(row['effect_level']):.1%})"
        mde = _fmt(row.get("mde", "")) if row.get("mde", "").lower() not in ("", "nan") else ""
        if mde and row.get("mde_alpha"):
            mde += f" at alpha {float(row['mde_alpha']):.3g}"
        name = html.escape(row["bug"]) + (f"<br><small>{html.escape(row['label'])}</small>"
                                          if row.get("label") else "")
        details = html.escape(row.get("reason", ""))
        if row.get("scope"):
            details += f"<br>scope: {html.escape(row['scope'])}"
        if row.get("reach_detail"):
            details += f"<br>reach: {html.escape(row['reach_detail'])}"
        cells = [f"<td>{name}<details><summary>why</summary>{details}</details></td>",
                 f"<td><b>{html.escape(row['verdict'])}</b></td>",
                 f"<td>{html.escape(row.get('reach', ''))}</td>",
                 f'<td class="num">{html.escape(effect)}</td>',
                 f'<td class="num">{html.escape(_fmt(row.get("min_adjusted_p", "")))}</td>',
                 f'<td class="num">{html.escape(mde)}</td>',
                 f'<td class="num">{html.escape(row.get("n_buggy", ""))} + '
                 f'{html.escape(row.get("n_corrected", ""))}</td>']
        body.append(f'<tr class="{row["verdict"].replace(" ", "-")}">{"".join(cells)}</tr>')
    return f'<table id="verdicts"><tr>{head}</tr>{"".join(body)}</table>'


def _pvalues(path):
    """Table IV, one row per bug and metric (the CSV keeps the paper's wide shape): the paper's
    Mann-Whitney p, the paired Wilcoxon p, the adjusted p and A12 fit at any width."""
    columns, rows = read_csv(path)
    metrics = [c for c in columns if f"{c}_a12" in columns]
    head = "".join(f"<th>{h}</th>" for h in ("bug", "metric", "Mann-Whitney p (the paper's)",
                                               "Wilcoxon p (paired)", "adjusted p", "A12"))
    body = []
    for row in rows:
        css = (row.get("verdict") or "").replace(" ", "-")
        for i, metric in enumerate(metrics):
            name = (f'<td rowspan="{len(metrics)}">{html.escape(row["bug"])}</td>' if i == 0 else "")
            cells = "".join(f'<td class="num">{html.escape(_fmt(row.get(c, "")))}</td>'
                            for c in (metric, f"{metric}_wilcoxon", f"{metric}_adjusted",
                                      f"{metric}_a12"))
            body.append(f'<tr class="{css}">{name}<td>{html.escape(metric)}</td>{cells}</tr>')
    return f'<table id="pvalues"><tr>{head}</tr>{"".join(body)}</table>'


def _fmt(value):
    try:
        number = float(value)
    except (TypeError, ValueError):
        return value
    if value.strip().isdigit():
        return value
    return f"{number:.4g}"


def _figure(path, caption):
    data = base64.b64encode(Path(path).read_bytes()).decode()
    return (f'<figure><img alt="{html.escape(Path(path).stem)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def render(study, config_summary, verdicts_csv, pvalues_csv, summary_csv, builds_csv, bug_figures,
           std_png, out):
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>bugimpact: {html.escape(study)}"
             f"</title><style>{CSS}</style></head><body>",
             f"<h1>bugimpact study <code>{html.escape(study)}</code></h1>",
             f"<p>{html.escape(config_summary)}</p>",
             "<h2>Verdicts</h2><p>One row per bug or control. <b>not triggered</b>: identical "
             "fingerprints in every run pair, proven without statistics for that device, those "
             "builds and seeds (its scope is under <i>why</i>); <b>impact</b>: adjusted p below "
             "alpha and a Hodges-Lehmann effect (buggy minus corrected, with its interval) beyond "
             "min_effect; <b>no evidence of impact</b>: read it with the effect this design could "
             "detect (MDE, at the configured power); <b>incomplete</b>: runs missing or failed; "
             "<b>not reached</b>: the workload cannot execute what the fix changed, found before "
             "any build (<i>reach</i>: what a trace of the workload dispatched and ran, against "
             "the fix's diff; <i>unknown</i> where the mapping cannot bound the change).</p>",
             _verdicts(verdicts_csv),
             "<h2>Table IV: p-values per bug and metric</h2><p>Two-sided Mann-Whitney U p-values "
             "(the paper's columns), then the Wilcoxon signed-rank p for paired seeds, the p-values "
             "adjusted over the tested bugs x metrics (a bug decided without a test has none), "
             "and Vargha-Delaney A12. <code>results/&lt;study&gt;/stats/pvalues.csv</code> has the paper's shape, "
             "a row per bug.</p>",
             _pvalues(pvalues_csv),
             "<h2>Funnel and counts</h2>", _table(summary_csv, "summary"),
             "<h2>Builds</h2><p>Each bug arm's framework artifact: ok, or the failure class and "
             "the tail of the build log.</p>",
             _table(builds_csv, "builds", ("bug", "arm", "artifact", "status", "failure_class",
                                           "build_seconds")),
             "<h2>Figures</h2>"]
    for bug, path in sorted(bug_figures.items()):
        parts.append(_figure(path, f"{bug}: test-set metrics of every run, buggy (red) against "
                                   "corrected (blue); boxes show quartiles."))
    parts.append(_figure(std_png, "Standard deviation of each metric across the runs of one arm "
                                  "of one bug (the paper reported 0.2-0.51%)."))
    parts.append("</body></html>")
    write_text(out, "\n".join(parts))
