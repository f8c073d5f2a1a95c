"""What a release declares about its operators, read from its ``native_functions.yaml`` and
``derivatives.yaml`` by one reader (``yaml_entries``: each entry with its lines): the operators
and how each is registered (``operators``, for an override library), the functions an entry
dispatches to (``dispatch_targets``, for the operator tables of ``tables``), and where a change to
the files sits (the lines, for reach)."""
import re


def op_name(text):
    """``add.Tensor(Tensor self, ...) -> Tensor`` and ``aten::add_`` -> ``add`` / ``add_``: the
    operator's base name, as the profiler of every torch version can be made to say it."""
    name = text.strip().split("(", 1)[0].strip()
    if name.startswith("aten::"):
        name = name[len("aten::"):]
    return name.split(".", 1)[0]


# the operators the autograd layer implements by hand, named in the generator of torch 1.4's
# VariableType (1.5 on says it in native_functions.yaml: ``manual_kernel_registration``)
MANUAL = re.compile(r"^MANUAL_IMPLEMENTATIONS\s*=\s*(?:set\(\[|\{)(.*?)(?:\]\)|\})", re.M | re.S)


def manual_operators(generator):
    """The names in ``tools/autograd/gen_variable_type.py``'s ``MANUAL_IMPLEMENTATIONS`` (text or
    bytes), or none."""
    text = generator.decode("utf-8", "replace") if isinstance(generator, bytes) else generator or ""
    found = MANUAL.search(text)
    return set(re.findall(r"['\"](\w+)['\"]", found.group(1))) if found else set()


def operators(native_functions, derivatives, manual=()):
    """Each operator of a ``native_functions.yaml`` (bytes or text) as its ``dispatch:`` says it
    is registered: its schema, its CPU kernel's C++ name, and whether it has a ``dispatch:`` entry
    for the CPU, is composite (2.x), has a derivative (``derivatives.yaml``), or is registered by
    hand (``manual_kernel_registration``, or named in ``manual``: the autograd layer's own kernel
    stands where generated code would register one), and whether c10 boxes it (1.5 and 1.6's
    ``use_c10_dispatcher: full``; their generated code registers the others unboxed only). Each
    entry as ``yaml_entries`` finds it."""
    import yaml  # yaml: only when a file of it is read (a train job imports this module)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    text = native_functions.decode("utf-8") if isinstance(native_functions, bytes) else native_functions
    derived_text = derivatives.decode("utf-8") if isinstance(derivatives, bytes) else derivatives
    derived = {signature(entry["signature"]) for entry in yaml_entries(derived_text, "name")}
    out = []
    for lines in (e["lines"] for e in yaml_entries(text, "func")):
        entry = yaml.load("\n".join(lines), Loader=loader)[0]  # one entry, as yaml_entries found it
        func = entry["func"]
        name = func.split("(")[0]
        dispatch = entry.get("dispatch")
        cpu, composite = None, None
        if isinstance(dispatch, dict):
            for keys, fn in dispatch.items():
                keys = [k.strip() for k in str(keys).split(",")]
                if "CPU" in keys:
                    cpu = fn
                elif "CompositeExplicitAutograd" in keys or "CompositeExplicitAutogradNonFunctional" in keys:
                    composite = composite or ("explicit", fn)
                elif "CompositeImplicitAutograd" in keys or "Math" in keys:
                    composite = composite or ("implicit", fn)
        elif isinstance(dispatch, str):
            cpu = dispatch
        cpp = cpu or (composite[1] if composite else native_name(name, func))
        out.append({"name": name, "schema": func, "cpp": cpp, "cpu_dispatch": cpu is not None,
                    "composite": composite[0] if composite else ("implicit" if not dispatch else None),
                    "derivative": signature(func) in derived or signature(func, base_variant=True) in derived,
                    "manual": bool(entry.get("manual_kernel_registration")) or name.split(".")[0] in manual,
                    "c10_full": entry.get("use_c10_dispatcher") == "full"})
    return out


# an out variant's mutable keyword arguments: ``*, Tensor(a!) out``
OUT_ARGUMENTS = re.compile(r"\*\s*,.*Tensor\([a-z]!\)")


