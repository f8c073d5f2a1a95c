"""torch._C's Python bindings in a diff: which tables and which binding classes' methods a change
of a binding source touches (``static.PythonBindings`` sends those files here)."""
import re

from ..framework import cpp
from ..framework.paths import why_unbounded
from ..framework.tables import th_name
from .claims import AtImport, BindingMember, Unknown
from .located import located, outside_functions

# The tables torch._C hands to Python while it loads: PyType_Ready and PyModule_AddFunctions read
# every entry then, whether or not the workload calls what the entry names.
PY_TABLE = re.compile(r"\b(PyMethodDef|PyTypeObject|PyGetSetDef|PyMemberDef|PyNumberMethods|"
                      r"PyMappingMethods|PySequenceMethods|PyModuleDef|PyBufferProcs|PyAsyncMethods)\b")
# The method and property tables of torch._C's binding types, by the Python class each serves:
# Tensor's (torch._C._TensorBase: the generated method table, python_variable.cpp's own, and its
# properties) and the storages' (``THPStorage_(methods)``, once per scalar type). An entry there,
# or a binding only they name, runs only when that class's method of that name is called (or
# looked up, for one a fix adds), or its property read (``grad``: the getter) or set (``grad=``:
# the setter), which the trace records (``harness.trace.BindingMethods``).
METHOD_TABLES = ((re.compile(r"\bPyMethodDef\s+(variable_methods|extra_methods)\s*\["), "Tensor"),
                 (re.compile(r"\bPyGetSetDef\s+THPVariable_properties\s*\["), "Tensor"),
                 (re.compile(r"\bPyMethodDef\s+THPStorage_(\(methods\)|methods)\s*\["), "Storage"))
METHOD_ENTRY = re.compile(r'^\s*\{\s*"(\w+)"\s*,')


def binding_change(fd, tables, old_tree, new_tree, mapping):
    """A change to a Python binding source. An entry of a table torch._C reads while it loads
    (``PY_TABLE``) is reached by every workload, but for the binding classes' method tables
    (``METHOD_TABLES``): there an entry, or the body of a binding only they name, is reached when
    that class's method of that name is called. Any other binding's body runs when Python calls it,
    through calls the trace does not see (the interpreter's slots, C callers), and a template's
    placeholder is code generation: both unknown, as is anything else in the file."""
    tables_hit, reasons = set(), {}
    for _, lines, text in located(fd, tables, old_tree, new_tree, mapping):
        funcs, inits = cpp.definitions(text)
        src, code = text.splitlines(), cpp.blank(text).splitlines()
        for n in lines:
            fn = cpp.enclosing(funcs, n)
            table = next((d for d in inits if d.start <= n <= d.end and PY_TABLE.search(d.head)), None)
            entry = METHOD_ENTRY.match(src[n - 1]) if table is not None and n - 1 < len(src) else None
            if n - 1 < len(src) and "${" in src[n - 1]:
                reasons.setdefault("placeholder", "a placeholder of code generation, which can change "
                                                  "every operator")
            elif fn is not None:
                _binding_body(fd.name, fn, src, code, inits, mapping, reasons)
            elif entry and _owner(table):
                for name in _entry_names(entry.group(1), table):
                    mapping.add(BindingMember(f"{_owner(table)}.{name}", f"its entry in {_table_name(table)} "
                                              f"changed ({fd.name})", _properties(table)))
            elif table is not None and code[n - 1].strip():
                tables_hit.add(_table_name(table))
            else:
                what, found = outside_functions(fd.name, src, code, funcs, inits, n)
                for user in found if what == "functions" else ():
                    _binding_body(fd.name, user, src, code, inits, mapping, reasons)
                if what == "unknown":
                    reasons.setdefault("other", f"{found}; {why_unbounded(fd.name)}")
    for table in sorted(tables_hit):
        mapping.add(AtImport(f"{fd.name}: {table}"))
    for why in reasons.values():
        mapping.add(Unknown(f"{fd.name}: {why}"))


def _owner(table):
    """The binding class whose methods ``table`` holds (``METHOD_TABLES``), or None."""
    return next((owner for pattern, owner in METHOD_TABLES if pattern.search(table.head)), None)


def _properties(table):
    """Whether ``table`` holds properties (a getter and a setter per entry), not methods."""
    return "PyGetSetDef" in table.head


def _entry_names(name, table):
    """What the trace records for a use of a table's entry ``name``: a method's name; a property's
    read and its write (``grad``, ``grad=``)."""
    return [name, name + "="] if _properties(table) else [name]


def _table_name(table):
    return " ".join(table.head.rstrip("= ").split()[-2:])  # PyMethodDef variable_methods[]


def _binding_body(path, fn, src, code, inits, mapping, reasons):
    """A changed binding's body: the binding classes' methods it is, when only their method tables
    name it and nothing else in the file calls it; else why its change is unknown (the Python
    methods it binds run only when Python calls them, in ways the trace does not see)."""
    name = th_name(src, fn)  # THPStorage_(setFromFile) is setFromFile
    bound = [(d, m) for d in inits if PY_TABLE.search(d.head) for m in _methods_bound_to(name, src, d)]
    methods = sorted({m.rstrip("=") for _, m in bound})
    if bound and all(_owner(table) for table, _ in bound) and not _used_elsewhere(name, fn, code, inits):
        for table, method in bound:
            mapping.add(BindingMember(f"{_owner(table)}.{method}", f"the body of its binding {name}() changed "
                                      f"({path})", _properties(table)))
        return
    reasons.setdefault(name, f"{name}() binds {', '.join(methods)}: it runs only when Python calls that, "
                             f"in ways the trace does not see" if methods else why_unbounded(path))


def _used_elsewhere(name, fn, code, inits):
    """Whether the file names the function ``name`` outside its own definition and its binding
    tables (a C caller, which no method call shows); a TH generic one by its whole name
    (``THPStorage_(size)``, never any ``size``)."""
    skip = {n for d in inits if PY_TABLE.search(d.head) for n in range(d.start, d.end + 1)}
    skip.update(range(fn.start, fn.end + 1))
    word = re.compile(r"\b%s\b" % re.escape(name) if fn.name == name
                      else r"\b%s\s*\(\s*%s\s*\)" % (re.escape(fn.name), re.escape(name)))
    return any(word.search(line) for i, line in enumerate(code, 1) if i not in skip)


def _methods_bound_to(function, src, table):
    """What ``table`` binds ``function`` to, as the trace records its use: a method's name
    (``{"record_stream", (PyCFunction)THPVariable_record_stream, METH_O, NULL}``), a property's
    when it is the getter (``{"grad", (getter)THPVariable_get_grad, (setter)THPVariable_set_grad}``:
    ``grad``), and with ``=`` when it is the setter (``grad=``)."""
    entry = re.compile(r'\{\s*"(\w+)"\s*,([^}]*)\}')
    word = re.compile(r"\b%s\b" % re.escape(function))
    found = set()
    for m in entry.finditer("\n".join(src[table.start - 1:table.end])):
        fields = m.group(2).split(",")
        for i, field in enumerate(fields):
            if word.search(field):
                found.add(m.group(1) + ("=" if _properties(table) and i == 1 else ""))
    return sorted(found)
