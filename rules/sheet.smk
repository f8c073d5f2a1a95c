# The sheet itself is not an output: Snakemake deletes outputs before rerunning a job, and the
# sheet holds a person's decisions. The rule merges into it and outputs a change report.
rule sheet:
    input:
        bugs="results/mined/bugs.csv",
        commits="results/resolved/commits.csv",
    output:
        merge=f"results/filter/{FRAMEWORK}.merge.json",
        funnel="results/filter/funnel.csv",
    params:
        sheet=config["sheet"],
    log:
        "logs/sheet.log",
    conda:
        "../envs/host.yaml"
    script:
        "../scripts/sheet.py"
