rule bug_stats:
    input:
        unpack(bug_stats_inputs),
    output:
        json=STUDY.bug_stats("{bug}", "{key}")[0],
        csv=STUDY.bug_stats("{bug}", "{key}")[1],
    log:
        "logs/stats/{bug}/{key}.log",
    params:
        stats=config["stats"],
        design=study_design(config["train"], len(PLAN.bugs)),
        tags=lambda wc: PLAN.bug(wc.bug).spec.get("tags", ""),
    script:
        "../scripts/bug_stats.py"


rule study_stats:
    input:
        bugs=PLAN.bug_stats(),
        funnel=STUDY.funnel,
    output:
        pvalues=report(STUDY.pvalues, caption="../report/pvalues.rst", category="Tables"),
        verdicts=report(STUDY.verdicts, caption="../report/verdicts.rst", category="Tables"),
        summary=report(STUDY.stats_summary, caption="../report/summary.rst", category="Tables"),
        checks=report(STUDY.override_checks, caption="../report/override_checks.rst", category="Tables"),
    log:
        "logs/stats/study.log",
    params:
        study=config["study"],
        stats=config["stats"],
        bugs={
            name: {k: bug.spec.get(k, "") for k in ("kind", "label", "tags")}
            for name, bug in PLAN.bugs.items()
        },
    script:
        "../scripts/study_stats.py"


rule bug_figure:
    input:
        lambda wc: PLAN.bug_inputs(wc.bug)["stats"],
    output:
        report(STUDY.bug_figure("{bug}"), caption="../report/bug_figure.rst", category="Figures"),
    log:
        "logs/figures/{bug}.log",
    script:
        "../scripts/bug_figure.py"


rule std_figure:
    input:
        PLAN.bug_stats(),
    output:
        report(STUDY.std_figure, caption="../report/std_figure.rst", category="Figures"),
    log:
        "logs/figures/std.log",
    script:
        "../scripts/std_figure.py"


rule report:
    input:
        verdicts=STUDY.verdicts,
        pvalues=STUDY.pvalues,
        summary=STUDY.stats_summary,
        figures=[PLAN.study.bug_figure(bug) for bug in sorted(PLAN.bugs)],
        std=STUDY.std_figure,
        builds=STUDY.builds_summary,
        checks=STUDY.override_checks,
        matrix=PLAN.matrix_files(),  # where the config names workloads and reach.releases
    output:
        STUDY.report,
    log:
        "logs/report.log",
    params:
        study=config["study"],
        setup=study_setup(config, PLAN.studied_workloads()),
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
        STUDY.bug_line("{bug}"),
    log:
        "logs/bugs/{bug}.log",
    script:
        "../scripts/bug_done.py"
