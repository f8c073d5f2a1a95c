rule mine:
    input:
        snapshot=[config["mine"]["snapshot"]] if config["mine"]["source"] == "snapshot" else [],
    output:
        bugs=f"{OUT}/mined/bugs.csv",
        counts=f"{OUT}/mined/releases.csv",
    log:
        "logs/mine.log",
    params:
        mine=config["mine"],
        repo=config["repo"],
    script:
        "../scripts/mine.py"
