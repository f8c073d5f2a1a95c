"""Step 4, the runtime an artifact trains in (a venv, an image, the host's interpreter; a compiled
fix's override libraries in it), and what keeps it whole.

A runtime is known by its content (``kinds.content_digest``: what its torch reports, the files
its artifact put there, the override libraries' bytes), never by its record's time stamp:

- one made again with the same content keeps its record's bytes, so nothing made from it is made
  again (a train job reads it as an ``ancient`` input; the checks and traces that read it see the
  same bytes);
- one whose record names files that are gone (a venv or a library deleted) is made again in place
  by the first job that needs it (``whole``), from the settings its record keeps;
- one made again with other content is another runtime: every run records the content it ran in,
  and the plan gives a bug whose runs ran in another content a new experiment key, so new runs go
  beside the old (``Plan``); a run planned for one content never runs in another
  (``RuntimeChanged``).
"""
import fcntl
import logging
import time
from pathlib import Path

from .. import models
from ..artifacts import runtimes
from ..artifacts.kinds import content_digest
from ..artifacts.kinds import kind as runtime_kind
from ..artifacts.source_kinds import Lost, source
from ..failures import cause, logged, recorded
from ..io import InputError, atomic_open, read_json
from ..overrides.build import build
from ..overrides.clone_tree import open_tree
from ..overrides.release_build import BuildRefused

log = logging.getLogger("bugimpact")
OVERRIDE_REFUSED = "override build refused"  # how a runtime's reason says its override could not be built
RUNTIME_SETTINGS = {"interpreter": None, "requirements": (), "toolchain_json": None,
                    "installer": "uv", "cache": "data/cache/uv", "sources": None, "model": None,
                    "kind_settings": None, "threads": None, "object_cache": None}


class RuntimeChanged(RuntimeError):
    """A runtime's content is not the one a run was planned for: made again with other content
    since the plan was made. The run is not made (no record); the next workflow run plans it under
    the key of the new content."""


def runtime(kind, artifact_manifest, out, settings=None):
    """The runtime that trains on one artifact; one that cannot be made is a recorded failure.
    ``settings`` (defaults: ``RUNTIME_SETTINGS``): the interpreter, extra ``requirements``,
    the docker runtime's ``toolchain_json``, how a venv is made (``installer``,
    uv or pip, and uv's ``cache``), where the artifact's downloads are fetched again from when
    their cache lost them (``sources``: ``artifact_sources``), the study's ``model`` (its
    ``train.model`` and options: what the runtime must hold for it, ``models``) and the kind's own
    settings (``kind_settings``: ``runtime.<kind>``, kept in the record); ``threads``: the job's
    (a compiled fix's override is built with as many compilers at once, its objects kept in
    ``object_cache``). The record keeps the settings it was made with (``made_with``: ``whole``
    makes it again from them); one made again with the content it had, in the files it named,
    keeps its bytes."""
    before = _made(out)
    manifest = read_json(artifact_manifest)
    folder = Path(out).parent
    settings = {**RUNTIME_SETTINGS, **(settings or {})}
    made_with = {**settings, "kind": kind, "artifact_manifest": str(artifact_manifest)}
    if manifest.get("status") == "failed":
        what = "build" if source(manifest["source"]).built else "artifact"
        result = {"kind": kind, "status": "failed",
                  "reason": f"{what} failed ({manifest.get('failure_class')}): {cause(manifest)}"}
    else:
        try:
            # a cached download that has gone is fetched again (the same bytes) before it installs
            manifest = source(manifest["source"]).fetched(manifest, settings["sources"])
            pins = models.pins(settings["model"], manifest, runtime_kind(kind), settings["interpreter"],
                               settings["sources"])
            settings["requirements"] = [*settings["requirements"], *(f"{d}=={v}" for d, v in pins)]
            result = runtime_kind(kind).make(manifest, folder, settings)
            if pins:
                result["model_requirements"] = models.held(pins, result)
            if settings["kind_settings"] is not None:
                result["settings"] = settings["kind_settings"]
            if manifest.get("kernels"):  # a compiled fix: its override, built against this torch
                result["override"] = _override(manifest["kernels"], result["python"], folder, settings)
        except InputError:
            raise
        except BuildRefused as exc:
            log.error("runtime %s: %s", kind, exc)
            result = {"kind": kind, "status": "failed", "reason": f"{OVERRIDE_REFUSED}: {exc}"}
        except models.Refused as exc:
            log.error("runtime %s: %s", kind, exc)
            result = {"kind": kind, "status": "failed", "reason": f"model refused: {exc}"}
        except Lost as exc:
            log.error("runtime %s: %s", kind, exc)
            result = {"kind": kind, "status": "failed",
                      "reason": f"artifact stale: {exc}; `bugimpact retry-failed` removes it, and "
                                "the next run makes it again"}
        except Exception as exc:  # noqa: BLE001 - the recorded-failure boundary: the bug becomes
            fields = recorded(exc)  # incomplete, not the study; class, file and traceback kept
            log.error("runtime %s failed (%s): %s", kind, fields["failure_class"], logged(fields))
            result = {"kind": kind, "status": "failed", "reason": f"runtime failed: {cause(fields)}",
                      **{k: v for k, v in fields.items() if k != "error"}}
    result["artifact"] = manifest
    result["made_with"] = made_with
    if before and before[0].get("made_with") and result.get("status") != "failed" \
            and content_digest(result) == content_digest(before[0]) and not runtime_kind(kind).lost(before[0]):
        log.info("runtime made again with the content it had (%s): its record kept as it was",
                 content_digest(result)[:12])
        with atomic_open(out, "wb") as handle:  # the same bytes: nothing made from it is made again
            handle.write(before[1])
        return before[0]
    runtimes.write_runtime(out, result)
    return result


