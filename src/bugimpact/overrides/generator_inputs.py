"""What a fix changes in the code generators' inputs, read from its diff alone: the first thing a
generated-code arm needs to know (issue 59), and the words a codegen refusal gives until one is
built. Each change is one of ``KINDS``, with the operator or file it is of:

- ``native_functions.yaml``: an operator's schema (its ``func:`` line) added, taken away or
  changed; or, of a schema both sides keep, its ``dispatch:`` entries or another key;
- ``derivatives.yaml``: an entry's signature (its ``name:`` line) added, taken away or changed;
  or a formula of an entry both sides keep;
- the legacy TH declarations (``.cwrap``, ``nn.yaml``), the generators and their templates (those
  of the Python bindings apart), and the generated headers the tree checks in, each as a whole.

An operator's schema changed is blocked whatever is built: the dispatcher holds one schema per
name and overload, and the release's is registered already (``refusals``).
"""
import re

from .parts import hunks

# hardest first: the first kind of a fix's changes names it
KINDS = ("the Python bindings' generator", "the generators", "an existing operator's schema changed", "an operator removed", "an operator added",
         "a derivative's signature", "TH declarations (cwrap, nn.yaml)", "a dispatch entry or key",
         "a derivative formula", "generated headers checked in")
# what the arm's generated code may change and one library still take (``generated_code``: the
# kernel a key calls, registered from the arm's declarations; a backward node's formula or a
# helper of its, interposed); whether it does, the generated code itself says, the generators'
# own changes too
ONE_LIBRARY = ("the generators", "a dispatch entry or key", "TH declarations (cwrap, nn.yaml)",
               "generated headers checked in", "a derivative formula",
               # an operator the arm takes away is the release's, left registered; one it adds is
               # refused by the generated code, which says which way the arm goes
               "an operator added", "an operator removed", "a derivative's signature")
# the kinds that say which kernel a key calls: the kernels are the fix's op files'
CALLS_KERNELS = ("a dispatch entry or key", "TH declarations (cwrap, nn.yaml)")
# what generates only the Python bindings: compiled into libtorch_python as static functions, which
# no library takes over (``generated_code.ELSEWHERE``)
BINDINGS = re.compile(r"^tools/autograd/(templates/python_|gen_python_functions)")
GENERATORS = re.compile(r"^tools/|^torchgen/|^aten/src/ATen/(templates/|function_wrapper|gen\.py|native_parse)")
CHECKED_IN = re.compile(r"^aten/src/ATen/core/(TensorBody|TensorMethods|Tensor)\.h$")
ENTRY = re.compile(r"^- (func|name):\s*([\w.]+)\s*\((.*)$")


def changes(path, section):
    """The generator-input changes of one file's diff section: (kind, what) pairs, in order."""
    name = path.rsplit("/", 1)[-1]
    if name == "native_functions.yaml":
        return _entries(section, "operator")
    if name == "derivatives.yaml":
        return _entries(section, "derivative")
    if name.endswith(".cwrap") or name == "nn.yaml":
        return [("TH declarations (cwrap, nn.yaml)", path)]
    if CHECKED_IN.search(path):
        return [("generated headers checked in", path)]
    if BINDINGS.search(path):
        return [("the Python bindings' generator", path)]
    if GENERATORS.search(path):
        return [("the generators", path)]
    return []


def one_library(found):
    """Whether a fix's generator-input changes (``changes``) are all of kinds whose generated code
    one library may take (``ONE_LIBRARY``)."""
    return all(kind in ONE_LIBRARY for kind, _ in found)


def calls_kernels(found):
    """Whether a fix's generator-input changes say which kernel an operator's key calls
    (``CALLS_KERNELS``), which only the fix's own op files can define."""
    return any(kind in CALLS_KERNELS for kind, _ in found)


def words(found):
    """A fix's generator-input changes (``changes`` of its files), hardest first, in words."""
    by_kind = {}
    for kind, what in found:
        by_kind.setdefault(kind, []).append(what)
    return "; ".join(f"{kind} ({', '.join(sorted(set(by_kind[kind]))[:3])}"
                     f"{' ...' if len(set(by_kind[kind])) > 3 else ''})" for kind in KINDS if kind in by_kind)


def _entries(section, of):
    """The changes of a YAML list of entries (``- func:`` or ``- name:``), by the entry each
    changed line is of: an entry line on one side only is added or taken away, on both with
    other text changed; any other line changes a key of the entry it follows."""
    out = []
    # git names the entry a hunk begins within after its @@ (the last line that is not indented)
    befores = [ENTRY.match(h) for h in re.findall(r"(?m)^@@[^@]*@@ ?(.*)$", section)]
    for index, sides in enumerate(hunks(section)):
        before = befores[index].group(2) if index < len(befores) and befores[index] else None
        heads = {side: {} for side in sides}
        keyed = {side: [] for side in sides}
        for side, lines in sides.items():
            current = before
            for line, changed in lines:
                entry = ENTRY.match(line)
                if entry:
                    current = entry.group(2)
                    if changed:
                        heads[side][current] = line.strip()
                elif changed and line.strip() and not line.strip().startswith("#"):
                    keyed[side].append(current)
        for name in sorted(set(heads["-"]) | set(heads["+"])):
            if name not in heads["+"]:
                out.append(("an operator removed" if of == "operator" else "a derivative's signature", name))
            elif name not in heads["-"]:
                out.append(("an operator added" if of == "operator" else "a derivative's signature", name))
            elif heads["-"][name] != heads["+"][name]:
                out.append(("an existing operator's schema changed" if of == "operator"
                            else "a derivative's signature", name))
        for name in keyed["-"] + keyed["+"]:
            if name in heads["-"] or name in heads["+"]:
                continue  # said with its entry
            out.append(("a dispatch entry or key" if of == "operator" else "a derivative formula",
                        name or "an entry above the hunk"))
    return list(dict.fromkeys(out))  # a key changed on both sides is one change
