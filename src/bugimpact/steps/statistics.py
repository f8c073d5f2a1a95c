"""Step 6: per-bug statistics, interim looks, the study's tables, figures and report."""
import logging
from pathlib import Path

from .. import workloads
from ..io import read_csv, read_json, write_json, write_text
from ..stats.exact import counted_record
from ..stats.report import render

log = logging.getLogger("bugimpact")


def sequential_options(design, stats_cfg):
    """The analysis's view of train.sequential (``design``: ``study_design``): the design of each
    bug, which spends the bug's share of the study's alpha, and its futility rules; or None."""
    from ..stats.sequential import design_from_config  # numpy and scipy: every step job imports this module
    built = design_from_config(design["sequential"], design["runs"], stats_cfg["alpha"],
                               stats_cfg["power"], design.get("family", 1))
    if built is None:
        return None
    return {"design": built, "min_effect": stats_cfg["min_effect"],
            "futility_power": design["sequential"]["futility_power"],
            "metric": design["sequential"]["metric"]}


def bug_stats(stats_cfg, design, bug, records, outputs, tags="", arms_json=None, decisions=()):
    """One bug's statistics, written to ``outputs`` (CSV, JSON); ``design``: the config's train
    ``runs``, ``seed_policy`` and ``sequential`` (``study_design``); ``arms_json``: the ``arms``
    gate of the bug; ``decisions``: the early decision and sequential looks that chose its records."""
    from ..stats.tables import bug_stats as compute  # numpy and scipy: every step job imports this module
    early = next((read_json(p) for p in decisions if "/early/" in str(p)), None)
    planned = {"runs": design["runs"], "seed_policy": design["seed_policy"],
               "sequential": sequential_options(design, stats_cfg)}
    return compute(bug, records, stats_cfg, planned, outputs,
                   {"tags": tags, "arms": read_json(arms_json) if arms_json else None, "early": early})


def study_design(train_cfg, family=1):
    """What the statistics need to know of how runs were made; ``family``: the bugs of the study
    (controls included), among which a group-sequential design shares the study's alpha."""
    return {**{k: train_cfg[k] for k in ("runs", "seed_policy", "sequential")}, "family": family}


def stage(stats_cfg, design, bug, pairs, records, out):
    """One interim look (``design``: ``study_design``), asked for only when the looks before it
    continued (``stats.analysis.interim_look``)."""
    from ..stats.analysis import interim_look  # numpy and scipy: every step job imports this module
    decision = interim_look([counted_record(p) for p in records], pairs, stats_cfg["metrics"],
                            sequential_options(design, stats_cfg), stats_cfg["alpha"])
    decision["bug"] = bug
    write_json(out, decision)
    log.info("%s after %d pairs: %s (%s)", bug, pairs, decision["decision"], decision["reason"])
    return decision


def study_stats(study, stats_cfg, bugs, bug_jsons, funnel_csv, out_pvalues, out_verdicts,
                out_summary, out_checks=None):
    from ..stats.tables import study_tables  # numpy and scipy: every step job imports this module
    funnel_rows = read_csv(funnel_csv)[1] if funnel_csv and Path(funnel_csv).exists() else []
    return study_tables(bug_jsons, bugs, study, stats_cfg, funnel_rows, out_pvalues, out_verdicts,
                        out_summary, out_checks)


def bug_done(bug, stats_json, out):
    """The bug's verdict and its reason, one line (what ``bugimpact run --bug`` ends with)."""
    row = (read_json(stats_json).get("rows") or [{}])[0]
    line = f"{bug}: {row.get('verdict', 'no verdict')}: {row.get('reason', '')}"
    write_text(out, line + "\n")
    log.info("%s", line)


def bug_figure(bug_json, out):
    from ..stats.figures import bug_figure as draw  # matplotlib: every step job imports this module
    data = read_json(bug_json)
    draw(data["info"]["bug"], data["rows"][0]["verdict"] if data["rows"] else "",
         data["info"]["values"], out)


def std_figure(bug_jsons, out):
    from ..stats.figures import std_figure as draw  # matplotlib: every step job imports this module
    from ..stats.tables import std_values  # numpy and scipy: every step job imports this module
    draw(std_values(bug_jsons), out)


def study_setup(config, studied=()):
    """The report's one-line description of the study's setup; ``studied``: the workloads its
    bugs name (``workloads.items``)."""
    t = config["train"]
    named = workloads.named(config)
    others = ", ".join(f"{name} ({named[name]['model']} on {workloads.train(config, name)['challenge']})"
                       for name in studied)
    return (f"{t['model']} on {t['challenge']}, {t['epochs']} epochs, {t['runs']} runs per arm, "
            f"seed policy {t['seed_policy']}, {t['threads']} thread(s), device {t['device']}; "
            f"alpha {config['stats']['alpha']}, {config['stats']['correction']} correction over "
            f"the tested bugs x metrics." + (f" A bug named <bug>@<workload> trains that workload's model "
                                             f"instead: {others}." if others else ""))


def report(study, setup, tables, figures, out, stats_cfg=None, matrix=()):
    """The study's HTML page (``tables``: verdicts, pvalues, summary and builds CSVs;
    ``figures``: ``bugs``, the per-bug PNGs, and ``std``; ``matrix``: the reach matrix's csv,
    text and figure, where the study makes one); ``stats_cfg`` fills the captions."""
    render(study, setup, tables, figures, out, {"stats": stats_cfg or {}}, matrix)
