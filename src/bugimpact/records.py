"""Run records, checked whenever they are read: a record cut short or edited by hand is named,
with what to do, instead of failing a later step with a bare parse error."""
from pathlib import Path

from .experiment import run_seed
from .harness.registry import RECORD_SCHEMA, record_digest
from .io import InputError, read_json

STATUSES = ("ok", "failed", "skipped")
FIX = "run `bugimpact verify --remove` to remove it, then rerun: only it is retrained"


def problem(record):
    """What is wrong with a parsed record, or None."""
    if not isinstance(record, dict):
        return f"a {type(record).__name__}, not a record"
    if record.get("status") not in STATUSES:
        return f"status {record.get('status')!r} is none of {', '.join(STATUSES)}"
    if not isinstance(record.get("spec"), dict):
        return "no 'spec'"
    if "digest" in record and record["digest"] != record_digest(record):
        return "its contents do not match its digest: edited by hand"
    if record["status"] == "ok":
        if record.get("record_schema") != RECORD_SCHEMA:
            return (f"record_schema {record.get('record_schema')!r}, expected {RECORD_SCHEMA} "
                    "(written by another harness version)")
        if not isinstance(record.get("metrics"), dict) or not isinstance(record.get("fingerprints"), dict):
            return "no 'metrics' or 'fingerprints'"
        return _seed_problem(record["spec"])
    return None


def _seed_problem(spec):
    """A run that did not run with its seed as the study derives it (trained from an edited seeds
    archive), in words; None where it did (or its spec does not say how it was derived)."""
    try:
        want = run_seed(spec["study_seed"], spec["bug"], spec["seed_policy"], int(spec["run"]))
    except (KeyError, TypeError, ValueError):
        return None
    if spec.get("seed") != want:
        return (f"it ran with seed {spec.get('seed')!r}, which is not run {spec['run']}'s as the study derives it "
                f"({want}): trained from an edited seeds archive")
    return None


def read_record(path):
    try:
        record = read_json(path)
    except InputError as exc:
        raise InputError(path, f"{str(exc).split(': ', 1)[1]}; {FIX}") from None
    why = problem(record)
    if why:
        raise InputError(path, f"not a valid run record: {why}; {FIX}")
    return record


def record_status(path):
    """A record's or manifest's status; None for one that does not read as an object (``verify``
    names those)."""
    try:
        record = read_json(path)
    except (OSError, ValueError, InputError):
        return None
    return record.get("status") if isinstance(record, dict) else None


def record_paths(root):
    """The run records under ``root``: files shaped ``<bug>/<key>/<arm>/<run>.json``, and nothing
    else that lives there (seeds, manifests, decisions, statistics are not run records)."""
    return [p for p in sorted(Path(root).rglob("*.json"))
            if p.stem.isdigit() and p.parent.name in ("buggy", "corrected")]


def trained_on(folders, arms):
    """Whether the run records under ``folders`` (a bug's runs and repeats under one key) were all
    trained on ``arms`` (``experiment.arms_identity``); False where there are none. A record that
    does not read is passed over: it is made again whatever its key."""
    seen = False
    for path in (p for folder in folders for p in record_paths(folder)):
        try:
            spec = read_json(path)["spec"]
            trained = {"artifact": spec["artifact"], "fault": spec.get("fault", "")}
        except (InputError, KeyError, TypeError):
            continue
        if trained != arms.get(path.parent.name):
            return False
        seen = True
    return seen


def ran_in(folder):
    """The content of the runtime each arm's runs under ``folder`` (a bug's runs under one key) ran
    in (``kinds.content_digest``, as the first whole record of the arm says it), by arm; an arm
    none of whose records says is left out (none yet, or records of before they said)."""
    found = {}
    for path in record_paths(folder):
        arm = path.parent.name
        if arm in found:
            continue
        try:
            record = read_json(path)
            content = record["spec"].get("runtime_sha256") if record.get("status") == "ok" else None
        except (InputError, KeyError, TypeError, AttributeError):
            continue
        if content:
            found[arm] = content
    return found


def why_broken(path):
    """Why a run record does not read as a valid record, or None when it does."""
    try:
        read_record(path)
    except InputError as exc:
        return str(exc).split(": ", 1)[1].split(f"; {FIX}")[0]
    return None


def broken(root):
    """(path, reason) of every run record under ``root`` that does not read as a valid record."""
    return [(path, why) for path in record_paths(root) if (why := why_broken(path))]
