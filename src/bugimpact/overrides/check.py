"""The check of a compiled fix's override library on the study's own workload: what its four short
runs say (``steps.override``), as one ``outcome`` that cannot pass by accident.

- ``verified``: the workload calls operators the library replaces, and calls them through it (a
  kernel registered under a key the release never calls is not); the faithful build (the
  release's own files, compiled the same way) trains as the release does, bit for bit; the canary
  (the faithful build, instrumented) ran its own code (a library whose calls bind to the
  release's copies never does); and every object was compiled with the release's own flags.
- ``not exercised``: the workload calls none of the operators the library replaces, and the
  faithful build still trains as the release does: for this workload the arm is the release, and
  its verdict says so (``not exercised``), never a plain ``not triggered``.
- ``failed``, with the reason: any part above that did not hold, a run that failed, or a release
  run whose profile names no operator at all (nothing could then be said of what it calls).

An interposed library (TH and infrastructure files, ``overrides.parts``) replaces functions, not
operators: the same outcomes, with "the workload calls through it" read from the canary's entries
into the functions the fix changes (``changed_functions``: those whose source lines it changes),
by name; the release run's profile is not needed. A stub kernel has no operator of its own
either: a library with stub kernels, or one that also interposes (``parts.Route``), counts the
canary's entries into the functions the fix changes beside the operators it registers. Every
record names the functions the fix changes that the canary entered (``changed_calls``, of
``changed_functions`` in all): a workload can call an op file's operators and none of what the fix
changed in it, which reach's answer is held to (``stats.tables.contradiction``).

A check record is read by ``read``: one without an outcome, that does not read as a check, whose
fields contradict each other or whose seal is broken, or that is not of the arm's runtime as it is
now, is broken, never a pass.
"""
from collections import Counter
from pathlib import Path

from ..framework.declarations import op_name
from ..harness.registry import record_digest
from ..io import InputError, read_json
from .parts import Route

OUTCOMES = ("verified", "not exercised", "failed")
FINGERPRINTS = ("init", "epochs", "losses", "logits", "predictions")
BUILDS = ("release", "faithful", "canary", "arm")
# flags a rebuilt object is compiled with besides the release's own codegen flags: the language,
# ABI, position-independent code, warnings off and a newer compiler's leniency; none of them
# changes the code generated for a given source
NEUTRAL_FLAGS = ("-std=", "-D_GLIBCXX_USE_CXX11_ABI=", "-fPIC", "-w", "-fpermissive")
CODEGEN = ("-O", "-f", "-m", "-D", "-g")


