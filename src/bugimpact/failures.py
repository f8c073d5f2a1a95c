"""How a step that could not make its output records why: the failure's class, the file it
concerns, and, for an error of this package's own, its traceback.

The classes a record can carry (besides a step's own: ``refused``, ``checksum``, a build's
``compile``, a run's ``killed``, ``timeout``, ``diverged``):

- ``corrupt file``: a file that is there but does not read as what it is (a shipped archive cut
  short, a wheel that is not a zip); ``file`` names it;
- ``missing file``: a file the step reads is not there; ``file`` names it;
- ``download``: the network or a server did not give what was asked; ``file`` the address;
- ``error``: a tool the step ran, or a check it made, said no (a ``RuntimeError`` or ``OSError``
  raised with its reason);
- ``internal error``: any other exception, a fault of this package's own or one it did not
  foresee.
The last two keep the traceback in the record; the step's log has it too.
"""
import json
import lzma
import re
import socket
import tarfile
import traceback
import urllib.error
import zipfile
import zlib
from contextlib import contextmanager


class CorruptFile(RuntimeError):
    def __init__(self, path, why):
        super().__init__(f"{path} does not read ({why}): it is cut short or not what its name says "
                         "(a shipped file comes back whole with `git checkout -- FILE`)")
        self.path = str(path)


class DownloadFailed(RuntimeError):
    """What was asked of a package index or a server could not be had; the message says why."""


# what reading a file of the wrong format or cut short raises (tar, xz, gzip, zip, JSON, text)
FORMAT_ERRORS = (tarfile.TarError, lzma.LZMAError, zlib.error, EOFError, zipfile.BadZipFile,
                 json.JSONDecodeError, UnicodeDecodeError)
DOWNLOAD_ERRORS = (DownloadFailed, urllib.error.URLError, ConnectionError, TimeoutError, socket.timeout)


@contextmanager
def reading(path):
    """A format error raised inside is ``CorruptFile`` naming ``path``."""
    try:
        yield
    except FORMAT_ERRORS as exc:
        raise CorruptFile(path, f"{type(exc).__name__}: {exc}") from exc


def recorded(exc):
    """The fields a failed record keeps for ``exc`` (raised in the step being recorded):
    ``failure_class``, ``error``, and ``file`` and ``traceback`` where they apply."""
    if isinstance(exc, CorruptFile):
        return {"failure_class": "corrupt file", "file": exc.path, "error": str(exc)}
    if isinstance(exc, FileNotFoundError):
        return {"failure_class": "missing file", "file": str(exc.filename or ""), "error": str(exc)}
    if isinstance(exc, DOWNLOAD_ERRORS):
        address = getattr(exc, "url", None) or getattr(exc, "filename", None) or ""
        return {"failure_class": "download", "file": str(address), "error": str(exc)}
    said_no = isinstance(exc, (RuntimeError, OSError))
    return {"failure_class": "error" if said_no else "internal error",
            "error": str(exc) if said_no else f"{type(exc).__name__}: {exc}",
            "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))}


def cause(fields):
    """A failed record's error, after the file it concerns where the error does not name it."""
    file, error = fields.get("file"), fields.get("error", "")
    return f"{file}: {error}" if file and file not in error else error


def logged(fields):
    """A failure as the step's log says it: its cause, then its traceback where it has one."""
    return cause(fields) + (f"\n{fields['traceback']}" if fields.get("traceback") else "")


# what says why a process stopped, in the order a cause is looked for in its output: the
# exception's own line (Python's ``RuntimeError: ...``, C++'s ``what():  ...``), then what the
# runtime said as it died; never a frame of the backtrace after it (``frame #23: ...``)
CAUSES = (re.compile(r"\bwhat\(\):|^\w*(Error|Exception)\b.*:|\berror: "),
          re.compile(r"terminate called|Segmentation fault|Aborted|Fatal Python error|Killed|core dumped"))
NOT_A_CAUSE = re.compile(r"^\s*(frame #\d+|File \"|Traceback \(most recent|Exception raised from|attempt \d|device )")


def cause_line(text, width=300, empty="no output"):
    """The line of a process's output that says why it stopped (``CAUSES``), else its last line
    that is not a backtrace's frame or bookkeeping (``empty`` where there is none)."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip() and not NOT_A_CAUSE.match(line)]
    for pattern in CAUSES:
        found = [line for line in lines if pattern.search(line)]
        if found:
            return found[-1][:width]
    return lines[-1][:width] if lines else empty
