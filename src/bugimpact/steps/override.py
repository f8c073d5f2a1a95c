"""Step 4, the check of a compiled fix's override library on the study's own workload, device and
threads (``overrides.check`` says what makes it sound, and its outcome): four short runs of the
workload (``artifacts.onefix.check_steps`` steps, one seed) in the arm's runtime, the release with
its operators profiled, the faithful build, the canary and the arm, each recorded, and the
release's own flags read again from its torch. The arms gate reads the outcome."""
import logging
import subprocess
import tempfile
from pathlib import Path

from ..artifacts.launch import launch_once
from ..failures import cause_line
from ..harness.registry import sealed
from ..io import read_json, write_json
from ..overrides.check import BUILDS, judge
from ..overrides.release_build import BuildRefused, release_flags, release_settings
from ..train import RunTarget, _tail, override_spec, short_spec
from .runtime import whole

log = logging.getLogger("bugimpact")


def check(train_cfg, steps, runtime_json, data, key, artifact, out, log_path):
    """Write the check of the artifact's override under the experiment ``key``, in its runtime made
    whole first (``runtime.whole``); the record is sealed, and names the runtime and the libraries
    it checked (``overrides.check.read`` holds a record to them)."""
    try:
        runtime = whole(runtime_json)
    except RuntimeError as exc:
        runtime = {"status": "failed", "reason": str(exc)}
    if runtime.get("status") == "failed":
        write_json(out, sealed({"artifact": artifact, "outcome": "runtime failed", "passed": None,
                                "runtime": str(runtime_json), "reason": runtime.get("reason", "runtime failed")}))
        return
    override = runtime.get("override")
    if not override:
        write_json(out, sealed({"artifact": artifact, "passed": True, "override": False,
                                "runtime": str(runtime_json)}))
        return
    runs = {}
    with tempfile.TemporaryDirectory(prefix="bugimpact-check-") as tmp:
        for build in BUILDS:
            runs[build] = _run(train_cfg, steps, runtime, data, key, artifact, override_spec(override, build),
                               build == "release", Path(tmp) / f"{build}.json", log_path)
    if isinstance(runs["canary"], dict):  # read by name: an interposed library's, or stub kernels
        functions = runs["canary"]["override"].get("functions") or {}
        runs["canary"]["override"]["functions"] = named(override["libraries"]["canary"]["library"], functions)
    try:
        flags = release_flags(release_settings(runtime["python"]))
    except BuildRefused as exc:
        runs["release"] = f"its torch cannot say how it was built: {exc}"
        flags = []
    result = judge(runs, override, flags)
    result.update(artifact=artifact, key=key, steps=steps, libraries=override["libraries"],
                  source=_source_line(runtime), runtime=str(runtime_json))
    write_json(out, sealed(result))
    log.info("override check of %s: %s%s", artifact, result["outcome"],
             f" ({result['reason']})" if result["reason"] else "")


def _source_line(runtime):
    """Where the rebuilt files came from, in one line (the report's check section shows it)."""
    source = ((runtime.get("artifact") or {}).get("kernels") or {}).get("source") or {}
    return source.get("origin", "")


def named(library, entered):
    """The canary's entries per function (offset in ``library``, hex -> entries), by the function's
    mangled name, read from the library's symbol table (its local functions too)."""
    listing = subprocess.run(["nm", "--defined-only", library], capture_output=True, text=True, check=True)
    at = {}
    for fields in (line.split() for line in listing.stdout.splitlines()):
        if len(fields) == 3 and fields[1] in "TtWw":
            at.setdefault(int(fields[0], 16), fields[2])
    out = {}
    for offset, calls in entered.items():
        name = at.get(int(offset, 16), f"0x{offset}")
        out[name] = out.get(name, 0) + calls
    return out


def _run(train_cfg, steps, runtime, data, key, artifact, library, profile, out, log_path):
    """One short run in the runtime: its record, or why it failed. ``library``: the spec's override
    fields (``train.override_spec``), empty for the release."""
    spec = short_spec(train_cfg, RunTarget("__check__", "check", {"artifact": artifact}, 0, key), data[0],
                      read_json(data[1])["sha256"], max_steps=steps, epochs=1, record_divergence=True,
                      **library, **({"profile_ops": True} if profile else {}))
    with open(log_path, "a") as handle:
        handle.write(f"== {out.stem}: {library.get('override') or 'the release'}\n")
        handle.flush()
        code = launch_once(runtime, spec, out, handle, train_cfg)
    if code != 0 or not out.exists():
        own = _tail(log_path, 8000).rpartition("\n== ")[2]  # the log holds each run after its "== build" line
        return f"exit {code}: {cause_line(own)}"
    return read_json(out)
