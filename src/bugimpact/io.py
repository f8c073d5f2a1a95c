"""Atomic file writes and CSV helpers shared by every host-side step.

Every output is written to a temporary file in the destination folder and renamed into place, so a
killed job never leaves a half-written file that a later step could mistake for a result.
"""
import csv
import json
import math
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_open(path, mode="w", **kwargs):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, _target_mode(path))  # mkstemp makes 0600: keep the file's mode, or the umask's
        with os.fdopen(fd, mode, **kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _target_mode(path):
    """The mode a replaced file keeps, or what a new file gets under the current umask."""
    try:
        return os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_text(path, text):
    with atomic_open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def write_json(path, obj):
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def read_json(path):
    """A JSON file's content; a file that is not JSON is an error that names it."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as exc:
        raise InputError(path, f"not valid JSON (line {exc.lineno}, column {exc.colno}: "
                         f"{exc.msg}); was it cut short or edited?") from None
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not UTF-8 text (byte {exc.start})") from None


def write_csv(path, rows, columns, encoding="utf-8", as_typed=()):
    """Write dict rows with a fixed column order; missing keys become empty cells. Text that a
    spreadsheet would evaluate (``=``, ``+``, ``-``, ``@``, a tab or CR first, and not a number)
    is written with a leading ``'`` (OWASP's CSV-injection advice), except in ``as_typed``
    columns: what a person typed is kept as typed."""
    with atomic_open(path, "w", encoding=encoding, newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _cell(row.get(k), k not in as_typed) for k in columns})


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def inert(value):
    """A text cell a spreadsheet shows as text: a leading ``'`` before a formula-like start."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        try:
            float(value)
            return value  # a number, e.g. a negative effect
        except ValueError:
            return "'" + value
    return value


def _cell(value, neutralise=True):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return inert(value) if neutralise else value


def read_csv(path):
    """Rows as dicts of strings (no type guessing: SHAs and ids stay text)."""
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


class InputError(ValueError):
    """Bad user input, with the place it came from: file, row and field."""

    def __init__(self, path, message, row=None, field=None):
        where = str(path)
        if row is not None:
            where += f", row {row}"
        if field is not None:
            where += f", field '{field}'"
        super().__init__(f"{where}: {message}")
        self.path, self.row, self.field, self.message = str(path), row, field, message


class ConfigError(InputError):
    """A config that cannot run, found where its file is not known: whoever read the file names it
    (``config_file``); named ``config.yaml`` only where nothing does."""

    def __init__(self, message, field=None):
        super().__init__("config.yaml", message, field=field)


@contextmanager
def config_file(path):
    """Config errors raised inside name ``path``, the file the config was read from."""
    try:
        yield
    except ConfigError as exc:
        raise InputError(path, exc.message, field=exc.field) from None