def judge(runs, override, release_flags):
    """The check's record from the four runs' records (``runs``: build -> record, or a failure's
    words), the runtime's ``override`` record (its registered operators, every overload the
    release declares of their names, and the flags each build was compiled with) and the flags
    the release was built with, read from its torch now (``build.release_flags``).

    A profile names the operators the workload calls without their overloads. So an operator of
    the library is called through it or not (its counter says), and a name the workload calls
    none of whose registered overloads came through the library fails the check only where the
    library registers every overload of that name (then the calls went past it: a key the release
    does not call); else the workload may call only overloads the library does not replace, and the
    record names them as unconfirmed, as it does an operator the release's autograd implements by
    hand (``manual``: that kernel may never call on to the native one, as ``detach``'s does not)."""
    registered = [r["op"] for r in override["registered"]]
    failed = {build: why for build, why in runs.items() if isinstance(why, str)}
    if failed:
        return _failed("; ".join(f"the {b} run failed: {why}" for b, why in failed.items()))
    route = Route.read(override.get("route"))
    if not route.registers:
        return _interposed(runs, override, release_flags)
    profile = runs["release"].get("ops")
    if not profile:
        return _failed("the release run's profile names no operator: what the workload calls is not known")
    called = set(profile)
    expected = sorted(op for op in registered if op_name(op) in called)
    prints, faithful, problems = _builds(runs, override, release_flags)
    calls = {b: runs[b]["override"]["calls"] for b in ("faithful", "arm")}
    # called through the library, named by the profile or not (1.4's profile leaves out the
    # copy_ the autograd layer's own kernel calls on to)
    through = sorted({op for op in registered if calls["faithful"].get(op)})
    missed = sorted({op_name(op) for op in expected} - {op_name(op) for op in through})
    overloads = override.get("overloads") or {}
    by_hand = {op_name(r["op"]) for r in override["registered"] if r.get("manual")}
    # every overload registered, counted: a release whose schemas name no overload (torch 1.2)
    # declares several under one name
    never = [base for base in missed if not Counter(overloads.get(base, [base])) - Counter(registered)
             and base not in by_hand]
    unconfirmed = sorted({op for op in expected if op not in through and op_name(op) not in never})
    entries = runs["canary"]["override"].get("entries", 0)
    # a stub kernel, or an interposed file's function, has no operator of its own: its calls are
    # the canary's entries into it; an operator's kernel is counted by its calls, and the canary
    # says besides which of the functions the fix changes ran (an op file's library registers
    # every operator of the file, most of them changed in nothing)
    changed = _changed_run(runs, override)
    functions = changed if override.get("stubs") or route.interposes else {}
    if never:
        problems.append(f"the workload calls {', '.join(never)}, but never through the library: "
                        "registered under a key the release does not call")
    if through and not entries:
        problems.append("the canary (the rebuilt code, instrumented) never ran: the library's calls "
                        "went to the release's own copies")
    outcome = "failed" if problems else "verified" if through or functions else "not exercised"
    kernels = (f" and runs none of the functions the fix changes in its stub kernels "
               f"({', '.join(sorted({s['stub'] for s in override['stubs']}))})" if override.get("stubs") else "")
    if route.interposes:
        kernels += f" and none of those it changes in the files it interposes ({len(override['changed_functions'])})"
    return {"outcome": outcome, "passed": not problems, "route": str(route), "reason": "; ".join(problems) or (
                "" if through or functions else f"the workload calls none of the {len(registered)} operators the "
                f"library replaces{kernels}: for it the arm is the release"),
            "workload_calls": through + sorted(functions), "changed_calls": changed,
            "changed_functions": len(override.get("changed_functions") or ()), "unconfirmed": unconfirmed, "faithful_identical": faithful,
            "faithful_calls": calls["faithful"], "canary_entries": entries, "arm_calls": calls["arm"],
            "arm_identical": prints["arm"] == prints["release"], "release_operators": len(called),
            "interposed": override.get("interposed", 0), "diverged": _diverged(runs)}


def _interposed(runs, override, release_flags):
    """``judge`` for an interposed library (module doc)."""
    prints, faithful, problems = _builds(runs, override, release_flags)
    changed = {f["symbol"]: short_name(f["name"]) for f in override["changed_functions"]}
    through = _changed_run(runs, override)
    entries = runs["canary"]["override"].get("entries", 0)
    outcome = "failed" if problems else "verified" if through else "not exercised"
    if problems or through:
        reason = "; ".join(problems)
    elif not changed:
        reason = "the fix changes no function torch compiles here (its code is compiled out): the arm is the release"
    else:
        reason = (f"the workload runs none of the {len(set(changed.values()))} functions the fix changes "
                  f"({entries} entries into the library's other functions): for it the arm is the release")
    return {"outcome": outcome, "passed": not problems, "reason": reason, "route": "interposed",
            "workload_calls": sorted(through), "changed_calls": through, "changed_functions": len(changed),
            "unconfirmed": [],
            "faithful_identical": faithful, "faithful_calls": {}, "canary_entries": entries, "arm_calls": {},
            "arm_identical": prints["arm"] == prints["release"], "interposed": override.get("interposed", 0),
            "release_operators": len(runs["release"].get("ops") or ()), "diverged": _diverged(runs)}


def _diverged(runs):
    """The builds whose run stopped at a loss or parameter that is not finite, with where: the
    check's runs record it (a fix's arm may diverge where the release trains: what it changes),
    and the fingerprints up to there are compared as any others."""
    return {build: run["diverged"] for build, run in sorted(runs.items()) if run.get("diverged")}


