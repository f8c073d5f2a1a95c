# The sheet is a person's: never an output (Snakemake deletes outputs before rerunning a job). The
# merge writes into it as a side effect, with its own change report; the funnel takes the sheet as
# an input, so editing the sheet refreshes the funnel, the summary and the report.
rule sheet_merge:
    input:
        bugs=f"{OUT}/mined/bugs.csv",
        commits=f"{OUT}/resolved/commits.csv",
    output:
        merge=f"{OUT}/filter/{FRAMEWORK}.merge.json",
    log:
        "logs/sheet_merge.log",
    params:
        sheet=config["sheet"],
    script:
        "../scripts/sheet_merge.py"


# The sheet is an input (an edit refreshes the funnel); on a dry run before the first, it does not
# exist yet and the funnel waits for the merge only.
rule funnel:
    input:
        sheet=lambda wc: config["sheet"] if Path(config["sheet"]).exists() else [],
        merge=f"{OUT}/filter/{FRAMEWORK}.merge.json",
    output:
        funnel=f"{OUT}/filter/funnel.csv",
    log:
        "logs/funnel.log",
    params:
        sheet=config["sheet"],
    script:
        "../scripts/funnel.py"
