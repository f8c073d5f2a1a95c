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
  bodies;
- where the run began in the dynamic loader's record of the release's own functions it bound,
  where the launcher asked for one (``loader``: the host reads what it called from there);
- the methods of Tensor and of the Storage classes called, by name, their binding's properties
  read (``grad``) and set (``grad=``), and the names looked up on one and missing
  (``BindingMethods``): a binding in their torch._C tables runs only when one is called or read,
  often through the interpreter's operator slots (``a // b``), which neither tracer sees.
None of them changes what is computed: the record keeps the run's fingerprints, and the tests
compare them with an untraced run of the same steps.
"""
import base64
import os
import sys
import threading
import time
import zlib

import torch

from . import TRACE_VERSION, loader


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


# Names the interpreter calls with expectations of their own (creating, looking up, subclassing):
# never wrapped. Every other method of a binding class and of its binding type is.
UNWRAPPED = frozenset(("__new__", "__init__", "__getattribute__", "__getattr__", "__setattr__",
                       "__delattr__", "__init_subclass__", "__subclasshook__", "__class_getitem__"))


def binding_classes():
    """(owner, class) for torch's Python classes built on a torch._C binding type: ``Tensor``,
    and the ``Storage`` classes (``torch.FloatStorage`` on ``torch._C.FloatStorageBase`` in 1.x,
    ``torch.UntypedStorage`` in 2.x, CUDA's beside them)."""
    found = [("Tensor", torch.Tensor)]
    for namespace in (torch, getattr(torch, "cuda", None)):
        for name, value in sorted(vars(namespace or object).items()):
            if isinstance(value, type) and name.endswith("Storage") and _binding_bases(value):
                found.append(("Storage", value))
    return found


def _binding_bases(klass):
    return tuple(b for b in klass.__bases__ if b.__module__ == "torch._C")


class WatchedProperty(property):
    """A binding type's property that records its reads and writes (``BindingMethods``): a
    subclass, since a plain property takes no attributes of the binding's own."""


class BindingMethods(object):
    """The methods of torch's binding classes (``binding_classes``) the workload called, by owner
    and name (``called``), and the names it looked up on one of their objects that were missing
    (``missing``: a fix that adds a method changes that lookup). While it is entered, each method
    of each class (its binding type's table entries and its own Python ones) is a wrapper that
    records its name and calls it, so every call through an object is seen, the operator slots'
    (``a // b``) included; a call on the binding type itself (``super(Tensor, self).split(...)``)
    is seen by a profile hook (``c_call``). Each property of the binding type (its getset table:
    ``t.grad``) is a Python property on the class that records ``grad`` when read and ``grad=``
    when set or deleted, and hands on to the binding's. On leaving, every class is as it was.

    It checks itself: on entering, a probe object of each owner must be seen through each of those
    ways, and on leaving the profile hook must still be its own; an owner it cannot vouch for is
    left out of ``record()`` and named in ``unrecorded()``, so its fixes stay unknown."""

    def __init__(self):
        self.classes = binding_classes()
        owners = sorted(set(owner for owner, _ in self.classes))
        self.called = dict((owner, set()) for owner in owners)
        self.properties = dict((owner, set()) for owner in owners)  # the ones watched
        self.missing = dict((owner, set()) for owner in owners)
        self.why_not = {}
        self._bases = [(owner, _binding_bases(klass)) for owner, klass in self.classes]
        self._undo = []
        self._probe = None  # while probing: {way: {owner: names}}, each way of seeing apart

    def record(self):
        return dict((owner, {"called": sorted(self.called[owner]), "missing": sorted(self.missing[owner]),
                             "properties": sorted(self.properties[owner])})
                    for owner in sorted(self.called) if owner not in self.why_not)

    def unrecorded(self):
        return dict(self.why_not)

    def _seen(self, way, owner, name):
        """``way``: ``wrapped`` (a call through an object), ``profiled`` (a call the profile hook
        saw) or ``missing`` (a lookup that found nothing)."""
        if self._probe is not None:
            self._probe.setdefault(way, {}).setdefault(owner, set()).add(name)
        else:
            (self.missing if way == "missing" else self.called)[owner].add(name)

    def _recording(self, owner, name, method):
        seen = self._seen

        def wrapper(*args, **kwargs):
            seen("wrapped", owner, name)
            return method(*args, **kwargs)
        wrapper.__name__ = name
        wrapper.__doc__ = getattr(method, "__doc__", None)
        return wrapper

    def _property(self, owner, name, descriptor):
        seen = self._seen

        def get(obj):
            seen("wrapped", owner, name)
            return descriptor.__get__(obj, type(obj))

        def put(obj, value):
            seen("wrapped", owner, name + "=")
            descriptor.__set__(obj, value)

        def delete(obj):
            seen("wrapped", owner, name + "=")
            descriptor.__delete__(obj)
        watched = WatchedProperty(get, put, delete, getattr(descriptor, "__doc__", None))
        # what is read of a binding's property elsewhere, as the binding's (torch 2.11's dynamo,
        # loading during the steps, checks which class a property of Tensor's comes from)
        watched.__objclass__, watched.__name__ = descriptor.__objclass__, descriptor.__name__
        return watched

    def _missing_hook(self, owner, before):
        seen = self._seen

        def __getattr__(obj, name):
            if before is not None:
                try:
                    return before(obj, name)
                except AttributeError:
                    seen("missing", owner, name)
                    raise
            seen("missing", owner, name)
            raise AttributeError("'%s' object has no attribute '%s'" % (type(obj).__name__, name))
        return __getattr__

    def _profile(self, frame, event, arg):
        if event != "c_call":
            return
        obj = getattr(arg, "__self__", None)
        for owner, bases in self._bases:
            if isinstance(obj, bases):
                self._seen("profiled", owner, getattr(arg, "__name__", "?"))

    def _put(self, klass, name, value):
        own = vars(klass)
        self._undo.append((klass, name, own[name]) if name in own else (klass, name, None))
        setattr(klass, name, value)

    def _check(self):
        """Each owner's probe must be seen each way apart: through a method (and for Tensor an
        operator slot and a property read and set), by the missing-name hook, and for Tensor by the
        profile hook (a call on its binding type)."""
        self._probe = {}
        try:
            tensor = torch.zeros(1)
            tensor.size()
            tensor + tensor
            tensor.requires_grad = tensor.requires_grad
            super(torch.Tensor, tensor).dim()
            hasattr(tensor, "_bugimpact_probe")
            storage = tensor.untyped_storage() if hasattr(tensor, "untyped_storage") else tensor.storage()
            storage.data_ptr()
            hasattr(storage, "_bugimpact_probe")
        finally:
            probe, self._probe = self._probe, None
        expected = {"Tensor": {"wrapped": ["__add__", "requires_grad", "requires_grad=", "size"], "profiled": ["dim"],
                               "missing": ["_bugimpact_probe"]},
                    "Storage": {"wrapped": ["data_ptr"], "missing": ["_bugimpact_probe"]}}
        for owner in self.called:
            lacking = ["%s (%s)" % (name, way) for way, names in sorted(expected.get(owner, {}).items())
                       for name in names if name not in probe.get(way, {}).get(owner, ())]
            if lacking or owner not in expected:
                self.why_not[owner] = "a probe went unseen: %s" % ", ".join(lacking or ["no probe"])

    def __enter__(self):
        for owner, klass in self.classes:
            methods, properties = {}, {}
            for holder in _binding_bases(klass) + (klass,):
                for name, value in vars(holder).items():
                    kind = type(value).__name__
                    if name not in UNWRAPPED and kind in ("method_descriptor", "function"):
                        methods[name] = value
                    # the binding's own (the class's Python properties shadow theirs, and run traced)
                    elif kind == "getset_descriptor" and holder is not klass and name not in vars(klass) \
                            and name not in ("__dict__", "__weakref__"):
                        properties[name] = value
            for name, method in sorted(methods.items()):
                self._put(klass, name, self._recording(owner, name, method))
            for name, descriptor in sorted(properties.items()):
                self._put(klass, name, self._property(owner, name, descriptor))
                self.properties[owner].add(name)
            self._put(klass, "__getattr__", self._missing_hook(owner, getattr(klass, "__getattr__", None)))
        threading.setprofile(self._profile)
        sys.setprofile(self._profile)
        self._check()
        return self

    def __exit__(self, *exc):
        if sys.getprofile() != self._profile:  # another profiler took over: calls went unseen
            for owner in self.called:
                self.why_not.setdefault(owner, "the profile hook was replaced during the run")
        sys.setprofile(None)
        threading.setprofile(None)
        for klass, name, value in reversed(self._undo):
            if value is None:
                delattr(klass, name)
            else:
                setattr(klass, name, value)
        self._undo = []


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
    # the methods recorder first: its probe (a tensor made and added) runs outside the profiler
    # and the line tracer, so what it dispatches is not taken for the workload's
    with BindingMethods() as methods, torch.autograd.profiler.profile() as prof:
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
            "methods": methods.record(), "methods_unrecorded": methods.unrecorded(),
            "sources": dict((rel(p), pack(text)) for p, text in sources.items()),
            "fingerprints": record["fingerprints"], "loader": loader.MARK, "wall_s": time.time() - started}
