"""Helpers to run the real workflow in a temporary copy of the project."""
import os
import re
import shutil
import sys
from pathlib import Path

from conftest import ROOT

from bugimpact.workflow import run_to_the_end

IGNORE = shutil.ignore_patterns("results", "logs", "benchmarks", ".snakemake", ".git", ".venv*", "__pycache__",
                                "*.egg-info", ".pytest_cache", "cache")


def project_copy(dest):
    shutil.copytree(ROOT, dest, ignore=IGNORE, symlinks=True)
    for sheet in (Path(dest) / "data" / "filter").glob("pytorch.csv"):
        sheet.unlink()  # a fresh clone has no sheet yet
    return Path(dest)


def snakemake(workdir, *args, check=True, timeout=1800, env=None):
    """Snakemake in ``workdir`` as a user runs it: again where it lost jobs (``run_to_the_end``)."""
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", *args]
    out = run_to_the_end(cmd, cwd=workdir, capture_output=True, text=True, timeout=timeout,
                         env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1", **(env or {})))
    if check and out.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stdout[-3000:]}\n"
                             f"{out.stderr[-6000:]}")
    return out


def job_counts(text):
    """Rule -> jobs planned, from Snakemake's job count table (a dry run's)."""
    counts, started = {}, False
    for line in text.splitlines():
        parts = line.split()
        if parts[:2] == ["job", "count"]:
            started = True
        elif started and len(parts) == 2 and parts[1].isdigit():
            counts[parts[0]] = int(parts[1])
        elif started and counts and not parts:
            break
    return counts


def logged_jobs(text):
    """(rule, {field: value}) of each job a Snakemake log prints: a header line ("localrule x:",
    "checkpoint y:", ...) and its indented fields, which end at the first line not indented."""
    jobs = []
    for line in text.splitlines():
        header = JOB_HEADER.match(line)
        if header:
            jobs.append((header.group(1), {}))
        elif jobs and line.startswith("    ") and ": " in line:
            jobs[-1][1].setdefault(*line.strip().split(": ", 1))
        elif jobs and jobs[-1][1]:
            jobs.append((None, {}))  # the block ended: what follows is no job's field
    return [job for job in jobs if job[0]]


JOB_HEADER = re.compile(r"^(?:local)?(?:rule|checkpoint) (\w+):$")


def runtime_threads(work):
    """Each runtime job's threads, as snakemake's logs of the project's runs say them:
    {artifact: threads}."""
    found = {}
    for log in (Path(work) / ".snakemake" / "log").glob("*.log"):
        for rule, fields in logged_jobs(log.read_text()):
            if rule == "runtime":
                found[Path(fields["output"]).parent.name] = int(fields.get("threads", 1))
    return found
