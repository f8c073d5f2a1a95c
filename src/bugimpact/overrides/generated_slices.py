"""The slices of generated files an override library compiles, where ``generated_code.judged``
says which of their definitions an arm needs: the backward nodes' file (``sliced``) and the
autograd layer's Variable kernels of the operators an arm adds (``sliced_kernels``)."""
import re

from .generated_code import NODE, NODES_COMPILED_AS, REGISTRATION, SCHEMA, definition_key


def sliced(text, nodes):
    """The generated backward nodes' file (``BACKWARD_NODES``) as the library compiles it: its
    preamble and helpers, and of its nodes' definitions only ``nodes`` (``judged``'s keys); the
    header it includes from its own directory named by its path in the tree, where the build
    finds the wheel's. What the library takes over is those nodes' ``apply``: libtorch exports
    each and fills the node's vtable through a relocation against the symbol."""
    out, dropping = [], False
    for line in text.splitlines():
        key = definition_key(line)
        if key:
            dropping = bool(NODE.match(key)) and key not in nodes
        if not dropping:
            out.append(re.sub(r'^#include "(Functions\.h)"', rf'#include "{NODES_COMPILED_AS[:-4]}.h"', line))
        elif line == "}":
            dropping = False
    return "\n".join(out) + "\n"


def sliced_kernels(text, keys, operators):
    """A generated Variable kernels' file (``VARIABLE_KERNELS``) as the library compiles it for the
    operators an arm adds: its preamble, of its definitions only ``keys`` (``judged``'s
    ``variable``), and of its registration chain only the entries of ``operators``, which register
    those kernels when the library loads. Of the release's side, the same slice is the preamble and
    an empty chain."""
    out, dropping, entry = [], False, None

    def close(entry, ends):
        named = any((m.group(1) or m.group(2)) in operators for line in entry for m in SCHEMA.finditer(line))
        if named:
            out.extend(entry)
        if ends and not (named and entry[-1].rstrip().endswith(";")):
            out[-1] = out[-1].rstrip().rstrip(";") + ";"  # the chain still ends where it did

    for line in text.splitlines():
        key = definition_key(line)
        if key and entry is None:
            dropping = key not in keys
        if dropping:
            dropping = line != "}"
            continue
        if REGISTRATION.match(line):
            if entry:
                close(entry, False)
            entry = []
        if entry is None:
            out.append(line)
            continue
        entry.append(line)
        if line.rstrip().endswith(";"):
            close(entry, True)
            entry = None
    return "\n".join(out) + "\n"
