"""What the dynamic loader says of a run: the release's own exported functions it called.

Python loads extension modules with RTLD_NOW, so every symbol of torch's libraries is bound when
``torch`` is imported and the loader's record says nothing of what runs. Loaded lazily instead
(``lazy``, before ``import torch``), each exported function a library reaches through its PLT is
bound at its first call, and with ``LD_DEBUG=bindings`` the loader writes each binding to
``LD_DEBUG_OUTPUT.<pid>`` (set by the launcher where a spec asks: ``bindings``). No release library
is linked ``-Bsymbolic``, so libtorch's calls to its own exported functions are seen too: an
operator a kernel calls below autograd (``at::relu`` inside another kernel), one operator's native
function called by another's, what a Python binding calls. ``mark`` says where the import ends in
that output: what was bound before it is the import's (address relocations of every registered
kernel among them), what after it, the run's calls. The host reads it (``reach.loader``).

Runs inside the runtime under study: standard library only, Python 3.6 syntax.
"""
import os
import sys

ASKED = "bindings"
MARK = None  # where this process's run began in the loader's output (``mark``)


def asked():
    """Whether the launcher asked the loader for its bindings (``LD_DEBUG``)."""
    return os.environ.get("LD_DEBUG") == ASKED and bool(os.environ.get("LD_DEBUG_OUTPUT"))


def lazy():
    """Load what is imported from here on lazily (its functions bound at their first call), where
    the bindings are asked for; a no-op otherwise."""
    if asked():
        sys.setdlopenflags(os.RTLD_LAZY | (sys.getdlopenflags() & ~os.RTLD_NOW & ~os.RTLD_LAZY))


def mark():
    """Keep where the run begins in the loader's output (``MARK``: its file and the bytes written
    so far, at the end of the imports); None where the bindings were not asked for."""
    global MARK
    if asked():
        path = "%s.%d" % (os.environ["LD_DEBUG_OUTPUT"], os.getpid())
        MARK = {"file": path, "offset": os.path.getsize(path) if os.path.exists(path) else 0}
    return MARK
