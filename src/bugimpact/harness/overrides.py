"""A compiled one-fix arm's override library, loaded before a run trains: its static registrations
put the rebuilt kernels over the release's, or (an interposed library) it was preloaded into the
process before torch bound, and its exported functions take over the release's own calls to
them (host side: ``overrides.build``). After the run, how
often each registered kernel was called, and, in an instrumented canary build, how often the
rebuilt code itself ran: a library whose kernels the workload never called, or whose own code never
ran, changed nothing, and the check that reads these refuses it. Standard library only (ctypes),
Python 3.6 syntax, as the rest of the harness."""
import ctypes
import os


def load(path, preloaded=False):
    """Load the library at ``path`` (None: no override); returns its handle. A ``preloaded``
    library must already be in the process (``LD_PRELOAD``): loaded only now, after torch, it would
    take over nothing, and the run would be the release's while saying it was the arm's."""
    if not path:
        return None
    if preloaded and not _mapped(path):
        raise RuntimeError("the override library %s is interposed and must be preloaded (LD_PRELOAD) "
                           "before torch binds; it is not in this process" % path)
    return ctypes.CDLL(path, mode=getattr(ctypes, "RTLD_LOCAL", 0))


def _mapped(path):
    """Whether the file at ``path`` is mapped into this process."""
    real = os.path.realpath(path)
    with open("/proc/self/maps") as maps:
        return any(line.rstrip("\n").endswith(" " + real) for line in maps)


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def counts(library):
    """``{"calls": {operator: calls}}`` of a loaded library, and, where it is an instrumented
    canary, ``entries`` (entries into the rebuilt code) and ``functions``: entries per function,
    by its offset in the library (hex; the host names them from the library's symbol table).
    An operator's calls are those of every kernel registered under its name: a release whose
    schemas name no overload (torch 1.2) registers several kernels under one name."""
    count = ctypes.c_int.in_dll(library, "bugimpact_op_count").value
    calls = (ctypes.c_longlong * max(count, 1)).in_dll(library, "bugimpact_calls")
    names = (ctypes.c_char_p * max(count, 1)).in_dll(library, "bugimpact_ops")
    by_name = {}
    for i in range(count):
        name = names[i].decode("utf-8")
        by_name[name] = by_name.get(name, 0) + int(calls[i])
    out = {"calls": by_name}
    try:
        out["entries"] = int(ctypes.c_longlong.in_dll(library, "bugimpact_entries").value)
    except ValueError:  # not instrumented
        return out
    slots = ctypes.c_int.in_dll(library, "bugimpact_fn_slots").value
    addresses = (ctypes.c_void_p * slots).in_dll(library, "bugimpact_fn")
    entered = (ctypes.c_longlong * slots).in_dll(library, "bugimpact_fn_calls")
    info = _DlInfo()
    dladdr = ctypes.CDLL(None).dladdr
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    functions = {}
    for slot in range(slots):
        if addresses[slot] and dladdr(addresses[slot], ctypes.byref(info)):
            offset = "%x" % (addresses[slot] - info.dli_fbase)
            functions[offset] = functions.get(offset, 0) + int(entered[slot])
    out["functions"] = functions
    return out
