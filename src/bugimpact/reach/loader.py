"""The release's own C++ functions a run called, from the dynamic loader's record of it
(``harness.loader``): every exported function of torch's libraries bound lazily after the run's
imports, by the loader's word, demangled.

What it cannot see (its blind spots, said wherever its answer is used): a function that is not
exported (``static``, an anonymous namespace's, hidden, or inlined into its callers), one reached
only through a pointer (a kernel a dispatcher or a DispatchStub calls, unless something calls its
exported name too; the generated wrappers it is registered as do), one first called while torch
was imported (bound then, with the import's address relocations, so not told from them), and any
library linked ``-z now``. Seen on torch 1.5.1's small CNN: 69 ``at::native`` functions, among
them the operators its profile never names (a relu's threshold, the expand of every linear layer).
"""
import re
import tempfile
from pathlib import Path

from ..io import read_json, write_json
from ..overrides.check import source_name
from ..overrides.release_locals import demangle

# what it cannot see, in the words a ground truth made from it carries (module doc)
BLIND_SPOTS = ("functions that are not exported (static, in an anonymous namespace, hidden, or inlined into "
               "their callers); kernels reached only through a pointer (a dispatcher's or a DispatchStub's), "
               "unless their exported name is called too; functions first called while torch was imported; "
               "libraries linked -z now")
BINDING = re.compile(r"binding file \S+ \[\d+\] to (\S+) \[\d+\]: normal symbol `([^']+)'")
# the release's own libraries (1.x: libtorch, libc10, libcaffe2*; 2.x: libtorch_cpu and the rest)
RELEASE_LIBRARY = re.compile(r"/lib(torch\w*|c10\w*|caffe2\w*|shm)\.so(\.\d+)*$")


def called(mark):
    """The names (demangled, without parameters) of the release's exported functions the run
    bound after its imports (``mark``: the harness's ``loader.MARK``); None where there is no
    record to read (the loader was not asked, or the runtime's files are out of reach) or it
    names no call: every run calls the release, so a record without one was not bound lazily
    (torch loaded before ``harness.loader.lazy``), and an empty answer would read as "called
    nothing"."""
    path = Path(mark["file"]) if mark else None
    if path is None or not path.is_file():
        return None
    with open(path, "rb") as handle:
        handle.seek(mark["offset"])
        text = handle.read().decode("utf-8", "replace")
    symbols = sorted({m.group(2) for m in BINDING.finditer(text) if RELEASE_LIBRARY.search(m.group(1))})
    return sorted({source_name(name) for name in demangle(symbols)}) or None


def short_names(functions):
    """The unqualified names of ``functions`` (``at::native::add_out`` -> ``add_out``), as the
    operator tables name what they hold; a method's too (``at::Tensor::expand`` -> ``expand``)."""
    return {name.rsplit("::", 1)[-1] for name in functions or ()}


def recording_calls(launch, spec, out):
    """A run launched (``launch(spec)``: its exit code) with the loader's record asked for, in a
    folder of its own, and the release's functions the run called added to the record it wrote at
    ``out`` (``cpp_called``: None where the loader's record was out of reach). Returns the exit
    code."""
    with tempfile.TemporaryDirectory(prefix="bugimpact-loader-") as tmp:
        code = launch({**spec, "bindings": str(Path(tmp) / "bindings")})
        if code == 0 and Path(out).exists():
            record = read_json(out)
            write_json(out, {**record, "cpp_called": called(record.get("loader"))})
    return code


def ran_on_the_way(op, way, ran):
    """The function of ``way`` (how a fix reaches the operator ``op``: ``claims.Way``), or the
    operator's own entry (``at::op``), that a run called (``ran``: ``short_names``), or None."""
    return next((f for f in (*way.functions, op) if f in ran), None)


def contradicted(mapping, called):
    """Where a verdict of ``not reached`` is wrong by the release's C++ calls of a run
    (``called``: ``reach.loader.called``): the operators a fix reaches (``claims.Mapping``) one of
    whose ways' functions, or whose own entry, the run called, each with that function."""
    ran = short_names(called)
    ways = mapping.ways()
    return {op: hit for op, way in sorted(ways.items()) if (hit := ran_on_the_way(op, way, ran))}
