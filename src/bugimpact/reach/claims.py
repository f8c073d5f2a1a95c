"""What reach claims a fix can affect, each claim typed and answering for itself against a trace.

A rule of ``rules`` reads one file of a diff and adds claims to a ``Mapping``; ``verdict.judge``
asks every claim of it what a trace says (``answer``: what was reached, what cannot be told, what
did not run) and makes the verdict of them, branching on no kind. A new kind of claim is one class
here: what it claims, how it is listed in ``reach.json`` (``listed``), how it answers."""
import re
from dataclasses import dataclass, field

from ..framework.cpp import PARALLEL_BACKENDS
from ..framework.paths import why_unbounded
from .python_files import PythonFile, python_reach, unpack
from .verdict import Answer


class Way(str):
    """How a change reaches an operator: in words (the string itself), and as the functions on the
    way, from the changed one to the operator's own (``functions``), which a trace's record of
    the release's C++ calls is read against and the arms gate reads (which stub a library fills)."""

    def __new__(cls, functions=(), note=""):
        words = " <- ".join(functions)
        way = super().__new__(cls, f"{words} ({note})" if words and note else words or note)
        way.functions = tuple(functions)
        return way


class Claim:
    """One thing a fix can affect. ``key``: claims of one key are one (the first made is kept);
    ``held_to``: the device it alone can run on (None: any); ``runs``: whether it names code that
    runs when reached (a claim that lists or bounds, such as not shipped or unknown, does not)."""
    KINDS = []  # every kind of claim, in the order it is defined (``listed`` reads them all)
    held_to = None
    runs = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        Claim.KINDS.append(cls)

    @property
    def key(self):
        return (type(self).__name__, *vars(self).values())

    @classmethod
    def answer(cls, claims, seen, mapping):
        """What ``seen`` (one trace) says of this kind's ``claims`` of ``mapping``: an ``Answer``."""
        raise NotImplementedError

    @classmethod
    def listed(cls, claims):
        """This kind's claims as ``reach.json`` lists them: {key: value}."""
        raise NotImplementedError


@dataclass
class Unknown(Claim):
    """What the mapping could not bound, with the reason."""
    reason: str

    @classmethod
    def answer(cls, claims, seen, mapping):
        return Answer(unknown=[c.reason for c in claims])

    @classmethod
    def listed(cls, claims):
        return {"unknown": [c.reason for c in claims]}


@dataclass
class Operator(Claim):
    """An operator whose forward (or backward: its derivative formula, or a helper one calls)
    a fix changes, and the way the change reaches it. It ran where the profile names it, or where
    the trace's record of the release's C++ calls names a function on its way (the profiles of
    torch 1.x record an operator where autograd dispatches it: one another operator's kernel calls
    below autograd is never in them); a backward runs when its forward did. Where a trace has no
    such record, an operator a traced operator's kernel can call (``carriers``, filled by
    ``rules.map_diff``) may have run: unknown, never not reached."""
    op: str
    way: Way
    backward: bool = False
    carriers: frozenset = field(default=frozenset(), compare=False)
    runs = True

    @property
    def key(self):
        return ("Operator", self.op, self.backward)

    @classmethod
    def answer(cls, claims, seen, mapping):
        out, missed = Answer(), {}
        for c in sorted(claims, key=lambda c: (c.backward, c.op)):
            below = seen.below(c.op, c.way)
            if c.op in seen.ops or below:
                what = f"backward of {c.op}" if c.backward else f"operator {c.op}"
                how = f": the release's C++ called {below}, below the profile" if below and not c.backward else ""
                out.reached.append(f"{what} ({c.way}){how}")
                continue
            missed.setdefault(c.op, c)
            carried = sorted(c.carriers & seen.ops) if seen.ran is None and not c.backward else []
            if carried:
                out.unknown.append(f"operator {c.op} ({c.way}): not in the profile, but the kernels of "
                                   f"{', '.join(carried[:3])}, which ran, can call it below autograd, and "
                                   "this trace has no record of the release's C++ calls to tell")
        below = "" if seen.ran is None else ", and the release's C++ called no function on its way"
        out.not_reached += [f"operator {op} not dispatched{below}" for op in sorted(missed)]
        return out

    @classmethod
    def listed(cls, claims):
        forward = sorted((c for c in claims if not c.backward), key=lambda c: c.op)
        return {"ops": {c.op: c.way for c in forward},
                "backward_ops": {c.op: c.way for c in sorted(claims, key=lambda c: c.op) if c.backward},
                "chains": {c.op: list(c.way.functions) for c in forward},
                "carriers": {c.op: sorted(c.carriers) for c in forward}}


