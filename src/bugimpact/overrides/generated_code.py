"""What a fix changes in the code the release's generators write, by definition, and whether one
override library can take it (issue 59's generated-code arms, their first route).

The release tree's own generators run twice (``generated_headers.generate``, kept per tree): on its
generator inputs as they are, and with the fix made on them. Each file they write is compared as a
CPU build of the release compiles it: the wheels are built without ``USE_STATIC_DISPATCH``, so
those blocks drop out; CUDA files are not compiled for a CPU run; some outputs are read by other
generators, not compiled. What differs then is judged file by file (``judged``):

- **the kernels the dispatcher calls** (``CPUType.cpp``, ``TypeDefault.cpp``): a definition or
  registration changed, added or taken away names its operator (``SCHEMA``); any other change of
  them (an include, a helper) is refused. Such a change says
  which kernel the operator's key calls: the library registers the arm's kernel for it over the
  release's (``registration``), read from the arm's ``native_functions.yaml``. Every operator named
  here must be registered by the arm's library, or its build refuses (``build``);
- **TH's generated wrappers** (``LegacyTHFunctionsCPU.cpp``): definitions the arm no longer has are
  dead code (the arm's kernels no longer call them); one the arm has and the release lacks, or
  changes, would have to be compiled: refused, the fix built on the TH code the release no longer
  generates (``Entangled``: a release before the fix may take it forwards);
- **generated headers**: declarations only are placed for the arm's own files (a new native
  function its op file calls); inline code their includers compile is refused;
- **the backward nodes** (``Functions.cpp``): a node's ``apply`` changed (a derivative formula),
  or one that runs a helper the fix changes, adds or takes away (the template's own code: helpers
  are local to the file), is interposed: the file is compiled as a slice, its preamble and helpers
  and those nodes (``generated_slices.sliced``), and the library exports their ``apply``, which libtorch exports
  too. A node added or taken away (its struct in ``Functions.h`` changes) or the preamble changed
  is refused;
- **the autograd layer's Variable kernels** (``VariableType_N.cpp``) that differ only in when
  they save a node's inputs, where the release's save all the arm's would: left as they are;
- **an operator the arm takes away** (the fix added it; the release that holds it is taken back):
  left registered as the release has it (``registered`` tells which each side has), and each file
  whose arm side only takes the lacking operators' lines and blocks away is the release's
  (``taken_away``), a header so changed too;
- **an operator the arm adds** (the fix made forwards adds it): where a file's arm side only adds
  that operator's lines and blocks, its schema is registered with its kernel (the registration
  of a kernel file's operators names the schema), its Variable kernel is compiled from a slice of
  its file (``generated_slices.sliced_kernels``: the preamble, its definition and its registration, which registers it
  when the library loads), its backward node with the nodes' slice, the generated headers that
  declare them placed for the library's own files (a header that only adds names changes nothing
  its includers compile), and what only Python or TorchScript calls (its binding, its node's
  Python class, its entry of TorchScript's table) is left out, named (``added_left_out``): the
  release's own code never calls an operator it does not have;
- **anything else the release compiles** (the autograd layer's Variable kernels, TorchScript's
  operator table, the Python bindings, kernels of sparse, quantized or MKL-DNN tensors): refused,
  the file and its first changed definitions named. Re-registered Variable kernels of operators
  the release has are not built yet.

An arm whose operators or nodes the reconstruction generates otherwise than the wheel's headers
say (``unlike_the_wheel``) is refused: there its generated code is not the release's.
"""
import re

from . import parts, taken_away

# outputs no CPU build compiles: CUDA's, and what only other generators read
NOT_COMPILED = re.compile(r"CUDA|HIP|cuda|hip|(^|/)(Declarations\.yaml|RegistrationDeclarations\.h|"
                          r"VariableTypeEverything\.cpp)$")
