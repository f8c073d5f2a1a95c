"""The workflow as the ``bugimpact`` command sees it: its rules, and one step run through Snakemake."""
import re
import subprocess
import sys
from pathlib import Path

# The exit code of a run Snakemake ended as done with targets not made (EX_TEMPFAIL: running it
# again makes them; ``steps.unmade_targets``)
LOST_JOBS = 75
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
    """``snakemake --until STEP`` (or, with no step, the targets in ``extra``, or none: the whole
    study) in the current folder; returns Snakemake's exit code."""
    if step is not None and step not in steps():
        print(f"bugimpact: no step {step!r}; the steps are: {', '.join(steps())}", file=sys.stderr)
        return 2
    root = project()
    cmd = [sys.executable, "-m", "snakemake"]
    if Path(config).resolve() != (root / "config.yaml").resolve():
        cmd += ["--configfile", str(config)]  # first: it takes every word up to the next option
    cmd += ["--snakefile", str(root / "Snakefile"), "--cores", str(cores)]
    cmd += ["--until", step] if step else []
    return run_to_the_end(cmd + list(extra)).returncode


def run_to_the_end(cmd, attempts=3, **kwargs):
    """Run a Snakemake command line, and again while it ends having lost jobs (``LOST_JOBS``): a
    run makes only what is not made yet, so the next goes on where it stopped. The last run's
    ``CompletedProcess``."""
    for attempt in range(attempts):
        done = subprocess.run(cmd, **kwargs)
        if done.returncode != LOST_JOBS:
            break
        if attempt + 1 < attempts:
            print("bugimpact: Snakemake lost jobs after a checkpoint; running it again",
                  file=sys.stderr)
    return done
