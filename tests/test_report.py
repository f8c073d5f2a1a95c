"""The study's HTML page: made from the template and the captions under report/, the ones
Snakemake's --report shows; text from outside (labels, reasons) is escaped."""
import base64

from markupsafe import escape

from bugimpact.io import write_csv
from bugimpact.stats.report import caption, render

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")


def test_the_page_shows_every_table_and_figure_with_the_captions_of_report(tmp_path):
    verdicts = tmp_path / "verdicts.csv"
    write_csv(verdicts, [{"bug": "b1", "label": "<script>alert(1)</script>", "verdict": "impact",
                          "effect_metric": "accuracy", "effect": "-0.02", "effect_low": "-0.03",
                          "effect_high": "-0.01", "effect_level": "0.99", "min_adjusted_p": "0.001",
                          "mde": "0.005", "mde_alpha": "0.0125", "reason": "a & b", "scope": "cpu",
                          "reach": "reached", "reach_detail": "", "n_buggy": "20", "n_corrected": "20"}],
              ["bug", "label", "verdict", "effect_metric", "effect", "effect_low", "effect_high",
               "effect_level", "min_adjusted_p", "mde", "mde_alpha", "reason", "scope", "reach",
               "reach_detail", "n_buggy", "n_corrected"])
    pvalues = tmp_path / "pvalues.csv"
    write_csv(pvalues, [{"bug": "s-b1", "accuracy": "0.002", "accuracy_wilcoxon": "0.0001",
                         "accuracy_adjusted": "0.001", "accuracy_a12": "0.1", "verdict": "impact"}],
              ["bug", "accuracy", "accuracy_wilcoxon", "accuracy_adjusted", "accuracy_a12", "verdict"])
    summary = tmp_path / "summary.csv"
    write_csv(summary, [{"section": "funnel", "name": "mined", "count": "106"}], ["section", "name", "count"])
    builds = tmp_path / "builds.csv"
    write_csv(builds, [{"bug": "b1", "arm": "buggy", "artifact": "pypi-1.5.1", "status": "ok",
                        "failure_class": "", "build_seconds": "1.5", "log_tail": "x"}],
              ["bug", "arm", "artifact", "status", "failure_class", "build_seconds", "log_tail"])
    for name in ("b1", "std"):
        (tmp_path / f"{name}.png").write_bytes(PNG)
    out = tmp_path / "report.html"
    render("s", "setup <1>", {"verdicts": verdicts, "pvalues": pvalues, "summary": summary,
                              "builds": builds},
           {"bugs": [tmp_path / "b1.png"], "std": tmp_path / "std.png"}, out, {"stats": {"correction": "bh"}})
    page = out.read_text()
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "a &amp; b" in page and "setup &lt;1&gt;" in page
    for element in ('<table id="verdicts">', '<table id="pvalues">', '<table id="summary">',
                    '<table id="builds">'):
        assert element in page
    assert page.count("<img") == 2 and "accuracy -0.0200 [-0.0300, -0.0100] (99.0%)" in page
    assert "0.005 at alpha 0.0125" in page and "log_tail" not in page  # builds: its short columns
    # the captions are report/*.rst, filled as Snakemake fills them
    pv = caption("pvalues", {"stats": {"correction": "bh"}})
    assert "(bh)" in pv and "{{" not in pv and str(escape(pv)) in page
    assert str(escape(caption("bug_figure", {}))) in page and str(escape(caption("verdicts", {}))) in page
