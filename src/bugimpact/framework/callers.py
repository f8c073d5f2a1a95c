"""The closure over callers from the functions a fix changes, to the operators and stub kernels
that run them: one walk that reach's operators (``Tables.affected_ops``) and an override's files
to rebuild (``overrides.arm.caller_files``) both read, so what reach says a fix can change and
what a library replaces for it are the same claims."""
from dataclasses import dataclass, field


@dataclass
class Walk:
    """Every function a changed one leads to through ATen/native's callers (a node: its path,
    class and name), each expanded once, with all its callers kept (``callers``: a node may be
    reached along several ways, and each way's files matter to a library that replaces them)."""
    ops: set = field(default_factory=set)      # operators that can run a changed function
    why: dict = field(default_factory=dict)    # operator -> the first chain of names that reaches it
    loose: set = field(default_factory=set)    # functions that lead nowhere the tables know
    callers: dict = field(default_factory=dict)  # node -> [(caller node, the stub it goes through or None)]
    ends: dict = field(default_factory=dict)   # node -> the operators it implements or stubs it fills
    roots: list = field(default_factory=list)  # the changed functions' nodes

    def ends_without_stubs(self):
        """For each node, the ends (operators, stubs) reached from it through direct calls alone,
        stopping at the first: the callers of an operator go through the dispatcher, those of a
        stub kernel through the stub, to whatever a library puts there."""
        near, queue = set(), list(self.roots)  # what the changed functions call through no stub
        while queue:
            node = queue.pop()
            if node not in near:
                near.add(node)
                queue += [] if self.ends.get(node) else [c for c, stub in self.callers.get(node, ()) if stub is None]
        reach = {node: set(ends) for node, ends in self.ends.items() if node in near}
        changed = True
        while changed:  # a fixpoint: helpers may call each other
            changed = False
            for node, callers in self.callers.items():
                if self.ends.get(node) or node not in near:
                    continue
                found = set().union(*(reach.get(c, set()) for c, stub in callers if stub is None))
                if not found <= reach.get(node, set()):
                    reach[node] = reach.get(node, set()) | found
                    changed = True
        return reach


def walk(tables, changed):
    """The ``Walk`` from ``changed`` ((path, cpp.Function) pairs) over ``tables``: the closure over
    direct callers in ATen/native (a static function's within its file, a member's through the
    functions of its file that use its class) and DispatchStub registrations, ended at the
    operators' dispatch functions."""
    out, seen = Walk(roots=[(path, fn.owner, fn.name) for path, fn in changed]), set()
    queue = [(path, fn, (fn.name,)) for path, fn in changed]
    while queue:
        path, fn, chain = queue.pop()
        node = (path, fn.owner, fn.name)
        if node in seen:
            continue
        seen.add(node)
        nexts = []
        # a member or a file-local function is never what native_functions.yaml names
        implements = () if fn.owner or fn.static else tables.ops_of_function.get(fn.name, ())
        stubs = tables.stub_of_kernel.get(fn.name, ())
        for op in implements:
            out.ops.add(op)
            out.why.setdefault(op, chain)
        if implements or stubs:
            out.ends[node] = set(implements) | set(stubs)
        for stub in stubs:
            nexts += [(p, c, (*chain, stub, c.name), stub) for p, c in tables.callers.get(stub, ())]
        if fn.owner:
            nexts += [(p, c, (*chain, c.name), None) for p, c in tables.class_users(fn.owner)
                      if c.owner != fn.owner]
        elif not implements:  # an operator's other callers go through the dispatcher: traced
            local = fn.static and not path.endswith((".h", ".cuh", ".hpp"))
            nexts += [(p, c, (*chain, c.name), None) for p, c in tables.callers.get(fn.name, ())
                      if (p == path or not local) and c.name != fn.name]
        if not nexts and not implements:
            out.loose.add(f"{path}: {fn.owner + '::' if fn.owner else ''}{fn.name}")
        out.callers[node] = [((p, c.owner, c.name), stub) for p, c, _, stub in nexts]
        queue += [(p, c, next_chain) for p, c, next_chain, _ in nexts]
    return out
