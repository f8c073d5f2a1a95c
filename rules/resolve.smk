rule resolve:
    input:
        bugs=STUDY.mined_bugs,
        known=[config["resolve"]["known"]] if config["resolve"]["known"] else [],
    output:
        commits=STUDY.resolved,
    log:
        "logs/resolve.log",
    params:
        resolve=config["resolve"],
        api_url=config["mine"]["api_url"],
        repo=config["repo"],
    script:
        "../scripts/resolve.py"
