"""A fork server: imports torch once, then forks a fresh child per run.

Importing torch takes seconds (1.7 s for 2.13 on this machine) while a small run trains in about
one, so a process per run is mostly fixed cost. The server only imports (``warm`` makes one
one-element tensor for that): no computation, random draw, thread pool or CUDA context exists when
it forks, so every child starts from the state a fresh process would have, and each run still
seeds and configures itself.

Usage (by the host side, ``artifacts/fork_client.py``):
``python -m bugimpact.harness.server --socket PATH [--idle SECONDS]``. One JSON line per connection:
``{"spec": ..., "out": ..., "log": ..., "env": {...}}``; the server answers ``{"pid": N}`` at once,
then ``{"exit": CODE}`` when the child ends (a negative code is the signal that killed it). A child
dies with the server (the kernel's parent-death signal) and with its client (the server kills it
when the connection closes): a run whose job is gone never writes a record later. The
socket appears only when the imports are done; the server exits after ``--idle`` seconds without
runs, removing it. Standard library only, Python 3.6 syntax, as the rest of the harness.
"""
import argparse
import json
import os
import select
import signal
import socket
import sys
import threading
import traceback

from . import run  # imports torch, numpy and every harness module, once


def warm():
    """Import now what a run would import lazily. In torch 2.x, constructing an optimizer imports
    torch._dynamo and sympy (2-3 s); a one-element tensor and the two optimizers the harness uses do
    that here, without any parallel work, random draw or thread pool: a child still starts from the
    state of a fresh process that has imported these modules."""
    import torch  # after the server has its socket: a client waits for it, not for torch
    param = torch.nn.Parameter(torch.zeros(1))
    torch.optim.SGD([param], lr=0.1, momentum=0.9)
    torch.optim.Adam([param], lr=0.1)


def _die_with_parent():
    """Ask the kernel to SIGKILL this process when the server dies (Linux; elsewhere the client
    and the closed connection still end it)."""
    try:
        import ctypes  # Linux only (prctl)
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _child(conn, listener, request, server, exited):
    """In the forked child: a session of its own (the host kills the run by process group), the
    run's log on stdout and stderr, the run's environment, then the run; never returns. It keeps
    the write end of the ``exited`` pipe open until it exits (not across an exec: os.pipe's ends
    are not inheritable)."""
    code = 1
    try:
        os.close(listener.fileno())  # the raw fds: the objects are shared with the parent's state
        os.close(conn.fileno())
        os.close(exited)
        os.setsid()
        _die_with_parent()
        if os.getppid() != server:  # the server died before the signal was asked for
            os._exit(1)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        sys.stdout = os.fdopen(1, "w", 1)
        sys.stderr = os.fdopen(2, "w", 1)
        os.environ.update(request.get("env") or {})
        code = run.execute(request["spec"], request["out"])
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _wait(handle, conn, pid, active, exited):
    """In a thread: tell the client the child's pid, wait for the child, report its exit; kill
    the child's process group if the client goes away first. The ``exited`` pipe becomes
    readable the moment the child exits, so its end is reported at once, not at the next poll."""
    try:
        handle.write((json.dumps({"pid": pid}) + "\n").encode())
        handle.flush()
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            ready, _, _ = select.select([conn, exited], [], [], 0.2)
            if conn in ready and not conn.recv(1):  # the client closed: nobody will take the record
                _kill_group(pid)
                _, status = os.waitpid(pid, 0)
                break
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        handle.write((json.dumps({"exit": code}) + "\n").encode())
        handle.flush()
    except (OSError, ValueError):
        pass  # the client went away (it kills the child by process group)
    finally:
        with active["lock"]:
            active["count"] -= 1
        os.close(exited)
        handle.close()
        conn.close()


def _kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def serve(path, idle):
    tmp = "%s.%d.tmp" % (path, os.getpid())
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(tmp)
    listener.listen(64)
    os.rename(tmp, path)  # clients see the socket only once it accepts
    active = {"count": 0, "lock": threading.Lock()}
    server = os.getpid()
    try:
        while True:
            ready, _, _ = select.select([listener], [], [], idle)
            if not ready:
                with active["lock"]:
                    if active["count"] == 0:
                        return
                continue
            conn, _ = listener.accept()
            handle = conn.makefile("rwb")
            try:
                request = json.loads(handle.readline().decode("utf-8"))
            except ValueError:
                handle.close()
                conn.close()
                continue
            # Fork here, in the main thread: the waiting threads hold no lock a child could need.
            exited, child_end = os.pipe()
            pid = os.fork()
            if pid == 0:
                _child(conn, listener, request, server, exited)
            os.close(child_end)
            with active["lock"]:
                active["count"] += 1
            threading.Thread(target=_wait, args=(handle, conn, pid, active, exited),
                             daemon=True).start()
    finally:
        listener.close()
        try:
            os.unlink(path)
        except OSError:
            pass


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bugimpact.harness.server", description=__doc__)
    parser.add_argument("--socket", required=True)
    parser.add_argument("--idle", type=float, default=60.0)
    args = parser.parse_args(argv)
    warm()
    serve(args.socket, args.idle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
