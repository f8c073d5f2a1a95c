rule bug_stats:
    input:
        unpack(bug_stats_inputs),
    output:
        csv=layout.BUG_TABLE.format(study=config["study"], bug="{bug}", key="{key}"),
        json=layout.BUG_STATS.format(study=config["study"], bug="{bug}", key="{key}"),
    log:
        "logs/stats/{bug}/{key}.log",
    params:
        stats=config["stats"],
        design=study_design(config["train"], len(PLAN.bugs)),
        tags=lambda wc: PLAN.bugs[wc.bug].get("tags", ""),
    script:
        "../scripts/bug_stats.py"


rule study_stats:
    input:
        bugs=PLAN.bug_stats(),
        funnel=f"{OUT}/filter/funnel.csv",
    output:
        pvalues=report(f"{OUT}/stats/pvalues.csv", caption="../report/pvalues.rst", category="Tables"),
        verdicts=report(f"{OUT}/stats/verdicts.csv", caption="../report/verdicts.rst", category="Tables"),
        summary=report(f"{OUT}/stats/summary.csv", caption="../report/summary.rst", category="Tables"),
    log:
        "logs/stats/study.log",
    params:
        study=config["study"],
        stats=config["stats"],
        bugs={b: {k: s.get(k, "") for k in ("kind", "label", "tags")} for b, s in PLAN.bugs.items()},
    script:
        "../scripts/study_stats.py"


rule bug_figure:
    input:
        lambda wc: PLAN.bug_inputs(wc.bug)["stats"],
    output:
        report(f"{OUT}/figures/{{bug}}.png", caption="../report/bug_figure.rst", category="Figures"),
    log:
        "logs/figures/{bug}.log",
    script:
        "../scripts/bug_figure.py"


rule std_figure:
    input:
        PLAN.bug_stats(),
    output:
        report(f"{OUT}/figures/std.png", caption="../report/std_figure.rst", category="Figures"),
    log:
        "logs/figures/std.log",
    script:
        "../scripts/std_figure.py"


rule report:
    input:
        verdicts=f"{OUT}/stats/verdicts.csv",
        pvalues=f"{OUT}/stats/pvalues.csv",
        summary=f"{OUT}/stats/summary.csv",
        figures=expand(f"{OUT}/figures/{{bug}}.png", bug=sorted(PLAN.bugs)),
        std=f"{OUT}/figures/std.png",
        builds=f"{OUT}/builds/summary.csv",
    output:
        f"{OUT}/report.html",
    log:
        "logs/report.log",
    params:
        study=config["study"],
        setup=study_setup(config),
        stats=config["stats"],  # what the captions name (the correction)
    script:
        "../scripts/report.py"


# One bug's line: its verdict and reason, once its records and statistics are made. To remake
# what one bug needs, `bugimpact run --bug <bug>` names its gate, decisions and missing records as
# targets too (``Plan.bug_targets``: Snakemake does not look for them behind an existing output).
rule bug:
    input:
        unpack(lambda wc: PLAN.bug_inputs(wc.bug)),
    output:
        f"{OUT}/bugs/{{bug}}.txt",
    log:
        "logs/bugs/{bug}.log",
    script:
        "../scripts/bug_done.py"