def signature(schema, base_variant=False):
    """An operator's signature as the autograd generator matches a ``derivatives.yaml`` entry to
    it (``load_derivatives.find_info``, torch 1.x): its name without the overload and its
    arguments' types, annotations and defaults left out. ``base_variant``: the signature of the
    function an in-place or out variant takes its derivative from (``div_.Scalar`` and
    ``div.out`` from ``div``'s), the name's trailing ``_`` and the out arguments left out."""
    name, _, rest = schema.strip().partition("(")
    args = rest.split("->")[0].strip()
    args = args[:args.rindex(")")] if ")" in args else args
    name = name.split(".")[0]
    out = bool(OUT_ARGUMENTS.search(schema.split("->")[0]))
    if base_variant and name.endswith("_") and not name.endswith("__") and not out:
        name = name[:-1]
    types, keyword_only = [], False
    for arg in split_arguments(args):
        if arg == "*":
            keyword_only = True
        elif arg:
            kind = arg.split()[0]
            if not (base_variant and out and keyword_only and "!" in kind):
                types.append(_schema_type(re.sub(r"\([a-z]!?\)", "", kind)))
    return f"{name}({', '.join(types)})"


# torch 1.1's derivatives.yaml names an operator with its C++ types (``sum(Tensor self, IntArrayRef
# dim, bool keepdim)``), as its generator matched them to the declarations' C++ types: each read as
# the schema type it stands for, a list's size left out (``int[1]`` is ``IntArrayRef``)
CPP_TYPES = {"IntArrayRef": "int[]", "int64_t": "int", "double": "float", "TensorList": "Tensor[]",
             "Generator": "Generator?"}


def _schema_type(kind):
    kind = re.sub(r"\[\d+\]", "[]", kind)
    return CPP_TYPES.get(kind, kind)


def split_arguments(args):
    """A schema's arguments or a C++ parameter list, split at the commas outside brackets
    (``int[2]``, ``Tensor(a!)``, ``std::tuple<Tensor, Tensor>``)."""
    out, depth, start = [], 0, 0
    for i, char in enumerate(args):
        depth += 1 if char in "([<" else -1 if char in ")]>" else 0
        if char == "," and depth == 0:
            out.append(args[start:i].strip())
            start = i + 1
    tail = args[start:].strip()
    return out + ([tail] if tail else [])


def native_name(name, func):
    """The C++ name of an operator's kernel where its entry names none: its base name, and for an
    out variant (mutable keyword arguments: ``matmul.out``, ``softshrink_backward.grad_input``)
    the base name with ``_out``, as ATen's code generation names it."""
    base = name.split(".")[0]
    return f"{base}_out" if OUT_ARGUMENTS.search(func.split("->")[0]) and not base.endswith("_out") else base


def yaml_entries(text, key):
    """The ``- <key>: ...`` entries of ATen's YAML tables with their line spans, read line by line
    (the files are one flat list; a YAML load would lose the lines)."""
    entries, current = [], None
    for number, line in enumerate(text.splitlines(), 1):
        m = re.match(r"^- %s:\s*(.*)$" % key, line)
        if m:
            current = {"op": op_name(m.group(1)), "signature": m.group(1).strip(), "start": number,
                       "end": number, "lines": [line]}
            entries.append(current)
        elif current is not None and (line.startswith((" ", "\t")) or not line.strip()):
            if line.strip():
                current["end"] = number
            current["lines"].append(line)
        elif current is not None and not line.startswith("#"):
            current = None
    return entries


def dispatch_targets(entry_lines):
    """The C++ functions an operator entry dispatches to; its own name when it names none."""
    targets, in_dispatch = set(), False
    for line in entry_lines[1:]:
        if re.match(r"^\s+dispatch:\s*$", line):
            in_dispatch = True
            continue
        m = re.match(r"^\s+dispatch:\s*(\w+)\s*$", line)
        if m:
            targets.add(m.group(1))
            continue
        if in_dispatch:
            m = re.match(r"^\s{4,}[\w, ]+:\s*([\w:]+)\s*$", line)
            if m:
                targets.add(m.group(1).split("::")[-1])
                continue
            in_dispatch = False
    return targets