KERNEL_FILES = ("CPUType.cpp", "TypeDefault.cpp")
LEGACY_TH = ("LegacyTHFunctionsCPU.cpp",)
# a registration, where it starts: .registerOp<...>(Backend::CPU, "aten::abs.out(..." (mid-2019),
# .op(...schema("aten::abs.out(..." (1.4), .def("aten::abs.out(...", torch::dispatch(... or
# .impl("aten::abs.out", ... (1.5), m.impl("abs.out", ...) or m.impl_UNBOXED (1.6)
REGISTRATION = re.compile(r"\s*(\.op\(|\.registerOp<|\.def\(\s*\"aten::|\.impl(_UNBOXED)?\(\s*\"|m\.impl)")
SCHEMA = re.compile(r'"aten::([\w.]+)\(|m\.impl(?:_UNBOXED)?\("(?:aten::)?([\w.]+)"')
# a registration's kernel, and its signature where the registration spells it (<Tensor & (Tensor &,
# const Tensor &)...): 1.6's TORCH_FN(CPUType::abs_out) does not
KERNEL = re.compile(r"\b(?:CPUType|TypeDefault)::(\w+)")
SIGNATURE = re.compile(r"<[^<>]*?\(([^()]*)\)\s*[,>]")
# a definition, by its name as written (``CdistBackward::apply``: a backward node's is qualified)
DEFINITION = re.compile(r"^[A-Za-z_][^;{}()]*?\b((?:\w+::)*\w+)\s*\(([^;{}]*)\)\s*(const\s*)?\{\s*$")
# the backward nodes' definitions, as the autograd generator writes them (``torch/Functions.cpp``
# in 2019, ``torch/autograd/generated/Functions.cpp`` from 1.5), and the path the build compiles
BACKWARD_NODES = re.compile(r"^torch/(autograd/generated/)?Functions\.cpp$")
NODES_COMPILED_AS = "torch/csrc/autograd/generated/Functions.cpp"
AUTOGRAD_COMPILED_IN = "torch/csrc/autograd/generated/"  # where the build finds the autograd layer's files
NODE = re.compile(r"^def (\w+)::apply\(variable_list&&\)$")
VARIABLE_KERNELS = re.compile(r"^torch/VariableType(_\d+)?\.cpp$")
SAVE_GUARD = re.compile(r"^\s*if \(grad_fn->should_compute_output\((.+)\)\) \{$")
SAVE = re.compile(r"^\s*grad_fn->\w+ = SavedVariable\(")
# generated code compiled where no library of this project takes it yet, by what it is
ELSEWHERE = ((re.compile(r"^torch/python_"), ", a binding static to libtorch_python"),
             (re.compile(r"^torch/VariableType"), ", the autograd layer's Variable kernels"),
             (re.compile(r"^torch/register_aten_ops"), ", TorchScript's operator table"))


def as_compiled(data):
    """A generated file's text as a CPU build without ``USE_STATIC_DISPATCH`` compiles it: each
    ``#ifdef USE_STATIC_DISPATCH`` block's first branch dropped (an ``#ifndef``'s second)."""
    out, stack = [], []  # stack: for each open #if, whether its lines are dropped now
    for line in data.decode("utf-8", "replace").splitlines():
        directive = line.strip()
        if re.match(r"#\s*if", directive):
            static = re.match(r"#\s*if(n?)def\s+USE_STATIC_DISPATCH\b", directive)
            stack.append(("static", not static.group(1)) if static else ("other", False))
            if static:
                continue
        elif re.match(r"#\s*else\b", directive) and stack and stack[-1][0] == "static":
            stack[-1] = ("static", not stack[-1][1])
            continue
        elif re.match(r"#\s*endif\b", directive) and stack:
            if stack.pop()[0] == "static":
                continue
        if not any(dropped for _, dropped in stack):
            out.append(line)
    return "\n".join(out) + "\n"


def chunks(text):
    """A generated source file as its pieces, each keyed: a top-level function definition (from a
    line that opens it to the first line that is ``}``) by ``def <name>(<parameter types>)``, a
    registration (``REGISTRATION``, to the next piece or the semicolon that ends its chain) by
    ``reg <operator>``, and the rest by ``other``; blank lines left out, and the rest's line
    comments."""
    out, key, lines = {}, "other", []

    def close():  # blank lines apart: a definition taken away leaves its neighbours' blank lines;
        # between definitions, comments too (a template's comment above a helper compiles nothing)
        kept = [line for line in lines if line.strip() and not (key == "other" and line.lstrip().startswith("//"))]
        out[key] = out.get(key, "") + "".join(line + "\n" for line in kept)

    for line in text.splitlines():
        definition = definition_key(line)
        schema = SCHEMA.search(line)
        if definition or REGISTRATION.match(line) or (schema and key.startswith("def ")):
            close()
            key = definition or "reg ?"
            lines = []
        if schema and key == "reg ?":
            key = f"reg {schema.group(1) or schema.group(2)}"
        lines.append(line)
        # a definition ends at its closing brace, a registration chain at its semicolon
        if key.startswith("def ") and line == "}" or key.startswith("reg ") and line.rstrip().endswith(";"):
            close()
            key, lines = "other", []
    close()
    return out


