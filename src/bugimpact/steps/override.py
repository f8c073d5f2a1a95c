"""Step 4, the check of a compiled fix's override library on the study's own workload, device and
threads: what makes an arm built on a release wheel sound, each part recorded and each refusing
the arm when it fails (the arms gate reads it).

Four short runs of the workload (``artifacts.onefix.check_steps`` steps, one seed) in the arm's
runtime:

- **the release**, with its operators profiled: which of the library's operators the workload
  calls at all;
- **the faithful build** (the release's own files, compiled the same way): every fingerprint
  (parameters, losses, logits) must be the release's, bit for bit, and every operator the workload
  calls must have been called through the library (a kernel under the wrong key never is);
- **the canary** (the faithful build, instrumented): the rebuilt code itself must have run (a
  library whose calls bind to the release's copies, without ``-Bsymbolic`` under global symbols,
  never does);
- **the arm**: its calls and whether it trained differently, for the record (a fix that is not
  triggered trains as the release does).

A workload that calls none of the library's operators cannot be changed by it: nothing to check
but the faithful build, and the arm is the release for this workload.
"""
import logging
import tempfile
from pathlib import Path

from ..artifacts.launch import launch_once
from ..io import read_json, write_json
from ..train import RunTarget, _tail, short_spec

log = logging.getLogger("bugimpact")
FINGERPRINTS = ("init", "epochs", "losses", "logits", "predictions")


def check(train_cfg, steps, runtime_json, data, key, artifact, out, log_path):
    """Write the check of the artifact's override under the experiment ``key``."""
    runtime = read_json(runtime_json)
    if runtime.get("status") == "failed":
        write_json(out, {"artifact": artifact, "passed": None, "reason": "runtime failed"})
        return
    override = runtime.get("override")
    if not override:
        write_json(out, {"artifact": artifact, "passed": True, "override": False})
        return
    runs = {}
    with tempfile.TemporaryDirectory(prefix="bugimpact-check-") as tmp:
        for build in ("release", "faithful", "canary", "arm"):
            library = None if build == "release" else override["libraries"][build]["library"]
            runs[build] = _run(train_cfg, steps, runtime, data, key, artifact, library,
                               build == "release", Path(tmp) / f"{build}.json", log_path)
    result = judge(runs, [r["op"] for r in override["registered"]])
    result.update(artifact=artifact, key=key, steps=steps, libraries=override["libraries"])
    write_json(out, result)
    log.info("override check of %s: %s", artifact, "passed" if result["passed"] else result["reason"])


def judge(runs, registered):
    """The check's verdict from the four runs' records (``runs``: build -> record or a failure's
    words) and the library's registered operators."""
    failed = {build: why for build, why in runs.items() if isinstance(why, str)}
    if failed:
        return {"passed": False, "reason": "; ".join(f"the {b} run failed: {why}" for b, why in failed.items())}
    called = set(runs["release"].get("ops", {}))
    expected = sorted(op for op in registered if op.split(".")[0] in called)
    prints = {b: {k: runs[b]["fingerprints"][k] for k in FINGERPRINTS} for b in runs}
    faithful = prints["faithful"] == prints["release"]
    calls = {b: runs[b]["override"]["calls"] for b in ("faithful", "arm")}
    never = [op for op in expected if not calls["faithful"].get(op)]
    entries = runs["canary"]["override"].get("entries", 0)
    problems = []
    if not faithful:
        first = next(k for k in FINGERPRINTS if prints["faithful"][k] != prints["release"][k])
        problems.append(f"the faithful build (the release's own files) trains differently from the "
                        f"release (its {first} differ): not built as the release was")
    if never:
        problems.append(f"the workload calls {', '.join(never)}, but never through the library: "
                        "registered under a key the release does not call")
    if expected and not entries:
        problems.append("the canary (the rebuilt code, instrumented) never ran: the library's calls "
                        "went to the release's own copies")
    return {"passed": not problems, "reason": "; ".join(problems), "workload_calls": expected,
            "faithful_identical": faithful, "faithful_calls": calls["faithful"],
            "canary_entries": entries, "arm_calls": calls["arm"],
            "arm_identical": prints["arm"] == prints["release"]}


def _run(train_cfg, steps, runtime, data, key, artifact, library, profile, out, log_path):
    """One short run in the runtime: its record, or why it failed."""
    spec = short_spec(train_cfg, RunTarget("__check__", "check", {"artifact": artifact}, 0, key), data[0],
                      read_json(data[1])["sha256"], max_steps=steps, epochs=1,
                      **({"override": library} if library else {}), **({"profile_ops": True} if profile else {}))
    with open(log_path, "a") as handle:
        handle.write(f"== {out.stem}: {library or 'the release'}\n")
        handle.flush()
        code = launch_once(runtime, spec, out, handle, train_cfg)
    if code != 0 or not out.exists():
        return f"exit {code}: {_tail(log_path, 400).strip().splitlines()[-1:]}"
    return read_json(out)
