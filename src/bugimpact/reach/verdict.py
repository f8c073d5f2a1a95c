"""The verdict of one fix for one workload: the static mapping read against the workload's trace.

- ``reached``: a changed Python line ran (or a changed import-time line of a module that was
  loaded), a table of torch._C's bindings changed (read when torch loads), a Tensor or Storage
  method whose binding changed was called (or looked up, missing), or an affected operator was dispatched (its
  backward runs when it is in the autograd graph: a changed derivative counts when its forward
  operator ran);
- ``not reached``: nothing changed ran, on a complete mapping (a file compiled only under a build
  setting the traced torch was built without never runs: ``built_with``);
- ``not reached on cpu``: what could run is CUDA-only and the workload ran on the CPU;
- ``unknown``: the mapping could not bound part of the change (the reasons say which).
``reached`` is necessary, not sufficient, for an effect: the fingerprints after training stay the
proof that bits changed.
"""
import re

from ..framework.cpp import PARALLEL_BACKENDS
from ..framework.paths import why_unbounded
from .loader import ran_on_the_way, short_names
from .python_files import PythonFile, Uses, python_reach, unpack

# ``t //= x`` runs ``__floordiv__`` where the type has no ``__ifloordiv__``: a fix adding an
# in-place operator changes what that call runs
IN_PLACE = re.compile(r"^__i(add|sub|mul|matmul|truediv|floordiv|div|mod|pow|lshift|rshift|and|xor|or)__$")

# a build setting torch.backends says directly (``harness.trace.build_config``)
BACKEND_SETTINGS = {"AT_MKL_ENABLED": "mkl", "AT_MKLDNN_ENABLED": "mkldnn"}


def built_with(setting, build):
    """Whether the traced torch's ``build`` has a setting a file is compiled under
    (``framework.cpp.BUILD_GUARD``); None where its trace does not say."""
    if setting in BACKEND_SETTINGS:
        return build.get(BACKEND_SETTINGS[setting])
    return setting in PARALLEL_BACKENDS.get(build["parallel"], ()) if "parallel" in build else None


def entered(trace, package):
    """Whether any function of a torch Python package ran in the trace (not only its import)."""
    return any(PythonFile(unpack(trace["sources"][path])).entered(ran)
               for path, ran in trace["lines"].items()
               if path.startswith(package) and path in trace["sources"])


def method_used(name, seen):
    """Whether one binding class's methods in a trace (``harness.trace.BindingMethods``) call or
    look up ``name``, or the binary operator an in-place one falls back to."""
    fallback = IN_PLACE.match(name)
    return (name in seen["called"] or name in seen["missing"]
            or bool(fallback and f"__{fallback.group(1)}__" in seen["called"]))