def definition_key(line):
    """The key of the definition a line opens (``def <name>(<parameter types>)``), or None."""
    definition = DEFINITION.match(line)
    return f"def {definition.group(1)}({_types(definition.group(2))})" if definition else None


def _types(params):
    """A parameter list without its names: what tells overloads of one C++ name apart."""
    return ", ".join(re.sub(r"\s*\b\w+\s*(=.*)?$", "", p.strip()) or p.strip() for p in params.split(",")) \
        if params.strip() else ""


def compared(release, arm):
    """The generated files whose compiled text differs (``as_compiled``) between ``release`` and
    ``arm`` (name -> bytes), each as {"added", "removed", "changed"} chunk keys (``chunks``), or
    for a header its ``includer_code`` words ("" for declarations only) under "header"."""
    release, arm = _compiled_names(release), _compiled_names(arm)
    out = {}
    for name in sorted(set(release) | set(arm)):
        if NOT_COMPILED.search(name):
            continue
        before, after = (as_compiled(side[name]) if name in side else "" for side in (release, arm))
        if before == after:
            continue
        old, new = chunks(before), chunks(after)
        found = {"added": sorted(set(new) - set(old)), "removed": sorted(set(old) - set(new)),
                 "changed": sorted(k for k in set(old) & set(new) if old[k] != new[k])}
        found["taken_away"] = taken_away.runs(before, after)
        found["added_runs"] = taken_away.runs(after, before)
        if name.endswith(".h"):
            section = parts.whole_file_section(before.encode(), after.encode())
            out[name] = {"header": parts.includer_code(section, own_files_only=True),
                         "taken_away": found["taken_away"], "added_runs": found["added_runs"]}
            continue
        keys = found["added"] + found["removed"] + found["changed"]
        if not keys:  # blank lines only
            continue
        if VARIABLE_KERNELS.match(name):  # a change of when a node's inputs are saved, the release's a superset
            found["saved_more"] = sorted(k for k in found["changed"] if _saves_what_the_arm_saves(old[k], new[k]))
        if BACKWARD_NODES.match(name):
            found["calling"] = _nodes_calling([k for k in keys if k.startswith("def ") and not NODE.match(k)], old, new)
        index = _kernels({**old, **new})
        found["operators"] = sorted({k[4:] for k in keys if k.startswith("reg ") and k != "reg ?"} |
                                    {op for k in keys if k.startswith("def ") for op in index.get(k, ())})
        found["unnamed"] = [k for k in keys if k in ("reg ?", "other") or k.startswith("def ") and k not in index]
        out[name] = found
    return out


def registered(files):
    """The operators a side's generated files register, as compiled, under any key (an operator
    with a CUDA kernel alone, ``_use_cudnn_ctc_loss``, is one the side has)."""
    return {k[4:] for name, data in files.items() if name.endswith(".cpp")
            for k in chunks(as_compiled(data)) if k.startswith("reg ") and k != "reg ?"}


def _saves_what_the_arm_saves(release, arm):
    """Whether a Variable kernel of the release's differs from the arm's only in when it saves a
    backward node's inputs (``grad_fn->x_ = SavedVariable(...)``, guarded or not by
    ``should_compute_output``), and saves each the arm saves whenever the arm's would: the arm's
    node, interposed or the release's, then reads only what is saved (pr32062 on 1.5.0: the
    release saves ``exponent`` always, the arm only for ``self``'s gradient)."""
    def read(text):
        rest, saves, guard = [], {}, None
        for line in text.splitlines():
            opened = SAVE_GUARD.match(line)
            if opened:
                guard = opened.group(1)
            elif guard is not None and line.strip() == "}":
                guard = None
            elif SAVE.match(line):
                saves[line.strip()] = guard
            else:
                rest.append(line.strip())
        return rest, saves
    (release_rest, release_saves), (arm_rest, arm_saves) = read(release), read(arm)
    return release_rest == arm_rest and all(
        line in release_saves and release_saves[line] in (None, guard) for line, guard in arm_saves.items())


