"""Step 3, a reach trace: a few steps of the study's workload on a release, recording what they
run (``harness.trace``) and the release's own C++ functions they called (``reach.loader``); each
fix is judged against it by ``reach.run``."""
from pathlib import Path

from ..artifacts.launch import launch_once
from ..io import read_json, write_json
from ..reach.loader import recording_calls
from ..reach.run import trace_spec
from ..train import _tail
from .runtime import whole


def trace(train_cfg, steps, runtime_json, data, key, artifact, out, log_path):
    """One reach trace of the study's workload in a runtime (made whole first: ``runtime.whole``);
    a trace that cannot run is recorded (the bugs it serves become ``unknown``, never ``not
    reached``). ``data``: the prepared challenge's .npz and its metadata JSON."""
    data_npz, data_meta = data
    spec = trace_spec(train_cfg, steps, data_npz, read_json(data_meta)["sha256"], artifact, key)
    try:
        runtime = whole(runtime_json)
    except RuntimeError as exc:
        write_json(out, {"status": "failed", "reason": f"runtime: {exc}"})
        return
    if runtime.get("status") == "failed":
        write_json(out, {"status": "failed", "reason": f"runtime: {runtime.get('reason', '?')}"})
        return
    with open(log_path, "a") as handle:
        code = recording_calls(lambda asked: launch_once(runtime, asked, out, handle, train_cfg), spec, out)
    if code != 0 or not Path(out).exists():
        write_json(out, {"status": "failed", "reason": f"trace exit {code}: {_tail(log_path, 600)}"})
