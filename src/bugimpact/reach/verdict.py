"""The verdict of one fix for one workload: the static mapping read against the workload's trace.

- ``reached``: a changed Python line ran (or a changed import-time line of a module that was
  loaded), a table of torch._C's bindings changed (read when torch loads), a Tensor or Storage
  method whose binding changed was called (or looked up, missing), or an affected operator was dispatched (its
  backward runs when it is in the autograd graph: a changed derivative counts when its forward
  operator ran);
- ``not reached``: nothing changed ran, on a complete mapping (a file compiled only under a build
  setting the traced torch was built without never runs: ``claims.CompiledUnder``);
- ``not reached on cpu``: what could run is CUDA-only and the workload ran on the CPU;
- ``unknown``: the mapping could not bound part of the change (the reasons say which).
``reached`` is necessary, not sufficient, for an effect: the fingerprints after training stay the
proof that bits changed.
"""
import functools
from dataclasses import dataclass, field

from .loader import ran_on_the_way, short_names
from .python_files import Uses


@dataclass
class Answer:
    """What one trace says of claims: reached (any one makes the verdict ``reached``), what
    cannot be told (``unknown``, where nothing is reached), and what did not run."""
    reached: list = field(default_factory=list)
    unknown: list = field(default_factory=list)
    not_reached: list = field(default_factory=list)

    def __iadd__(self, other):
        self.reached += other.reached
        self.unknown += other.unknown
        self.not_reached += other.not_reached
        return self


class Seen:
    """One trace, as claims read it: its device, the operators its profile names (``ops``), the
    release's C++ functions it called (``ran``: short names; None where it has no record of
    them), its build and an index of its Python uses, made once and kept with the trace."""

    def __init__(self, trace):
        self.trace = trace
        self.device = trace.get("device", "cpu")
        self.ops = set(trace["ops"])
        called = trace.get("cpp_called")
        self.ran = short_names(called) if called is not None else None
        self.build = trace.get("build") or {}

    @functools.cached_property
    def uses(self):  # kept with the trace: judging many fixes against it reuses it
        return self.trace.get("_uses") or self.trace.setdefault("_uses", Uses(self.trace))

    def below(self, op, way):
        """The function on ``way`` the release's C++ called, where the profile does not name ``op``."""
        return ran_on_the_way(op, way, self.ran) if self.ran is not None and op not in self.ops else None


def judge(mapping, trace):
    """The verdict dict of one fix (a ``claims.Mapping``) against one trace: each kind of claim
    answers for its own (``Claim.answer``), in the order the kinds were first claimed."""
    seen, answer = Seen(trace), Answer()
    kinds = list(dict.fromkeys(type(c) for c in mapping.claims.values()))
    for kind in kinds:
        answer += kind.answer(mapping.of(kind), seen, mapping)
    held = {c.held_to for c in mapping.claims.values() if c.held_to and not c.runs}
    runs_here = any(c.runs and c.held_to in (None, seen.device) for c in mapping.claims.values())
    if answer.reached:
        verdict = "reached"
    elif answer.unknown:
        verdict = "unknown"
    elif held and seen.device not in held and not runs_here:
        verdict = f"not reached on {seen.device}"
    else:
        verdict = "not reached"
    return {"verdict": verdict, "reached": answer.reached, "unknown": answer.unknown,
            "not_reached": answer.not_reached, "torch_version": trace.get("torch_version"),
            "device": seen.device, "tables": mapping.tables}
