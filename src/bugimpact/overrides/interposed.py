"""The interposed half of an override library (TH's and ATen's own files, ``parts.Route``): which
functions the fix changes in the rebuilt objects, that the release exports every one of them its
callers must reach, that no interposed file registers anything when it loads, and the version
script that exports only what the library means to take over.

A preloaded library comes first in the process's global lookup: every function it exports takes
over the release's own calls to it. So it exports only the functions of its interposed files that
the release exports too, and the counters the harness reads (``bugimpact_*``); its own copies of
inline functions (``Tensor::contiguous``, instantiated in every object that calls it) and the
functions of its registered op files stay its own.
"""
import re
import subprocess

from . import release_locals
from .arm import changed_functions as arm_changed
from .check import source_name
from .release_build import BuildRefused, release_exports

# what registers operators, kernels or a backend fallback when its object loads
REGISTERS = re.compile(rb"RegisterOperators\s*\(|TORCH_LIBRARY|REGISTER_\w*DISPATCH\s*\(|static auto \w+ = c10::")
# a TH generic function's name, written once for every scalar type: THTensor_(addmm) is
# THFloatTensor_addmm, THDoubleTensor_addmm, ...; THNN_(ELU_updateOutput) THNN_FloatELU_updateOutput
GENERIC_NAME = re.compile(r"\b(TH\w*?_)\((\w+)\)\s*\(")


def no_load_time_registrations(files, release):
    """An interposed file must do nothing when it loads: one that registers operators, kernels or
    a backend fallback would register them a second time beside the release's."""
    registering = [p for p in files if REGISTERS.search((release / p).read_bytes())]
    if registering:
        raise BuildRefused(f"{', '.join(registering)} register{'s' if len(registering) == 1 else ''} at load "
                           "time (operators, kernels or a backend fallback): preloaded, the registrations "
                           "would be made twice")


def interposition(faithful, arm, libs, pairs, interposed=()):
    """The functions the fix changes, from a library's objects (``changed_functions``: each one's
    symbol, name and linkage, and whether the library takes it over: an interposed file defines it
    as its own, ``taken_over``), and how many exported functions whose release copies the objects of
    its ``interposed`` files replace (none: a registered library's), and none the release cannot
    be made to call: a changed function of an interposed file, of external linkage, that the
    release defines and does not export (hidden, or inlined into its callers) keeps the release's
    own copy for every caller outside the rebuilt files; refused, named. A changed function of internal linkage
    (``static``, an anonymous namespace, a lambda) is reached through the rebuilt file's exported
    ones."""
    exported = release_exports(libs) if interposed else set()
    defined, theirs, releases = {}, {}, set()
    for path in faithful:
        releases.update(function_symbols(path))
    for path in faithful + arm:
        defined.update(function_symbols(path))
    for path in interposed:
        theirs.update(function_symbols(path))
    names = dict(zip(defined, release_locals.demangle(list(defined))))
    changed = changed_functions(pairs, names)
    # one the arm alone defines (an added operator's node) has no release copy to take over
    hidden = [name for name in changed if theirs.get(name) == "T" and name not in exported and name in releases]
    if hidden:
        raise BuildRefused(f"the release does not export {len(hidden)} function(s) the fix changes ("
                           f"{'; '.join(names[n] for n in hidden[:3])}{' ...' if len(hidden) > 3 else ''}): hidden, "
                           "its own callers keep its copy, which no preloaded library replaces")
    return ([{"symbol": n, "name": names[n], "linkage": "external" if defined[n] in ("T", "W") else "internal",
              **({"interposed": True} if theirs.get(n) == "T" else {})} for n in changed], len(taken_over(interposed, exported)))


def taken_over(objects, exported):
    """The functions ``objects`` define as their own (global, not weak) that the release exports
    too: what a preloaded library of them takes over. A weak definition is a copy of an inline
    function or template instantiated in every object that calls it (``Tensor::contiguous``,
    hundreds in a generated backward nodes' file): it stays the library's own."""
    symbols = {}
    for path in objects:
        symbols.update(function_symbols(path))
    return sorted(n for n, binding in symbols.items() if binding == "T" and n in exported)


def version_script(path, exports):
    """A linker version script at ``path`` that exports ``exports`` and the harness's counters,
    and keeps every other symbol of the library to itself (module doc)."""
    lines = [f"    {name};" for name in exports]
    path.write_text("{\n  global:\n    bugimpact_*;\n" + "\n".join(lines) + ("\n" if lines else "")
                    + "  local:\n    *;\n};\n")
    return f"-Wl,--version-script={path}"


def function_symbols(obj):
    """The functions an object defines: mangled name -> ``nm``'s type (T global, W weak, t local)."""
    listing = subprocess.run(["nm", "--defined-only", str(obj)], capture_output=True, text=True, check=True)
    return {f[2]: f[1] for f in (line.split() for line in listing.stdout.splitlines())
            if len(f) == 3 and f[1] in "TtWw"}


def changed_functions(pairs, symbols):
    """The functions of the rebuilt objects the fix changes: those whose source lines it changes,
    in either direction (``arm.changed_functions``), found among the objects' ``symbols`` (mangled
    -> demangled) by name (a TH generic function by its name for each scalar type). ``pairs``: the
    changed files' bytes, (release, arm). Returns the mangled names."""
    patterns = []
    for before, after in pairs:
        for old, new in ((before, after), (after, before)):
            lines = old.decode("utf-8", "replace").splitlines()
            for _, fn in arm_changed("", old, new):
                generic = GENERIC_NAME.search(" ".join(lines[fn.start - 1:fn.start + 2]))
                if generic and generic.group(1) == "THNN_":
                    patterns.append(rf"THNN_\w+?{generic.group(2)}")
                elif generic:
                    patterns.append(rf"TH\w*?{generic.group(1)[2:]}{generic.group(2)}")
                else:
                    patterns.append(rf"(.*::)?{re.escape(fn.owner + '::') if fn.owner else ''}{re.escape(fn.name)}")
    if not patterns:
        return []
    wanted = re.compile("|".join(f"(?:{p})" for p in sorted(set(patterns))))
    return sorted(m for m, name in symbols.items()
                  if "[clone" not in name and wanted.fullmatch(source_name(name)))
