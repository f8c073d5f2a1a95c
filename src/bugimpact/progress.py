"""Long steps say what they do and how far they are: a download or an install runs with its
output going to the step's log line by line, and a line every ``every`` seconds with the time spent
and the bytes written so far (a 750 MB wheel otherwise leaves a 0-byte log for minutes)."""
import logging
import subprocess
import threading
import time
from pathlib import Path

log = logging.getLogger("bugimpact")


def folder_bytes(path):
    total = 0
    for item in Path(path).rglob("*"):
        try:
            total += item.stat().st_size if item.is_file() else 0
        except OSError:  # a temporary file that was just renamed or removed
            pass
    return total


def run_logged(cmd, what, watch=None, every=15.0, env=None):
    """Run ``cmd`` (a list, in ``env`` or this environment); returns (exit code, its output).
    ``watch``: a folder whose size says how far it is."""
    started = time.time()
    log.info("%s: started", what)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    done = threading.Event()

    def heartbeat():
        while not done.wait(every):
            size = f", {folder_bytes(watch) / 1e6:.0f} MB so far" if watch else ""
            log.info("%s: %.0f s%s", what, time.time() - started, size)
    beat = threading.Thread(target=heartbeat, daemon=True)
    beat.start()
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.strip():
                log.info("%s: %s", what, line.rstrip()[-300:])
        proc.wait()
    finally:
        done.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    size = f", {folder_bytes(watch) / 1e6:.0f} MB" if watch else ""
    log.info("%s: exit %d after %.1f s%s", what, proc.returncode, time.time() - started, size)
    return proc.returncode, "".join(lines)


def copy_logged(source, target, what, every=15.0, chunk=1 << 20):
    """Copy a stream (a download) into a file, with a line every ``every`` seconds."""
    started = last = time.time()
    copied = 0
    while True:
        block = source.read(chunk)
        if not block:
            break
        target.write(block)
        copied += len(block)
        if time.time() - last >= every:
            last = time.time()
            log.info("%s: %.0f MB in %.0f s", what, copied / 1e6, last - started)
    log.info("%s: %.0f MB in %.1f s", what, copied / 1e6, time.time() - started)
