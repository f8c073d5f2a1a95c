"""A job ends with the Snakemake that started it (``bugimpact.lifetime``). Seen: after `kill -9`
of snakemake, the runtime job and its g++ ran on as orphans and wrote their record."""
import os
import signal
import subprocess
import sys
import time

from conftest import ROOT

JOB = '''import subprocess, sys
from bugimpact.steps.script import run_logged_step

def job(out):
    subprocess.run(["sleep", "321.5"])  # a compiler, a long run
    open(out, "w").write("made")

run_logged_step(sys.argv[2], job, out=sys.argv[1])
'''


def _pids(pattern):
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def _wait(condition, seconds):
    deadline = time.time() + seconds
    while not condition() and time.time() < deadline:
        time.sleep(0.2)
    return condition()


def test_a_job_and_what_it_started_end_when_snakemake_is_killed(tmp_path):
    (tmp_path / "job.py").write_text(JOB)
    (tmp_path / "Snakefile").write_text(
        'rule long:\n    output: "made.txt"\n    log: "job.log"\n'
        f'    shell: "{sys.executable} job.py {{output}} {{log}}"\n')
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    workflow = subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "1"], cwd=tmp_path, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        assert _wait(lambda: _pids("sleep 321.5"), 60), "the job never started its child"
        job = _pids(f"job.py {tmp_path / 'made.txt'}") or _pids("job.py made.txt")
        assert job
        os.kill(workflow.pid, signal.SIGKILL)
        workflow.wait()
        assert _wait(lambda: not _pids("sleep 321.5") and not _pids("job.py made.txt"), 20), \
            "the job or its child outlived snakemake"
    finally:
        for pid in _pids("sleep 321.5"):
            os.kill(pid, signal.SIGKILL)
    assert not (tmp_path / "made.txt").exists()
    assert f"snakemake (pid {workflow.pid}) is gone: this job and the 1 processes it started are ended" \
        in (tmp_path / "job.log").read_text()


def test_a_step_called_without_snakemake_above_watches_nothing():
    from bugimpact.lifetime import end_with_workflow, workflow_above
    assert workflow_above() is None and end_with_workflow() is None  # pytest's own process
