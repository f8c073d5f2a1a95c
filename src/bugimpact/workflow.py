"""The workflow as the ``bugimpact`` command sees it: its rules, and one step run through Snakemake."""
import re
import subprocess
import sys
from pathlib import Path

RULE = re.compile(r"^(?:(?:rule|checkpoint) (\w+):|use rule \w+ as (\w+) with:)", re.M)


def project():
    """The project folder: this one when it holds the Snakefile, else the checkout of this package."""
    for folder in (Path.cwd(), Path(__file__).resolve().parents[2]):
        if (folder / "Snakefile").exists():
            return folder
    raise FileNotFoundError("no Snakefile here or beside this package: run bugimpact in the project")


def steps():
    """Every rule of the workflow, in the order the rule files are included (the order steps run)."""
    root = project()
    includes = re.findall(r'^include: "(rules/[\w.]+)"', (root / "Snakefile").read_text(), re.M)
    names = []
    for path in includes:
        names += [a or b for a, b in RULE.findall((root / path).read_text())]
    return names


def run(step, cores, extra, config="config.yaml"):
    """``snakemake --until STEP`` (or, with no step, the targets in ``extra``) in the current
    folder; returns Snakemake's exit code."""
    if step is not None and step not in steps():
        print(f"bugimpact: no step {step!r}; the steps are: {', '.join(steps())}", file=sys.stderr)
        return 2
    root = project()
    cmd = [sys.executable, "-m", "snakemake"]
    if Path(config).resolve() != (root / "config.yaml").resolve():
        cmd += ["--configfile", str(config)]  # first: it takes every word up to the next option
    cmd += ["--snakefile", str(root / "Snakefile"), "--cores", str(cores)]
    cmd += ["--until", step] if step else []
    return subprocess.run(cmd + list(extra)).returncode