def _changed_run(runs, override):
    """The functions the fix changes that the canary entered, by name, with how many times."""
    changed = {f["symbol"]: short_name(f["name"]) for f in override.get("changed_functions") or ()}
    through = {}
    for symbol, calls in (runs["canary"]["override"].get("functions") or {}).items():
        if symbol in changed and calls:
            through[changed[symbol]] = through.get(changed[symbol], 0) + calls
    return through


def _builds(runs, override, release_flags):
    """What both routes check of the builds themselves: each run's fingerprints, whether the
    faithful build trains as the release does, and the problems with either (or the flags)."""
    prints = {b: {k: runs[b]["fingerprints"][k] for k in FINGERPRINTS} for b in runs}
    faithful = prints["faithful"] == prints["release"]
    problems = flags_problems(override, release_flags)
    if not faithful:
        first = next(k for k in FINGERPRINTS if prints["faithful"][k] != prints["release"][k])
        problems.append(f"the faithful build (the release's own files) trains differently from the "
                        f"release (its {first} differ): not built as the release was")
    return prints, faithful, problems


def short_name(name):
    """A demangled function's name without its parameters (``THFloatTensor_addmmImpl``)."""
    depth, cut = 0, len(name)
    for i in range(len(name) - 1, -1, -1):  # the last top-level parameter list
        if name[i] == ")":
            depth += 1
        elif name[i] == "(":
            depth -= 1
            if depth == 0:
                cut = i
                break
    return name[:cut].strip()


def source_name(name):
    """A demangled function's name as its source writes it: without its parameters, its template
    arguments and a template function's return type (``float at::native::(anonymous
    namespace)::clip_coordinates<float>(float, long)`` is ``at::native::(anonymous
    namespace)::clip_coordinates``)."""
    bare, depth = [], 0
    for ch in short_name(name):
        depth += ch == "<"
        if not depth:
            bare.append(ch)
        depth -= ch == ">" and depth > 0
    text = "".join(bare).replace("(anonymous namespace)", "{anonymous}")
    return text.split()[-1].replace("{anonymous}", "(anonymous namespace)") if text.split() else text


def flags_problems(override, release_flags):
    """How the flags each build's objects were compiled with differ from the release's own:
    a codegen flag added (``-O0``, ``-ffp-contract=off``) or one of the release's left out."""
    problems = []
    for build, flags in sorted((override.get("compiled_with") or {"(unrecorded)": None}).items()):
        if flags is None:
            return ["the override record does not say which flags its objects were compiled with"]
        # a stub kernel file's build ("arm kernels"): the release compiled it with its capability's
        # flags too (``stubs.kernel_flags``)
        own = [*release_flags, *(override.get("kernel_flags") or [] if build.endswith(" kernels") else [])]
        extra = [f for f in flags if f.startswith(CODEGEN) and not f.startswith(NEUTRAL_FLAGS) and f not in own
                 and not (build.startswith("canary") and f in override.get("canary_flags", ()))]
        lacking = [f for f in own if f not in flags]
        if extra or lacking:
            problems.append(f"the {build} build was not compiled with the release's flags"
                            + (f": {' '.join(extra)} added" if extra else "")
                            + (f"{',' if extra else ':'} {' '.join(lacking)} left out" if lacking else ""))
    return problems


def _failed(reason):
    return {"outcome": "failed", "passed": False, "reason": reason}


