rule resolve:
    input:
        bugs="results/mined/bugs.csv",
        known=[config["resolve"]["known"]] if config["resolve"]["known"] else [],
    output:
        commits="results/resolved/commits.csv",
    params:
        resolve=config["resolve"],
    log:
        "logs/resolve.log",
    conda:
        "../envs/host.yaml"
    script:
        "../scripts/resolve.py"
