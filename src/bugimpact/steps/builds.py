"""Step 4: each arm's framework artifact (a docker build, a release wheel, a one-fix overlay)
and the runtime it trains in; the arms gate that says whether a bug can run."""
import logging
import time
from pathlib import Path

from .. import models
from ..artifacts import runtimes
from ..artifacts.kinds import kind as runtime_kind
from ..artifacts.onefix import Refused, describe
from ..artifacts.source_kinds import Lost, source
from ..artifacts.sources import ChecksumMismatch, write_manifest
from ..failures import cause, logged, recorded
from ..framework.declarations import op_name
from ..io import InputError, read_json, write_csv, write_json
from ..overrides.build import build
from ..overrides.check import OUTCOMES
from ..overrides.check import read as read_check
from ..overrides.release_build import BuildRefused
from ..overrides.release_source import open_tree
from ..reach.run import JUDGED_AT, summary_line

log = logging.getLogger("bugimpact")


def toolchain(docker_cfg, out, log_path):
    """The toolchain image, built once per recipe by its own job; its record is the output."""
    from ..artifacts.docker import build_toolchain  # the Docker SDK: every step job imports this module
    with open(log_path, "a") as handle:
        record = build_toolchain(docker_cfg, handle)
    write_json(out, record)
    log.info("toolchain %s: %s, python %s", record["tag"], record["image_id"][:19],
             record["python"]["version"])
    return record


def docker_build(docker_cfg, spec, toolchain_json, out, log_path):
    """Step 4: build the wheel at a commit in the toolchain image; a failure is a result."""
    from ..artifacts.docker import build_wheel  # the Docker SDK: every step job imports this module
    if not docker_cfg["clone"]:
        raise ValueError("artifacts.docker.clone: a local clone of the framework is needed")
    manifest = build_wheel(spec["commit"], docker_cfg, read_json(toolchain_json), Path(out).parent,
                           log_path)
    write_json(out, manifest)
    log.info("build of %s: %s", spec["commit"][:12], manifest["status"])
    return manifest


def build_status(bug, arm, artifact_manifest, out, reach_json=None, runtime_json=None):
    """One arm's build, as the Builds table shows it: ``ok``, ``refused`` (a fix the release
    cannot take, or an override library that cannot be built as the release was: the runtime of a
    compiled fix's arm, ``runtime_json``, says) or ``failed``, with its class and log tail."""
    if artifact_manifest is None:  # stopped by reach before any artifact was asked for
        write_json(out, {"bug": bug, "arm": arm, "artifact": "", "status": "skipped",
                         "failure_class": "", "build_seconds": 0,
                         "log_tail": summary_line(read_json(reach_json))})
        return
    manifest = read_json(artifact_manifest)
    refused = manifest.get("failure_class") == "refused"
    status = {"bug": bug, "arm": arm, "artifact": Path(artifact_manifest).parent.name,
              "status": "refused" if refused else manifest.get("status", "ok"),
              "failure_class": manifest.get("failure_class", ""),
              "build_seconds": manifest.get("build_seconds", ""), "log_tail": manifest.get("log_tail", "")}
    runtime = read_json(runtime_json) if runtime_json and status["status"] == "ok" else {}
    reason = runtime.get("reason", "")
    if runtime.get("status") == "failed":
        status.update(status="refused" if reason.startswith(OVERRIDE_REFUSED) else "failed",
                      failure_class="override build" if reason.startswith(OVERRIDE_REFUSED) else "runtime",
                      log_tail=reason)
    elif runtime.get("override"):
        status["build_seconds"] = round(float(status["build_seconds"] or 0) + runtime["override"]["build_seconds"], 3)
    write_json(out, status)


def build_summary(statuses, out):
    rows = [read_json(p) for p in statuses]
    write_csv(out, rows, ("bug", "arm", "artifact", "status", "failure_class", "build_seconds",
                          "log_tail"))