@dataclass
class Lines(Claim):
    """Changed lines of a Python file of the package (``python_files``), each hunk placed in the
    traced copy, or by the fix's own files (``scopes``: hunk index -> [(where, function)])."""
    path: str
    hunks: list = field(compare=False)
    scopes: dict = field(default=None, compare=False)
    runs = True

    @property
    def key(self):
        return ("Lines", self.path)

    @classmethod
    def answer(cls, claims, seen, mapping):
        out = Answer()
        for c in claims:
            hits, cannot, note = python_reach(c.path, c.hunks, seen.trace, seen.uses, c.scopes)
            out += Answer(hits, cannot, [note] if note else [])
        return out

    @classmethod
    def listed(cls, claims):
        return {"python": [{"path": c.path, "hunks": len(c.hunks), "scopes": c.scopes or {}} for c in claims]}


@dataclass
class AtImport(Claim):
    """A table of torch._C's bindings (``PyMethodDef``, ...), which it reads when it loads: every
    workload reaches it."""
    table: str  # "path: PyMethodDef name[]"
    runs = True

    @classmethod
    def answer(cls, claims, seen, mapping):
        return Answer(reached=[f"{c.table}: a binding table torch._C reads when it loads" for c in claims])

    @classmethod
    def listed(cls, claims):
        return {"at_import": [c.table for c in claims]}


# ``t //= x`` runs ``__floordiv__`` where the type has no ``__ifloordiv__``: a fix adding an
# in-place operator changes what that call runs
IN_PLACE = re.compile(r"^__i(add|sub|mul|matmul|truediv|floordiv|div|mod|pow|lshift|rshift|and|xor|or)__$")


@dataclass
class BindingMember(Claim):
    """A method (``Tensor.name``) or property (``Tensor.name`` read, ``Tensor.name=`` set) of a
    binding class whose binding changed: reached when the trace's record of the class's methods
    (``harness.trace.BindingMethods``) calls or looks it up, or the binary operator an in-place
    one falls back to."""
    member: str
    why: str = field(compare=False)
    is_property: bool = False
    runs = True

    @property
    def key(self):
        return ("BindingMember", self.member, self.is_property)

    @classmethod
    def answer(cls, claims, seen, mapping):
        out = Answer()
        for c in sorted(claims, key=lambda c: c.member):
            owner, name = c.member.split(".", 1)
            methods = (seen.trace.get("methods") or {}).get(owner)
            if methods is None:
                why_not = (seen.trace.get("methods_unrecorded") or {}).get(owner, "made before it could: trace again")
                out.unknown.append(f"{c.member} ({c.why}): this trace does not record the {owner} methods "
                                   f"called ({why_not})")
            elif c.is_property and name.rstrip("=") not in methods.get("properties", ()):
                out.unknown.append(f"{c.member} ({c.why}): this trace does not watch the {owner} property "
                                   f"{name.rstrip('=')} (made before properties were: trace again; or the "
                                   f"class's own Python property shadows the binding's)")
            elif _used(name, methods):
                out.reached.append(f"{c.member} called ({c.why})")
            else:
                out.not_reached.append(f"{c.member} never called nor looked up ({c.why})")
        return out

    @classmethod
    def listed(cls, claims):
        return {"methods": {c.member: c.why for c in claims if not c.is_property},
                "properties": {c.member: c.why for c in claims if c.is_property}}


def _used(name, methods):
    fallback = IN_PLACE.match(name)
    return (name in methods["called"] or name in methods["missing"]
            or bool(fallback and f"__{fallback.group(1)}__" in methods["called"]))


@dataclass
class CudaOnly(Claim):
    """A CUDA-only source, or a build file changed only in what a CUDA build alone does: no run
    on another device executes it. On a GPU, where no operator table mapped it, unbounded."""
    path: str
    held_to = "cuda"

    @classmethod
    def answer(cls, claims, seen, mapping):
        paths = [c.path for c in claims]
        if seen.device != "cuda":
            return Answer(not_reached=[f"CUDA-only: {', '.join(paths[:4])}{' ...' if len(paths) > 4 else ''}"])
        if not mapping.of(CudaOperator, CudaUnknown):
            return Answer(unknown=[f"CUDA sources changed ({', '.join(paths[:3])}) and no operator "
                                   f"table mapped them: on cuda that cannot be bounded"])
        return Answer()

    @classmethod
    def listed(cls, claims):
        return {"cuda": [c.path for c in claims]}


@dataclass
class CudaOperator(Claim):
    """An operator whose CUDA kernel a fix changes: reached on a GPU where the profile names it."""
    op: str
    way: Way
    held_to = "cuda"
    runs = True

    @classmethod
    def answer(cls, claims, seen, mapping):
        return Answer(reached=[f"operator {c.op} on cuda ({c.way})" for c in sorted(claims, key=lambda c: c.op)
                               if seen.device == "cuda" and c.op in seen.ops])

    @classmethod
    def listed(cls, claims):
        return {"cuda_ops": {c.op: c.way for c in claims}}


