rule bug_stats:
    input:
        unpack(bug_stats_inputs),
    output:
        csv="results/stats/{bug}.csv",
        json="results/stats/{bug}.json",
    params:
        stats=config["stats"],
        design=study_design(config["train"], len(PLAN.bugs)),
        tags=lambda wc: PLAN.bugs[wc.bug].get("tags", ""),
    log:
        "logs/stats/{bug}.log",
    script:
        "../scripts/bug_stats.py"


rule study_stats:
    input:
        bugs=expand("results/stats/{bug}.json", bug=sorted(PLAN.bugs)),
        funnel="results/filter/funnel.csv",
    output:
        pvalues=report("results/stats/pvalues.csv", caption="../report/pvalues.rst", category="Tables"),
        verdicts=report("results/stats/verdicts.csv", caption="../report/verdicts.rst", category="Tables"),
        summary="results/stats/summary.csv",
    params:
        study=config["study"],
        stats=config["stats"],
        bugs={b: {k: s.get(k, "") for k in ("kind", "label", "tags")} for b, s in PLAN.bugs.items()},
    log:
        "logs/stats/study.log",
    script:
        "../scripts/study_stats.py"


rule bug_figure:
    input:
        "results/stats/{bug}.json",
    output:
        report("results/figures/{bug}.png", caption="../report/bug_figure.rst", category="Figures"),
    log:
        "logs/figures/{bug}.log",
    script:
        "../scripts/bug_figure.py"


rule std_figure:
    input:
        expand("results/stats/{bug}.json", bug=sorted(PLAN.bugs)),
    output:
        report("results/figures/std.png", caption="../report/std_figure.rst", category="Figures"),
    log:
        "logs/figures/std.log",
    script:
        "../scripts/std_figure.py"


rule report:
    input:
        verdicts="results/stats/verdicts.csv",
        pvalues="results/stats/pvalues.csv",
        summary="results/stats/summary.csv",
        figures=expand("results/figures/{bug}.png", bug=sorted(PLAN.bugs)),
        std="results/figures/std.png",
        builds="results/builds/summary.csv",
    output:
        "results/report.html",
    params:
        study=config["study"],
        setup=study_setup(config),
    log:
        "logs/report.log",
    script:
        "../scripts/report.py"