def artifact_sources(config):
    """Where the artifact step gets wheels and fixes from: how it fetches, never what (the artifact
    is named by its id), so the rule gives these as an untracked param."""
    return {"wheel_cache": config["artifacts"]["wheel_cache"],
            "pip_index_url": config["artifacts"]["pip_index_url"],
            "fix_clone": config["artifacts"]["onefix"]["clone"] or config["resolve"].get("clone", ""),
            "fix_api": config["artifacts"]["onefix"]["api"], "api_url": config["mine"]["api_url"],
            "repo": config["repo"]}


def artifact(sources, spec, out, toolchain_json=None):
    """A manifest for a non-docker artifact (the docker builds have their own step); ``sources``
    is ``artifact_sources``, ``toolchain_json`` the docker runtime's toolchain record.

    An artifact that cannot be made (a release that does not exist for the runtime's Python, a fix
    that cannot be isolated on a release, a shipped file cut short) is a result: status failed, its
    class, the file it concerns and the reason (``failures.recorded``). The bug becomes incomplete
    and the rest of the study goes on."""
    started = time.time()
    try:
        manifest = source(spec["source"]).make(sources, spec, Path(out).parent, toolchain_json)
    except InputError:
        raise
    except Refused as exc:
        manifest = {"source": spec["source"], "status": "failed", "failure_class": "refused",
                    "error": str(exc), "log_tail": str(exc)}
    except ChecksumMismatch as exc:
        manifest = {"source": spec["source"], "status": "failed", "failure_class": "checksum",
                    "error": str(exc), "log_tail": str(exc)}
    except Exception as exc:  # noqa: BLE001 - the recorded-failure boundary: class, file, traceback
        fields = recorded(exc)
        manifest = {"source": spec["source"], "status": "failed", **fields,
                    "log_tail": fields.get("traceback", fields["error"])[-2000:]}
    if manifest["status"] == "failed":
        log.error("artifact %s failed (%s): %s", spec["source"], manifest["failure_class"], logged(manifest))
    manifest["build_seconds"] = round(time.time() - started, 3)
    write_manifest(out, manifest)
    return manifest


OVERRIDE_REFUSED = "override build refused"  # how a runtime's reason says its override could not be built
RUNTIME_SETTINGS = {"interpreter": None, "requirements": (), "toolchain_json": None,
                    "installer": "uv", "cache": "data/cache/uv", "sources": None, "model": None,
                    "kind_settings": None, "threads": None, "object_cache": None}


def runtime(kind, artifact_manifest, out, settings=None):
    """The runtime that trains on one artifact; one that cannot be made is a recorded failure.
    ``settings`` (defaults: ``RUNTIME_SETTINGS``): the interpreter, extra ``requirements``,
    the docker runtime's ``toolchain_json``, how a venv is made (``installer``,
    uv or pip, and uv's ``cache``), where the artifact's downloads are fetched again from when
    their cache lost them (``sources``: ``artifact_sources``), the study's ``model`` (its
    ``train.model`` and options: what the runtime must hold for it, ``models``) and the kind's own
    settings (``kind_settings``: ``runtime.<kind>``, kept in the record); ``threads``: the job's
    (a compiled fix's override is built with as many compilers at once, its objects kept in
    ``object_cache``)."""
    manifest = read_json(artifact_manifest)
    folder = Path(out).parent
    if manifest.get("status") == "failed":
        what = "build" if source(manifest["source"]).built else "artifact"
        result = {"kind": kind, "status": "failed",
                  "reason": f"{what} failed ({manifest.get('failure_class')}): {cause(manifest)}"}
    else:
        settings = {**RUNTIME_SETTINGS, **(settings or {})}
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
    runtimes.write_runtime(out, result)
    return result


def made_with(value):
    """The runtime rule's tracked ``requirements`` param as settings: the requirements list alone
    (as it was before the model's needs and kind settings existed), or all of them."""
    return value if isinstance(value, dict) else {"requirements": value}


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
    if record["route"] == "interposed":
        log.info("override built in %.0f s: %d exported functions interposed, %d changed by the fix",
                 record["build_seconds"], record["interposed"], len(record["changed_functions"]))
    else:
        log.info("override built in %.0f s: %d operators registered", record["build_seconds"],
                 len(record["registered"]))
    return record


