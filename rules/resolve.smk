rule resolve:
    input:
        bugs=f"{OUT}/mined/bugs.csv",
        known=[config["resolve"]["known"]] if config["resolve"]["known"] else [],
    output:
        commits=f"{OUT}/resolved/commits.csv",
    log:
        "logs/resolve.log",
    params:
        resolve=config["resolve"],
        api_url=config["mine"]["api_url"],
        repo=config["repo"],
    script:
        "../scripts/resolve.py"
