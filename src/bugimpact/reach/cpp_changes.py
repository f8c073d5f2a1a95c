"""What a change of C++ or of ATen's YAML touches, for the rules (``rules``): the entries and
functions it changes, and the operators they implement or lead to through the operator tables."""
import re

from ..framework import cpp
from ..framework.declarations import yaml_entries
from ..framework.paths import CUDA, part_of, why_unbounded
from ..framework.tables import C_SUFFIXES, REGISTER, written_at
from .claims import Operator, Unknown, Way
from .located import located, outside_functions


def tested_outside_cuda(tree, macro):
    """Whether any C or C++ source but a CUDA-only one tests ``macro`` with the preprocessor (a
    tree that cannot be searched whole: assumed so)."""
    where = written_at(tree, macro)
    if where is None:
        return True
    test = re.compile(rf"^\s*#\s*(if|ifdef|ifndef|elif)\b.*\b{re.escape(macro)}\b", re.M)
    return any(test.search(tree.read(path) or "") for path in where if not CUDA.search(path))


# how many functions outside ATen/native a changed function's callers may lead through
MAX_CALLERS = 64


def _called_by_name(fn):
    """Whether ``fn`` runs only where its name is written: not an operator, a constructor or a
    destructor."""
    return bool(fn.name) and not fn.name.startswith("operator") and fn.name != fn.owner


def called_from_native(path, placed, tables):
    """The changed functions of a C++ file outside ATen/native (a header such as ``vec256.h``),
    as (path, cpp.Function) pairs, where every changed line lies in the body of a function called
    by its name (``_called_by_name``) and every place the library's sources and code generators
    write that name is its own definition, a declaration, a call the tables follow, or a call
    from another function outside ATen/native that is bounded so in turn: the tables' callers then
    bound them all. Else ``(None, why)``."""
    if part_of(path) == "codegen" or not path.endswith(C_SUFFIXES):
        return None, why_unbounded(path)
    queue = []
    for _, lines, text in placed:
        funcs = cpp.functions(text)
        for n in lines:
            fn = cpp.enclosing(funcs, n)
            if fn is None or not _called_by_name(fn):
                return None, why_unbounded(path)
            queue.append((path, fn))
    changed, bounded = {id(fn) for _, fn in queue}, {}
    while queue:
        where_fn, fn = queue.pop()
        if (where_fn, fn.owner, fn.name) in bounded:
            continue
        if len(bounded) == MAX_CALLERS:
            return None, f"{fn.name}() and more than {MAX_CALLERS} functions outside ATen/native call it"
        bounded[(where_fn, fn.owner, fn.name)] = (where_fn, fn)
        where = written_at(tables.tree, fn.name)
        if where is None:
            return None, why_unbounded(path)
        for user, lines in sorted(where.items()):
            text = tables.tree.read(user) or ""
            native = tables.functions.get(user)
            funcs = native if native is not None else cpp.functions(text)
            for n in lines:
                at = cpp.enclosing(funcs, n)
                if at is not None and at.name == fn.name or at is None and cpp.declares(text, n, fn.name):
                    continue  # its own definition (a specialisation, an overload), or a declaration
                if native is None and at is not None and _called_by_name(at):
                    queue.append((user, at))  # a caller outside the tables: bounded the same way
                elif at is None or (user, at) not in tables.callers.get(fn.name, ()):
                    how = "changed there" if id(fn) in changed else f"which leads to the change, in {where_fn}"
                    return None, (f"{fn.name}(), {how}, is named at {user}:{n}, which the operator "
                                  f"tables do not follow")
    return list(bounded.values()), ""


def yaml_change(fd, tables, old_tree, new_tree, mapping, backward):
    key = "name" if backward else "func"
    for hunk, lines, text in located(fd, tables, old_tree, new_tree, mapping):
        entries = yaml_entries(text, key)
        hit = {e["op"] for e in entries for n in lines if e["start"] <= n <= e["end"]}
        for op in sorted(hit):
            mapping.add(Operator(op, Way(note=f"its {fd.path} entry changed"), backward=backward))
        if not hit:
            mapping.add(Unknown(f"{fd.path}: a change outside any entry (near line {hunk.new_start})"))


def changed_functions(fd, tables, old_tree, new_tree, mapping):
    """The functions whose bodies the diff changes, on either side, as (path, cpp.Function); a
    changed ``REGISTER_DISPATCH`` line stands for its kernel, a changed macro or constant for the
    functions of its file that use it (``_outside_functions``); what else is outside a function
    makes the file unknown."""
    names, unbounded = [], {}
    for _, lines, text in located(fd, tables, old_tree, new_tree, mapping):
        funcs, inits = cpp.definitions(text)
        src, code = text.splitlines(), cpp.blank(text).splitlines()
        for n in lines:
            fn = cpp.enclosing(funcs, n)
            registered = cpp_register(src[n - 1]) if fn is None and n - 1 < len(src) else ()
            if fn is not None:
                names.append((fd.name, fn))
            elif registered:
                names += [(fd.name, cpp.Function(k, n, n)) for k in registered]
            else:
                what, found = outside_functions(fd.name, src, code, funcs, inits, n)
                if what == "functions":
                    names += [(fd.name, user) for user in found]
                elif what == "unknown":
                    unbounded.setdefault(n, found)
    if unbounded:
        mapping.add(Unknown(f"{fd.name}: {unbounded[min(unbounded)]}"))
    return names


def cpp_register(line):
    return {kernel.split("::")[-1] for _, kernel in REGISTER.findall(line)}


def native_ops(fd, tables, old_tree, new_tree, mapping):
    """The operators an ATen/native source's changed functions implement or lead to."""
    names = changed_functions(fd, tables, old_tree, new_tree, mapping)
    ops, why, loose = tables.affected_ops(names) if names else (set(), {}, set())
    for op in sorted(ops):
        mapping.add(Operator(op, Way(why[op])))
    for name in sorted(loose):
        mapping.add(Unknown(f"{name}() implements no operator and has no caller in ATen/native (called "
                            f"from outside the tables, if at all)"))


def add_ops(mapping, ops, why, loose, path, note=""):
    for op in sorted(ops):
        mapping.add(Operator(op, Way(why[op], note)))
    for name in sorted(loose):
        mapping.add(Unknown(f"{name}() implements no operator and has no caller in ATen/native "
                            f"or TH (called from outside the tables, if at all; changed in {path})"))
