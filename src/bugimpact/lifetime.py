"""A job ends with the Snakemake that started it.

Snakemake stopped by a signal it can catch ends its jobs itself; killed (``kill -9``, the machine's
out-of-memory killer) it cannot, and its jobs ran on: a runtime job and its compilers wrote their
record minutes after the run was gone. Each step therefore watches the Snakemake process above it
(found by walking up its parents, known by its pid and start time, so a reused pid is not it) and,
when it is gone, ends every process the job started, then the job, saying so in the job's log. Its
outputs are never written (each is written whole or not at all), and Snakemake's next run sees the
job as incomplete and makes it again.

Linux only (``/proc``); where there is no Snakemake above (a step called by hand or by a test),
nothing is watched.
"""
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

log = logging.getLogger("bugimpact")
POLL_S = 1.0
GRACE_S = 2.0  # between SIGTERM (docker's client passes it on to its container) and SIGKILL


def _stat(pid):
    """(parent pid, start time in clock ticks) of a process, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # after the command name, which may hold spaces
    return int(fields[1]), int(fields[19])


def _is_snakemake(pid):
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(Path(arg.decode(errors="replace")).name == "snakemake" or arg == b"snakemake" for arg in argv[:3])


def workflow_above(pid=None):
    """(pid, start time) of the nearest Snakemake process above ``pid`` (default: this one), or None."""
    current = _stat(pid or os.getpid())
    while current and current[0] > 1:
        parent = current[0]
        current = _stat(parent)
        if current and _is_snakemake(parent):
            return parent, current[1]
    return None


def descendants(pid):
    """Every process below ``pid``, children before their own children."""
    children = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))):
            children.setdefault(stat[0], []).append(int(entry.name))
    found, queue = [], list(children.get(pid, []))
    while queue:
        child = queue.pop(0)
        found.append(child)
        queue.extend(children.get(child, []))
    return found


def _kill(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def end_everything_started(reason):
    """Ends every process this one started (SIGTERM, then SIGKILL after ``GRACE_S``), then this
    one; ``reason`` goes to the log first. The job's own code must not go on once a child it waits
    on is gone (a runtime job would record a compiler ended by this as a failed build): from the
    first signal to its own end this thread keeps the interpreter (the switch interval is longer
    than that, and it makes no call that lets go of it: the grace is waited by the clock)."""
    started = descendants(os.getpid())
    log.error("%s: this job and the %d processes it started are ended; the next run makes it again",
              reason, len(started))
    logging.shutdown()
    sys.setswitchinterval(60)
    _kill(started, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline:
        pass
    _kill([*started, os.getpid()], signal.SIGKILL)


def end_with_workflow():
    """Watch the Snakemake above this job from a daemon thread (module doc); returns its pid, or
    None where there is none to watch."""
    above = workflow_above()
    if above is None:
        return None
    pid, started = above

    def watch():
        while _stat(pid) is not None and _stat(pid)[1] == started:
            time.sleep(POLL_S)
        end_everything_started(f"snakemake (pid {pid}) is gone")
    threading.Thread(target=watch, name="end-with-snakemake", daemon=True).start()
    return pid
