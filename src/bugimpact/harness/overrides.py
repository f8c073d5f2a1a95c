"""A compiled one-fix arm's override library, loaded before a run trains: its static registrations
put the rebuilt kernels over the release's (host side: ``artifacts.kernels``). After the run, how
often each registered kernel was called, and, in an instrumented canary build, how often the
rebuilt code itself ran: a library whose kernels the workload never called, or whose own code never
ran, changed nothing, and the check that reads these refuses it. Standard library only (ctypes),
Python 3.6 syntax, as the rest of the harness."""
import ctypes


def load(path):
    """Load the library at ``path`` (None: no override); returns its handle."""
    return ctypes.CDLL(path, mode=getattr(ctypes, "RTLD_LOCAL", 0)) if path else None


def counts(library):
    """``{"calls": {operator: calls}}`` of a loaded library, and ``entries`` (entries into the
    rebuilt code) where it is an instrumented canary."""
    count = ctypes.c_int.in_dll(library, "bugimpact_op_count").value
    calls = (ctypes.c_longlong * max(count, 1)).in_dll(library, "bugimpact_calls")
    names = (ctypes.c_char_p * max(count, 1)).in_dll(library, "bugimpact_ops")
    out = {"calls": dict((names[i].decode("utf-8"), int(calls[i])) for i in range(count))}
    try:
        out["entries"] = int(ctypes.c_longlong.in_dll(library, "bugimpact_entries").value)
    except ValueError:  # not instrumented
        pass
    return out