def arms(bug, runtime_jsons, out, reach_json=None, gated="", checks=None):
    """Whether a bug's two arms can run, read from their runtimes once both are made: a refused or
    failed artifact, a runtime that could not be made, or a compiled fix's override whose check
    failed, is broken (``overrides.check.read``) or leaves out an operator reach says the workload
    runs through the changed code (``checks``: arm -> ``steps.override_check``'s file) stops the
    bug before any run is scheduled, with one short reason. Also what each arm is, for the
    verdict's scope (each check's outcome and figures among it), and the bug's reach verdict;
    ``gated``: the reach verdict that stopped it before its artifacts."""
    # what the verdict says, not when: the same verdict gives the same gate and statistics
    reach = {k: v for k, v in read_json(reach_json).items() if k != JUDGED_AT} if reach_json else None
    if gated:
        result = {"bug": bug, "runnable": False, "gated": gated, "reach": reach, "arms": {},
                  "reason": f"no artifacts, no runs: reach says {summary_line(reach)}"}
        write_json(out, result)
        log.info("%s: %s", bug, result["reason"])
        return result
    runtimes = {arm: read_json(path) for arm, path in runtime_jsons.items()}
    failed = {arm: r.get("reason", "runtime unavailable") for arm, r in runtimes.items()
              if r.get("status") == "failed"}
    checked = {}
    for arm, path in (checks or {}).items():
        try:
            checked[arm] = read_check(path)
        except InputError as exc:
            failed.setdefault(arm, f"override check broken: {exc}")
    for arm, c in checked.items():
        if c.get("outcome") == "failed" and arm not in failed:
            failed[arm] = f"override check failed: {c['reason']}"
        elif c.get("outcome") in ("verified", "not exercised") and arm not in failed:
            left_out = unreplaced(reach, runtimes[arm].get("override") or {})
            if left_out:
                failed[arm] = (f"override check failed: reach says the workload runs {left_out} through "
                               "the changed code, and the library does not replace it (its kernel is in a "
                               "file not rebuilt)")
    if len(failed) == len(runtimes) and len(set(failed.values())) == 1:
        reason = next(iter(failed.values()))  # both arms on one refused fix: said once
    else:
        reason = "; ".join(f"{arm}: {why}" for arm, why in failed.items())
    refused = [r for r in runtimes.values() if (r.get("artifact") or {}).get("failure_class") == "refused"]
    result = {"bug": bug, "runnable": not failed, "reach": reach,
              "reason": f"no runs: {reason}" if failed else "",
              # a fix a release cannot take: made again, refused again (`recovery`)
              "refused": bool(failed) and len(refused) == len(failed),
              "arms": {arm: describe(r.get("artifact") or {}) for arm, r in runtimes.items()},
              "override_checks": {arm: {k: c.get(k) for k in CHECK_FIGURES}
                                  for arm, c in checked.items() if c.get("outcome") in OUTCOMES}}
    write_json(out, result)
    log.info("%s: %s", bug, result["reason"] or "both arms ready")
    return result


# what the gate keeps of each arm's check: the outcome and the figures the report shows
CHECK_FIGURES = ("outcome", "passed", "reason", "route", "workload_calls", "canary_entries", "faithful_identical",
                 "arm_identical", "source")


def unreplaced(reach, override):
    """The operators reach found the workload dispatching through the changed code that the
    override library does not register, in words ("" when none, or no reach verdict). An
    interposed library registers none: it takes over every caller of the functions it rebuilds;
    an operator whose way to the changed code goes through a stub the library puts its kernel
    into (reach's chain, ``kernel <- stub <- ... <- op``) is replaced there."""
    if override.get("route") == "interposed":
        return ""
    ops = ((reach or {}).get("mapping") or {}).get("ops") or {}
    reached = {line.split()[1] for line in (reach or {}).get("reached", []) if line.startswith("operator ")}
    registered = {op_name(r["op"]) for r in override.get("registered", [])}
    stubs = {s["stub"] for s in override.get("stubs") or ()}
    left = sorted(op for op in ops if op in reached and op_name(op) not in registered
                  and not stubs & set(ops[op].split(" <- ")))
    return ", ".join(f"{op} ({ops[op]})" for op in left[:3]) + (" ..." if len(left) > 3 else "")
