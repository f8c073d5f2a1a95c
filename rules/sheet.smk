# The sheet is a person's. Until it exists, the merge makes it (then it is the merge's output);
# once it exists it is never an output again (Snakemake deletes outputs before rerunning a job):
# the merge writes into it as a side effect, with its own change report. The funnel takes the
# sheet as an input, so editing the sheet refreshes the funnel, the summary and the report.
rule sheet_merge:
    input:
        bugs=STUDY.mined_bugs,
        commits=STUDY.resolved,
    output:
        **({} if Path(config["sheet"]).exists() else {"new_sheet": config["sheet"]}),
        merge=STUDY.sheet_merge(FRAMEWORK),
    log:
        "logs/sheet_merge.log",
    params:
        sheet=config["sheet"],
    script:
        "../scripts/sheet_merge.py"


rule funnel:
    input:
        sheet=config["sheet"],
        merge=STUDY.sheet_merge(FRAMEWORK),
    output:
        funnel=STUDY.funnel,
    log:
        "logs/funnel.log",
    script:
        "../scripts/funnel.py"