@dataclass
class CudaUnknown(Claim):
    """What could not be bounded in a CUDA-only source: unknown on a GPU only."""
    reason: str
    held_to = "cuda"

    @classmethod
    def answer(cls, claims, seen, mapping):
        return Answer(unknown=[c.reason for c in claims] if seen.device == "cuda" else [])

    @classmethod
    def listed(cls, claims):
        return {"cuda_unknown": [c.reason for c in claims]}


@dataclass
class EnteredThrough(Claim):
    """C++ that Python reaches only through one Python package (``rules.ENTERED_THROUGH``): not
    reached when none of that package's functions ran (not only its import)."""
    path: str
    package: str

    @classmethod
    def answer(cls, claims, seen, mapping):
        out = Answer()
        for c in claims:
            if _entered(seen.trace, c.package):
                out.unknown.append(f"{c.path}: C++ entered through {c.package}, whose functions ran: not "
                                   f"bounded further")
            else:
                out.not_reached.append(f"{c.path}: entered only through {c.package}, none of whose functions ran")
        return out

    @classmethod
    def listed(cls, claims):
        return {"entered": [[c.path, c.package] for c in claims]}


def _entered(trace, package):
    return any(PythonFile(unpack(trace["sources"][path])).entered(ran)
               for path, ran in trace["lines"].items()
               if path.startswith(package) and path in trace["sources"])


# a build setting torch.backends says directly (``harness.trace.build_config``)
BACKEND_SETTINGS = {"AT_MKL_ENABLED": "mkl", "AT_MKLDNN_ENABLED": "mkldnn"}


def built_with(setting, build):
    """Whether the traced torch's ``build`` has a setting a file is compiled under
    (``framework.cpp.BUILD_GUARD``); None where its trace does not say."""
    if setting in BACKEND_SETTINGS:
        return build.get(BACKEND_SETTINGS[setting])
    return setting in PARALLEL_BACKENDS.get(build["parallel"], ()) if "parallel" in build else None


@dataclass
class CompiledUnder(Claim):
    """A file whose every changed line is compiled only under one of the build's own settings
    (``cpp.BUILD_GUARD``): not reached where the traced torch is built without it."""
    path: str
    setting: str

    @classmethod
    def answer(cls, claims, seen, mapping):
        out = Answer()
        for c in claims:
            has = built_with(c.setting, seen.build)
            if has is False:
                words = ", ".join(f"{k}: {v}" for k, v in sorted(seen.build.items())) or "its trace does not say"
                out.not_reached.append(f"{c.path}: its changes are compiled only under {c.setting}, which torch "
                                       f"{seen.trace.get('torch_version')} is built without ({words})")
            else:
                out.unknown.append(f"{c.path}: its changes are compiled under {c.setting}, which this torch "
                                   f"{'has' if has else 'does not say whether it has'}: {why_unbounded(c.path)}")
        return out

    @classmethod
    def listed(cls, claims):
        return {"compiled_under": [[c.path, c.setting] for c in claims]}


class _FilesNeverRun:
    """Files no run of a Python workload executes, counted in one reason (``words``) and listed
    under ``listed_as``."""

    @classmethod
    def answer(cls, claims, seen, mapping):
        return Answer(not_reached=[f"{cls.words}: {_files(claims)}"])

    @classmethod
    def listed(cls, claims):
        return {cls.listed_as: [c.path for c in claims]}


@dataclass
class Frontend(_FilesNeverRun, Claim):
    """The C++ frontend and mobile bindings, which a Python workload never calls."""
    path: str
    words, listed_as = "C++ frontend, never called from Python", "frontend"


@dataclass
class NotShipped(_FilesNeverRun, Claim):
    """Tests, docs, CI: nothing the installed package holds."""
    path: str
    words, listed_as = "not shipped (tests, docs, mobile)", "not_shipped"


def _files(claims):
    return f"{len(claims)} file{'s' if len(claims) != 1 else ''}"


class Mapping:
    """The claims made of one fix's diff, in the order its rules made them, and the tables they
    were made with (``tables``: their label)."""

    def __init__(self, *claims, tables=""):
        self.claims, self.tables = {}, tables
        for claim in claims:
            self.add(claim)

    def add(self, claim):
        """``claim``, unless one of its key was made before (the first way found to an operator
        stays its way)."""
        self.claims.setdefault(claim.key, claim)

    def of(self, *kinds):
        return [c for c in self.claims.values() if isinstance(c, kinds)]

    def __getattr__(self, name):
        """One key of the listing (``as_dict``), read only: ``mapping.ops``, ``mapping.unknown``."""
        if name not in ("claims", "tables"):
            listing = self.as_dict()
            if name in listing:
                return listing[name]
        raise AttributeError(name)

    def ways(self):
        """Operator -> its Way, for every operator a fix changes (one whose forward and backward
        both change: its forward's way)."""
        ops = sorted(self.of(Operator), key=lambda c: not c.backward)
        return {c.op: c.way for c in ops}

    def as_dict(self):
        listed = {"tables": self.tables}
        for kind in Claim.KINDS:
            listed.update(kind.listed(self.of(kind)))
        return listed
