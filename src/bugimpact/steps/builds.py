"""Step 4: each arm's framework artifact (a docker build, a release wheel, a one-fix overlay),
its build's status, and the arms gate that says whether a bug can run (the runtime each arm
trains in: ``steps.runtime``)."""
import logging
import time
from pathlib import Path

from ..artifacts.onefix import Refused, describe
from ..artifacts.source_kinds import source
from ..artifacts.sources import ChecksumMismatch, write_manifest
from ..failures import logged, recorded
from ..io import InputError, read_json, write_csv, write_json
from ..overrides.check import OUTCOMES
from ..overrides.check import read as read_check
from ..overrides.gate import unreplaced
from ..reach.run import JUDGED_AT, summary_line
from .runtime import OVERRIDE_REFUSED

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
            checked[arm] = read_check(path, runtimes[arm])
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
    apart = _releases_apart(runtimes)
    if apart and not failed:
        failed = {arm: apart for arm in runtimes}
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


def _releases_apart(runtimes):
    """Why a one-fix bug's arms are not one fix isolated, or "": each arm walks to the release
    nearest the fix that takes it (``artifacts.other_side``), and both must end on the same one,
    or the arms differ by everything between two releases."""
    made = {arm: (r.get("artifact") or {}) for arm, r in runtimes.items()}
    versions = {arm: (m.get("release") or {}).get("version") for arm, m in made.items() if m.get("source") == "onefix"}
    if len(versions) < 2 or len(set(versions.values())) == 1:
        return ""
    return ("its arms ended on different releases (" + ", ".join(f"{arm}: torch {v}" for arm, v in sorted(versions.items()))
            + "): not one fix isolated")


# what the gate keeps of each arm's check: the outcome and the figures the report shows
CHECK_FIGURES = ("outcome", "passed", "reason", "route", "workload_calls", "changed_calls", "changed_functions",
                 "canary_entries", "faithful_identical", "arm_identical", "diverged", "source")