def judge(mapping, trace):
    """The verdict dict of one fix (a ``claims.Mapping``) against one trace. An operator ran where
    the profile names it, or where the trace's record of the release's own C++ calls names a
    function on its way (the profiles of torch 1.x record an operator where autograd dispatches
    it: one another operator's kernel calls below autograd is never in them); where a trace has
    no such record, an operator a traced operator's kernel can call may have run (``carriers``):
    unknown, never not reached."""
    device = trace.get("device", "cpu")
    traced_ops = set(trace["ops"])
    called = trace.get("cpp_called")
    ran = short_names(called) if called is not None else None
    reached, unknown, notes = [], list(mapping.unknown), []
    for op, why in sorted(mapping.ops.items()):
        below = ran_on_the_way(op, why, ran) if ran is not None and op not in traced_ops else None
        carried = sorted(set(mapping.carriers.get(op, ())) & traced_ops) if ran is None else []
        if op in traced_ops:
            reached.append(f"operator {op} ({why})")
        elif below:
            reached.append(f"operator {op} ({why}): the release's C++ called {below}, below the profile")
        elif carried:
            unknown.append(f"operator {op} ({why}): not in the profile, but the kernels of {', '.join(carried[:3])}, "
                           "which ran, can call it below autograd, and this trace has no record of the release's "
                           "C++ calls to tell")
    for op, why in sorted(mapping.backward_ops.items()):
        if op in traced_ops or (ran is not None and ran_on_the_way(op, why, ran)):
            reached.append(f"backward of {op} ({why})")
    reached += [f"{table}: a binding table torch._C reads when it loads" for table in mapping.at_import]
    for method, why, watched in sorted([*((m, w, False) for m, w in mapping.methods.items()),
                                        *((p, w, True) for p, w in mapping.properties.items())]):
        owner, name = method.split(".", 1)
        seen = (trace.get("methods") or {}).get(owner)
        if seen is None:
            why_not = (trace.get("methods_unrecorded") or {}).get(owner, "made before it could: trace again")
            unknown.append(f"{method} ({why}): this trace does not record the {owner} methods called "
                           f"({why_not})")
        elif watched and name.rstrip("=") not in seen.get("properties", ()):
            unknown.append(f"{method} ({why}): this trace does not watch the {owner} property "
                           f"{name.rstrip('=')} (made before properties were: trace again; or the "
                           f"class's own Python property shadows the binding's)")
        elif method_used(name, seen):
            reached.append(f"{method} called ({why})")
        else:
            notes.append(f"{method} never called nor looked up ({why})")
    if device == "cuda":
        unknown += mapping.cuda_unknown
    if device == "cuda" and mapping.cuda and not mapping.cuda_ops and not mapping.cuda_unknown:
        unknown.append(f"CUDA sources changed ({', '.join(mapping.cuda[:3])}) and no operator "
                       f"table mapped them: on cuda that cannot be bounded")
    if device == "cuda":
        for op, why in sorted(mapping.cuda_ops.items()):
            if op in traced_ops:
                reached.append(f"operator {op} on cuda ({why})")
    uses = None
    if mapping.python:  # one index per trace, kept with it (judging many fixes reuses it)
        uses = trace.get("_uses") or trace.setdefault("_uses", Uses(trace))
    for path, hunks in mapping.python:
        hits, cannot, note = python_reach(path, hunks, trace, uses, mapping.scopes.get(path))
        reached += hits
        unknown += cannot
        if note:
            notes.append(note)
    for path, package in mapping.entered:
        if entered(trace, package):
            unknown.append(f"{path}: C++ entered through {package}, whose functions ran: not "
                           f"bounded further")
        else:
            notes.append(f"{path}: entered only through {package}, none of whose functions ran")
    build = trace.get("build") or {}
    for path, setting in mapping.compiled_under:
        has = built_with(setting, build)
        if has is False:
            notes.append(f"{path}: its changes are compiled only under {setting}, which torch "
                         f"{trace.get('torch_version')} is built without ({_build_words(build)})")
        else:
            unknown.append(f"{path}: its changes are compiled under {setting}, which this torch "
                           f"{'has' if has else 'does not say whether it has'}: "
                           f"{why_unbounded(path)}")
    runs_anything = bool(mapping.ops or mapping.backward_ops or mapping.python or mapping.at_import or
                         mapping.methods or mapping.properties or
                         (mapping.cuda_ops and device == "cuda"))
    if reached:
        verdict = "reached"
    elif unknown:
        verdict = "unknown"
    elif mapping.cuda and device != "cuda" and not runs_anything:
        verdict = "not reached on cpu"
    else:
        verdict = "not reached"
    return {"verdict": verdict, "reached": reached, "unknown": unknown,
            "not_reached": _not_reached(mapping, traced_ops, ran, notes, device),
            "torch_version": trace.get("torch_version"), "device": device,
            "tables": mapping.tables}


def _not_reached(mapping, traced_ops, ran, notes, device):
    ways = {**mapping.backward_ops, **mapping.ops}
    below = "" if ran is None else ", and the release's C++ called no function on its way"
    out = [f"operator {op} not dispatched{below}" for op in sorted(ways)
           if op not in traced_ops and not (ran is not None and ran_on_the_way(op, ways[op], ran))]
    if mapping.cuda and device != "cuda":
        out.append(f"CUDA-only: {', '.join(mapping.cuda[:4])}{' ...' if len(mapping.cuda) > 4 else ''}")
    if mapping.frontend:
        out.append(f"C++ frontend, never called from Python: {_files(mapping.frontend)}")
    if mapping.not_shipped:
        out.append(f"not shipped (tests, docs, mobile): {_files(mapping.not_shipped)}")
    return out + notes


def _build_words(build):
    return ", ".join(f"{k}: {v}" for k, v in sorted(build.items())) or "its trace does not say"


def _files(paths):
    return f"{len(paths)} file{'s' if len(paths) != 1 else ''}"