def read(path, runtime=None):
    """A check record as it must be, one whole, or ``InputError`` naming the file and what is
    wrong: a dict with an ``outcome`` of ``OUTCOMES`` (``passed`` true exactly when it is not
    failed), its seal whole (``harness.registry.sealed``: a value edited by hand breaks it), and
    no field that contradicts another (``contradiction``). A check of an arm without an override
    (``override: false``) and one of a failed runtime (``outcome: runtime failed``) are records
    too. It must be of the arm's runtime as it is now (``runtime``: its record, else the one the
    check names, where it is there): of the libraries it holds, by their bytes (``not_of``)."""
    record = read_json(path)
    if not isinstance(record, dict):
        raise InputError(path, f"a {type(record).__name__}, not a check record")
    if "digest" in record and record["digest"] != record_digest(record):
        raise InputError(path, "its contents do not match its digest: edited by hand", field="digest")
    why = contradiction(record)
    if why:
        raise InputError(path, why[1], field=why[0])
    if runtime is None and record.get("runtime") and Path(record["runtime"]).is_file():
        try:
            runtime = read_json(record["runtime"])
        except InputError:
            runtime = None  # the runtime's own record says what is wrong with it
    why = not_of(record, runtime) if isinstance(runtime, dict) else ""
    if why:
        raise InputError(path, why, field="libraries")
    return record


def contradiction(record):
    """(field, why) where a check record's fields contradict each other, else None: a pass whose
    faithful build trained otherwise than the release, a verified arm with no call through the
    library, a call named with no count of it, a not exercised arm that names calls."""
    if record.get("override") is False:
        return None
    outcome = record.get("outcome")
    if outcome == "runtime failed":
        return None if record.get("passed") is None else ("passed", "a check of a failed runtime that says it passed")
    if outcome not in OUTCOMES:
        return "outcome", f"no outcome ({', '.join(OUTCOMES)}): not a check record"
    if record.get("passed") is not (outcome != "failed"):
        return "passed", f"outcome {outcome!r} with passed {record.get('passed')!r}"
    if outcome == "failed":
        return None
    calls = record.get("workload_calls")
    if record.get("faithful_identical") is not True:
        return ("faithful_identical", f"outcome {outcome!r}, yet its faithful build did not train as the release "
                f"(faithful_identical {record.get('faithful_identical')!r})")
    if not isinstance(calls, list) or (outcome == "verified") != bool(calls):
        return ("workload_calls", f"outcome {outcome!r} with the workload's calls through the library "
                f"{calls!r}" + (": verified with none" if outcome == "verified" else ""))
    counted = {**{op: n for op, n in (record.get("faithful_calls") or {}).items()},
               **{fn: n for fn, n in (record.get("changed_calls") or {}).items()}}
    uncounted = [name for name in calls if not (isinstance(counted.get(name), int) and counted[name] > 0)]
    if uncounted:
        return "workload_calls", f"names {', '.join(uncounted[:3])} among the workload's calls, with no count of them"
    through = any(isinstance(n, int) and n > 0 for n in (record.get("faithful_calls") or {}).values())
    if outcome == "verified" and Route.read(record.get("route")).registers and through \
            and not record.get("canary_entries"):
        return "canary_entries", "verified, yet the canary (the rebuilt code, instrumented) never ran"
    return None


def not_of(record, runtime):
    """Why a check that lets the arm run is not of ``runtime`` (the arm's runtime record as it is
    now), or "": it says the arm has no override while the runtime carries one (or the other
    way), or it checked other libraries than the runtime holds (made again since, with other
    bytes). A failed check stops the arm whatever it was of."""
    if runtime.get("status") == "failed" or record.get("outcome") == "failed":
        return ""  # the runtime's own failure, or the check's, stops the arm
    carries = bool(runtime.get("override"))
    if record.get("override") is False or record.get("outcome") == "runtime failed":
        return ("says the arm has no override library to check (or that its runtime failed), and its runtime "
                "carries one") if carries else ""
    if not carries:
        return "checks an override library, and the arm's runtime carries none"
    libraries = {b: lib.get("sha256") for b, lib in (runtime["override"].get("libraries") or {}).items()}
    checked = {b: lib.get("sha256") for b, lib in (record.get("libraries") or {}).items()}
    differ = sorted(b for b in libraries if checked.get(b) != libraries[b])
    if differ:
        return (f"checked other libraries than the runtime holds ({differ[0]}.so sha256 "
                f"{str(checked.get(differ[0]))[:12]}, the runtime's {str(libraries[differ[0]])[:12]}): the "
                "runtime was made again since")
    return ""
