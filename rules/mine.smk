rule mine:
    input:
        snapshot=[config["mine"]["snapshot"]] if config["mine"]["source"] == "snapshot" else [],
    output:
        bugs=STUDY.mined_bugs,
        counts=STUDY.mined_releases,
    log:
        "logs/mine.log",
    params:
        mine=config["mine"],
        repo=config["repo"],
    script:
        "../scripts/mine.py"
