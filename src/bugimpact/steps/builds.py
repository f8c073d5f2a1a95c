"""Step 4: each arm's framework artifact (a docker build, a release wheel, a one-fix overlay)
and the runtime it trains in; the arms gate that says whether a bug can run."""
import logging
import time
from pathlib import Path

from .. import models
from ..artifacts import runtimes
from ..artifacts.kernels import BuildRefused, build
from ..artifacts.kinds import kind as runtime_kind
from ..artifacts.onefix import Refused, describe
from ..artifacts.source_kinds import Lost, source
from ..artifacts.sources import ChecksumMismatch, write_manifest
from ..io import InputError, read_json, write_csv, write_json
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


def build_status(bug, arm, artifact_manifest, out, reach_json=None):
    if artifact_manifest is None:  # stopped by reach before any artifact was asked for
        write_json(out, {"bug": bug, "arm": arm, "artifact": "", "status": "skipped",
                         "failure_class": "", "build_seconds": 0,
                         "log_tail": summary_line(read_json(reach_json))})
        return
    manifest = read_json(artifact_manifest)
    status = {"bug": bug, "arm": arm, "artifact": Path(artifact_manifest).parent.name,
              "status": manifest.get("status", "ok"), "failure_class": manifest.get("failure_class", ""),
              "build_seconds": manifest.get("build_seconds", ""), "log_tail": manifest.get("log_tail", "")}
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
    that cannot be isolated on a release) is a result: status failed, its class and the reason. The
    bug becomes incomplete and the rest of the study goes on."""
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
    except Exception as exc:  # noqa: BLE001 - recorded, with its message, as the artifact's failure
        manifest = {"source": spec["source"], "status": "failed", "failure_class": "download",
                    "error": str(exc), "log_tail": str(exc)[-2000:]}
    if manifest["status"] == "failed":
        log.error("artifact %s failed (%s): %s", spec["source"], manifest["failure_class"],
                  manifest["error"])
    manifest["build_seconds"] = round(time.time() - started, 3)
    write_manifest(out, manifest)
    return manifest


RUNTIME_SETTINGS = {"interpreter": None, "requirements": (), "toolchain_json": None,
                    "installer": "uv", "cache": "data/cache/uv", "sources": None, "model": None,
                    "kind_settings": None}


def runtime(kind, artifact_manifest, out, settings=None):
    """The runtime that trains on one artifact; one that cannot be made is a recorded failure.
    ``settings`` (defaults: ``RUNTIME_SETTINGS``): the interpreter, extra ``requirements``,
    the docker runtime's ``toolchain_json``, how a venv is made (``installer``,
    uv or pip, and uv's ``cache``), where the artifact's downloads are fetched again from when
    their cache lost them (``sources``: ``artifact_sources``), the study's ``model`` (its
    ``train.model`` and options: what the runtime must hold for it, ``models``) and the kind's own
    settings (``kind_settings``: ``runtime.<kind>``, kept in the record)."""
    manifest = read_json(artifact_manifest)
    folder = Path(out).parent
    if manifest.get("status") == "failed":
        what = "build" if source(manifest["source"]).built else "artifact"
        result = {"kind": kind, "status": "failed",
                  "reason": f"{what} failed ({manifest.get('failure_class')}): {manifest.get('error')}"}
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
                result["override"] = _override(manifest["kernels"], result["python"], folder)
        except InputError:
            raise
        except BuildRefused as exc:
            log.error("runtime %s: %s", kind, exc)
            result = {"kind": kind, "status": "failed", "reason": f"override build refused: {exc}"}
        except models.Refused as exc:
            log.error("runtime %s: %s", kind, exc)
            result = {"kind": kind, "status": "failed", "reason": f"model refused: {exc}"}
        except Lost as exc:
            log.error("runtime %s: %s", kind, exc)
            result = {"kind": kind, "status": "failed",
                      "reason": f"artifact stale: {exc}; `bugimpact retry-failed` removes it, and "
                                "the next run makes it again"}
        except Exception as exc:  # noqa: BLE001 - recorded: the bug becomes incomplete, not the study
            log.error("runtime %s failed: %s", kind, exc)
            result = {"kind": kind, "status": "failed", "reason": f"runtime failed: {exc}"}
    result["artifact"] = manifest
    runtimes.write_runtime(out, result)
    return result


def made_with(value):
    """The runtime rule's tracked ``requirements`` param as settings: the requirements list alone
    (as it was before the model's needs and kind settings existed), or all of them."""
    return value if isinstance(value, dict) else {"requirements": value}


def _override(kernels, python, folder):
    """The override libraries of a compiled fix's arm (``artifacts.kernels.build``), built in the
    runtime's folder with its own torch; the build's commands and output go to ``override.log``."""
    started = time.time()
    with open(Path(folder) / "override.log", "w") as handle:
        record = build(kernels, python, Path(folder) / "override", handle)
    record["build_seconds"] = round(time.time() - started, 1)
    log.info("override built in %.0f s: %d operators registered", record["build_seconds"],
             len(record["registered"]))
    return record


def arms(bug, runtime_jsons, out, reach_json=None, gated="", checks=None):
    """Whether a bug's two arms can run, read from their runtimes once both are made: a refused or
    failed artifact, a runtime that could not be made, or a compiled fix's override whose check
    failed (``checks``: arm -> ``steps.override_check``'s file) stops the bug before any run is
    scheduled, with one short reason. Also what each arm is, for the verdict's scope, and the
    bug's reach verdict; ``gated``: the reach verdict that stopped it before its artifacts."""
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
    checked = {arm: read_json(path) for arm, path in (checks or {}).items()}
    failed.update({arm: f"override check failed: {c['reason']}" for arm, c in checked.items()
                   if c.get("passed") is False and arm not in failed})
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
              "override_checks": {arm: {k: c.get(k) for k in ("passed", "workload_calls", "canary_entries",
                                                             "faithful_identical", "arm_identical")}
                                  for arm, c in checked.items() if c.get("passed") is not None
                                  and c.get("override") is not False}}
    write_json(out, result)
    log.info("%s: %s", bug, result["reason"] or "both arms ready")
    return result