def _nodes_calling(helpers, old, new):
    """The backward nodes both sides have whose ``apply`` runs any of ``helpers`` (definition keys
    of the nodes' file), directly or through other helpers, on either side: a helper is local to
    the file (an anonymous namespace), so its callers compile the arm's copy only where rebuilt."""
    names = {k[4:k.index("(")].rsplit("::", 1)[-1] for k in helpers}
    reached = set()
    while names:
        wanted = re.compile(r"\b(%s)\s*\(" % "|".join(map(re.escape, sorted(names))))
        names = set()
        for side in (old, new):
            for key, text in side.items():
                if not key.startswith("def ") or key in reached or not wanted.search(text.split("{", 1)[-1]):
                    continue
                reached.add(key)
                if not NODE.match(key):
                    names.add(key[4:key.index("(")].rsplit("::", 1)[-1])
    return sorted(k for k in reached if NODE.match(k) and k in old and k in new)


def _kernels(pieces):
    """Which operators each definition of a file's pieces (``chunks``) is registered for: its key
    (``def name(types)``) -> operators, from the registrations that name it (by its signature where
    they spell it, else by its name alone: then every definition of that name)."""
    defined = {}
    for key in pieces:
        if key.startswith("def "):
            defined.setdefault(key[4:key.index("(")].rsplit("::", 1)[-1], []).append(key)
    out = {}
    for key, text in pieces.items():
        if not key.startswith("reg ") or key == "reg ?":
            continue
        signature = SIGNATURE.search(text)
        for name in set(KERNEL.findall(text)):
            wanted = f"def {name}({_types_only(signature.group(1))})" if signature else None
            for definition in defined.get(name, ()):
                if wanted is None or definition == wanted:
                    out.setdefault(definition, set()).add(key[4:])
    return out


def _types_only(types):
    """A registration's parameter types, spaced as ``_types`` spaces a definition's."""
    return ", ".join(t.strip() for t in types.split(",")) if types.strip() else ""


def _compiled_names(files):
    """Generated files by the name the build compiles them under: a 2019 ``gen.py`` writes the core
    headers into ``core_tmp/`` and compares them with the tree's checked-in ``core/`` copies, which
    are what is compiled (a fix changes both)."""
    return {name.replace("core_tmp/", "core/", 1): data for name, data in files.items()
            if not (name.startswith("core_tmp/") and name.replace("core_tmp/", "core/", 1) in files)}


def left_out(release, arm):
    """The generated files that differ but that no CPU build compiles (CUDA's, and those only other
    generators read), named for the record."""
    return sorted(n for n in set(release) | set(arm) if NOT_COMPILED.search(n) and release.get(n) != arm.get(n))


class Judged:
    """What one library must do for a fix's generated code (``judged``): the operators whose
    kernels it registers from the arm's declarations (``operators``), the backward nodes whose
    ``apply`` it interposes or, for an operator it adds, defines (``nodes``: their definitions'
    keys, in ``nodes_file``), the Variable kernels of the operators it adds, compiled from slices
    (``variable``: file -> definition keys), the generated headers it places for its own files
    (``headers``), the files whose differences the release's own code serves (``served``), the
    operators the arm lacks, left registered as the release has them (``lacking``), those it adds
    (``added``) and the files only their Python or TorchScript callers compile (``added_left_out``),
    and why it cannot (``refusal``, with whether a release on the fix's other side may take it:
    ``earlier``)."""

    def __init__(self, operators=(), headers=(), refusal="", earlier=False, nodes=(), nodes_file="", served=(),
                 lacking=(), added=(), variable=None, added_left_out=()):
        self.operators, self.headers, self.served = sorted(operators), sorted(headers), sorted(served)
        self.lacking, self.added, self.added_left_out = sorted(lacking), sorted(added), sorted(added_left_out)
        self.refusal, self.earlier = refusal, earlier
        self.nodes, self.nodes_file, self.variable = sorted(nodes), nodes_file, dict(variable or {})


