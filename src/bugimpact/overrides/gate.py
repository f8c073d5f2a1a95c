"""The gate's part of a compiled arm (``steps.builds.arms`` asks it before any run): whether the
override library replaces every operator reach says the workload runs through the changed code."""
from ..framework.declarations import op_name
from .check import short_name
from .parts import Route


def unreplaced(reach, override):
    """The operators reach found the workload dispatching through the changed code that the
    override library does not register, in words ("" when none, or no reach verdict). An
    interposed library registers none: it takes over every caller of the functions it rebuilds;
    an operator whose way to the changed code goes through a stub the library puts its kernel
    into (reach's chain, ``kernel <- stub <- ... <- op``), or through a function it interposes,
    is replaced there."""
    route = Route.read(override.get("route"))
    if not route.registers:
        return ""
    mapping = (reach or {}).get("mapping") or {}
    ops = mapping.get("ops") or {}
    # the functions on each operator's way (a verdict made before they were kept: its words)
    chains = mapping.get("chains") or {op: way.split(" <- ") for op, way in ops.items()}
    reached = {line.split()[1] for line in (reach or {}).get("reached", []) if line.startswith("operator ")}
    registered = {op_name(r["op"]) for r in override.get("registered", [])}
    replaced_at = {s["stub"] for s in override.get("stubs") or ()}
    if route.interposes:
        replaced_at |= {short_name(f["name"]) for f in override.get("changed_functions") or () if f.get("interposed")}
    left = sorted(op for op in ops if op in reached and op_name(op) not in registered
                  and not replaced_at & set(chains.get(op, ())))
    return ", ".join(f"{op} ({ops[op]})" for op in left[:3]) + (" ..." if len(left) > 3 else "")