def _made(path):
    """(record, bytes) of a made runtime at ``path``, or None (none there, failed, or unreadable)."""
    try:
        data = Path(path).read_bytes()
        record = read_json(path)
    except (OSError, InputError):
        return None
    return (record, data) if isinstance(record, dict) and record.get("status") != "failed" \
        and record.get("kind") else None


def whole(runtime_json, expected=""):
    """The runtime a job runs in (its record), whole: one whose record names files that are gone
    (its venv or an override library deleted) is made again in place first, from the settings
    its record keeps, one job at a time; its content must be ``expected`` (a digest, "" for
    any), the one the plan saw, else ``RuntimeChanged``. A runtime that cannot be made again
    keeps its record, and the job fails with why (no run is recorded for it)."""
    record = read_json(runtime_json)
    if record.get("status") != "failed" and runtime_kind(record["kind"]).lost(record):
        with open(f"{runtime_json}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # the first job makes it, the others find it made
            record = read_json(runtime_json)
            gone = runtime_kind(record["kind"]).lost(record)
            if gone and record.get("status") != "failed":
                record = made_again(runtime_json, record.get("made_with"), f"{', '.join(gone)} gone")
    if expected and record.get("status") != "failed" and content_digest(record) != expected:
        raise RuntimeChanged(f"the runtime {runtime_json} was made again with other content ({content_digest(record)[:12]}, "
                             f"planned with {expected[:12]}): the runs made in it before are kept, and the next "
                             "workflow run trains this bug's runs under a new experiment key beside them")
    return record


def made_again(runtime_json, settings, why):
    """The runtime at ``runtime_json`` made again in place (``why``: in words, for the log) with
    ``settings`` (its record's ``made_with``, or the plan's: ``StudyRuntimes.settings``); the
    record before is kept where the new one fails (the job that asked fails, saying why)."""
    if not settings:
        raise RuntimeError(f"{runtime_json}: {why}, and its record does not keep the settings it was made "
                           "with (made before records did): `bugimpact run --bug ID` makes it again")
    settings = dict(settings)
    kind, manifest = settings.pop("kind"), settings.pop("artifact_manifest")
    before = Path(runtime_json).read_bytes() if Path(runtime_json).exists() else None
    log.warning("%s: %s: made again in place", runtime_json, why)
    started = time.time()
    record = runtime(kind, manifest, runtime_json, settings)
    if record.get("status") == "failed" and before is not None:
        with atomic_open(runtime_json, "wb") as handle:
            handle.write(before)
        raise RuntimeError(f"{runtime_json} could not be made again ({why}): {record.get('reason')}")
    log.info("%s made again in %.0f s (content %s)", runtime_json, time.time() - started,
             content_digest(record)[:12] if record.get("status") != "failed" else "failed")
    return record


def _override(kernels, python, folder, settings):
    """The override libraries of a compiled fix's arm (``overrides.build.build``), built in the
    runtime's folder with its own torch, from the release's tree where a clone gives it (the
    configured clone, where the one the artifact was made from has moved); the build's commands
    and output go to ``override.log``."""
    started = time.time()
    try:
        tree = open_tree(kernels["source"].get("tree"), (settings["sources"] or {}).get("fix_clone") or None)
    except LookupError as exc:
        raise BuildRefused(str(exc)) from None
    with open(Path(folder) / "override.log", "w") as handle:
        record = build(kernels, python, Path(folder) / "override", handle, tree, settings["threads"],
                       settings["object_cache"])
    record["build_seconds"] = round(time.time() - started, 1)
    log.info("override built in %.0f s (%s): %d operators registered, %d exported functions interposed, %d "
             "changed by the fix", record["build_seconds"], record["route"], len(record["registered"]),
             record["interposed"], len(record["changed_functions"]))
    return record
