rule mine:
    input:
        snapshot=[config["mine"]["snapshot"]] if config["mine"]["source"] == "snapshot" else [],
    output:
        bugs="results/mined/bugs.csv",
        counts="results/mined/releases.csv",
    params:
        mine=config["mine"],
        repo=config["repo"],
    log:
        "logs/mine.log",
    script:
        "../scripts/mine.py"
