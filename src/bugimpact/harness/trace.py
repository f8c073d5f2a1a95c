"""A reach trace: what a few training steps of the study's workload execute in the framework.

Runs inside the runtime under study (standard library, numpy and torch only; Python 3.6 syntax).
It trains the study's own model on its own data, optimizer and batch sizes for ``trace.steps`` steps,
evaluates one test batch, and records:
- the operators dispatched, forward and backward (the autograd profiler, present since torch 1.0;
  1.x names them ``conv2d``, 2.x ``aten::conv2d``: both are kept as the base name);
- how this torch was built, where it says (``build``: its parallel backend, and whether MKL and
  MKL-DNN are in it): code its configuration compiles out cannot run;
- the lines of the framework's own Python files that ran (``sys.settrace``, limited to the torch
  package), and the source of every torch module loaded, so the host can place a fix's hunks in the
  very files that ran, and tell import-time lines (run before the trace started) from function
  bodies.
Neither the profiler nor the line tracer changes what is computed: the record keeps the run's
fingerprints, and the tests compare them with an untraced run of the same steps.
"""
import base64
import os
import sys
import threading
import time
import zlib

import torch

TRACE_VERSION = 1


def build_config():
    """What this torch was built with, as ``torch.__config__`` and ``torch.backends`` say where
    they exist (1.3 and later say the parallel backend): a field it cannot tell is left out."""
    out = {}
    config = getattr(torch, "__config__", None)
    info = config.parallel_info() if hasattr(config, "parallel_info") else ""
    for line in info.splitlines():
        if line.startswith("ATen parallel backend:"):
            out["parallel"] = line.split(":", 1)[1].strip()
    for name in ("mkl", "mkldnn"):
        backend = getattr(torch.backends, name, None)
        if hasattr(backend, "is_available"):
            out[name] = bool(backend.is_available())
    return out


def _package_dir():
    return os.path.dirname(os.path.abspath(torch.__file__))


class LineTracer(object):
    """Lines executed in files under one folder; other code is not traced line by line."""

    def __init__(self, folder):
        self.folder = folder + os.sep
        self.lines = {}
        self._wanted = {}

    def _global(self, frame, event, arg):
        filename = frame.f_code.co_filename
        wanted = self._wanted.get(filename)
        if wanted is None:
            wanted = self._wanted[filename] = os.path.abspath(filename).startswith(self.folder)
        if not wanted:
            return None
        hits = self.lines.setdefault(filename, set())
        hits.add(frame.f_lineno)

        def local(frame, event, arg):
            if event == "line":
                hits.add(frame.f_lineno)
            return local
        return local

    def __enter__(self):
        threading.settrace(self._global)
        sys.settrace(self._global)
        return self

    def __exit__(self, *exc):
        sys.settrace(None)
        threading.settrace(None)


def op_base(name):
    """``aten::add.Tensor`` -> ``add``; other namespaces are kept (``quantized::add``)."""
    if name.startswith("aten::"):
        name = name[len("aten::"):]
    return name.split(".", 1)[0]


def dispatched(prof):
    """The operators a profiled run dispatched, by base name, and how often."""
    ops = {}
    for event in prof.function_events:
        base = op_base(event.name)
        ops[base] = ops.get(base, 0) + 1
    return ops


def _loaded_sources(folder):
    out = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not path or not path.endswith(".py"):
            continue
        path = os.path.abspath(path)
        if path.startswith(folder + os.sep):
            try:
                with open(path) as handle:
                    out[path] = handle.read()
            except (IOError, OSError, UnicodeDecodeError):
                continue
    return out


def pack(text):
    """A source file as zlib + base64: a 2.x trace holds 20 MB of Python otherwise."""
    return base64.b64encode(zlib.compress(text.encode("utf-8"), 6)).decode("ascii")


def traced(spec, train):
    """Run ``train`` on a shortened copy of ``spec`` under the profiler and the line tracer."""
    started = time.time()
    steps = int(spec["trace"].get("steps", 3))
    short = dict(spec, epochs=1, max_steps=steps)
    folder = _package_dir()
    root = os.path.dirname(folder)
    with torch.autograd.profiler.profile() as prof:
        with LineTracer(folder) as lines:
            record = train(short)
    ops = dispatched(prof)
    sources = _loaded_sources(folder)

    def rel(path):
        return os.path.relpath(os.path.abspath(path), root).replace(os.sep, "/")

    return {"kind": "reach-trace", "trace_version": TRACE_VERSION, "status": "ok",
            "torch_version": torch.__version__, "device": spec.get("device", "cpu"),
            "steps": steps, "spec": spec, "ops": ops, "build": build_config(),
            "lines": dict((rel(p), sorted(n)) for p, n in lines.lines.items()),
            "sources": dict((rel(p), pack(text)) for p, text in sources.items()),
            "fingerprints": record["fingerprints"], "wall_s": time.time() - started}