def judged(differ, fix_in_release, operators_of=(frozenset(), frozenset())):
    """How the generated files that differ (``compared``) go (module doc); ``operators_of``: the
    operators the release's and the arm's kernel files register (``registered``)."""
    added, lacking = set(operators_of[1] - operators_of[0]), set(operators_of[0] - operators_of[1])
    added_nodes = {taken_away.key(n) for n in added}
    operators, headers, blocked, nodes, nodes_file, served = set(), [], [], [], "", []
    variable, added_left_out = {}, []
    for name, diff in differ.items():  # ATen's outputs by their own names, the autograd layer's under torch/
        if lacking and diff["taken_away"] is not None and taken_away.only_theirs(diff["taken_away"], lacking):
            # what only the release has, for the operators the arm lacks
            served.append(name)  # a header too: the arm's own files call nothing only the release's has
            continue
        theirs = added and diff["added_runs"] is not None and taken_away.only_theirs(diff["added_runs"], added)
        if theirs and "header" in diff:  # names added, which no includer the library does not rebuild calls
            headers.append(name)
            continue
        if theirs and VARIABLE_KERNELS.match(name):
            variable[name] = sorted(k for k in diff["added"] if k.startswith("def "))
            continue
        if theirs and not (name in KERNEL_FILES or BACKWARD_NODES.match(name)):
            added_left_out.append(name)  # a binding, a node's Python class, TorchScript's entry
            continue
        if "header" in diff:
            if diff["header"]:
                blocked.append(f"{name} changes inline code its includers compile ({diff['header']})")
            elif name.startswith("torch/"):  # the autograd layer's: what includes them is not rebuilt
                blocked.append(f"{name} changes declarations of the autograd layer")
            else:
                headers.append(name)
            continue
        if name in KERNEL_FILES:
            operators.update(set(diff["operators"]) - lacking)  # the release's registrations of those stay
            if diff["unnamed"]:
                blocked.append(f"{name}: {', '.join(diff['unnamed'][:3])} changes, and no registration names "
                               "its operator")
            continue
        if BACKWARD_NODES.match(name):
            keys = diff["added"] + diff["removed"] + diff["changed"]
            new_nodes = [k for k in diff["added"] if NODE.match(k) and taken_away.key(NODE.match(k).group(1))
                         in added_nodes]  # an added operator's node: its struct is added to Functions.h
            # a node added or taken away changes Functions.h too; the preamble, every node's code
            others = [k for k in keys if not k.startswith("def ") or NODE.match(k) and k not in diff["changed"]
                      and k not in new_nodes
                      and not (lacking and k in diff["removed"])]  # a node of an operator the arm lacks
            if others:
                blocked.append(f"{name}: {', '.join(others[:3])} (a backward node's formula or helper is "
                               "interposed, not a node added or taken away or the file's preamble)")
            nodes = sorted({*(k for k in diff["changed"] if NODE.match(k)), *diff["calling"], *new_nodes})
            nodes_file = name
            continue
        if diff.get("saved_more") == diff["changed"] and diff["changed"] and not diff["added"] + diff["removed"]:
            served.append(name)  # the release's kernels save all the arm's nodes read: theirs serve the arm
            continue
        if name in LEGACY_TH:
            needed = [k for k in diff["added"] + diff["changed"] if k.startswith("def ")]
            if needed:
                return Judged(refusal=f"the arm's generated TH wrappers ({name}: {', '.join(needed[:3])}) are code "
                                      "the release does not generate: the fix builds on changes the release lacks"
                                      if fix_in_release else
                                      f"the fix changes TH's generated wrappers ({name}: {', '.join(needed[:3])}), "
                                      "which a library does not compile yet", earlier=fix_in_release)
            continue
        what = next((words for pattern, words in ELSEWHERE if pattern.search(name)), "")
        blocked.append(f"{name}{what} ({', '.join((diff['changed'] + diff['added'] + diff['removed'])[:3])})")
    if blocked:
        return Judged(refusal="the fix changes generated code no library takes yet: " + "; ".join(blocked[:3])
                      + (f"; and {len(blocked) - 3} more" if len(blocked) > 3 else ""))
    return Judged(operators, headers, nodes=nodes, nodes_file=nodes_file, served=served, lacking=lacking,
                  added=added, variable=variable, added_left_out=added_left_out)


def unlike_the_wheel(checked, judged, version):
    """Why an arm's generated code (``judged``) cannot be the release's with the fix, or "": the
    reconstruction's generated headers (``checked``: its record, ``generated_headers.check``) name
    an operator or backward node it changes, or one it lacks, where they differ from the wheel's
    (issue 59, item 2): there the tree's generated code is not the release's. Names are compared
    as ``taken_away.key`` reads them (a node is its operator's: ``PowBackward1`` is ``pow``)."""
    if not (checked or {}).get("differ"):
        return ""
    if "names" not in checked:
        return (f"torch {version}'s reconstruction record says its generated headers differ from the wheel's, not "
                "where (made before it kept their names): make it again")
    theirs = {taken_away.key(n) for n in checked["names"]}
    ours = sorted({n for n in [*judged.operators, *judged.lacking, *(NODE.match(k).group(1) for k in judged.nodes)]
                   if taken_away.key(n) in theirs})
    return (f"torch {version}'s tree generates {', '.join(ours[:4])} otherwise than its wheel was generated (the "
            "release branch changed them after its branch point): the arm's generated code for them is not the "
            "release's with the fix") if ours else ""
