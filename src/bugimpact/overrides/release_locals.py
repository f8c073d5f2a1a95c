"""What the release keeps to itself, reached in its own binary: functions and DispatchStub kernel
pointers that a rebuilt file needs and the release's libraries define but do not export.

The release libraries are not stripped: their symbol table (``.symtab``) holds the local symbols
their dynamic table leaves out, measured on 1.4.0, 1.5.1 and 2.13 (``get_cpu_capability``,
``assert_no_partial_overlap``, ``quantized_copy_from_float_``, each stub's ``AVX2`` kernel
pointer). The override library defines each such symbol itself, bound when it loads to the
release's own copy at the library's load address plus the symbol's offset:

- a function: a jump to the release's function (so the faithful build runs the release's code);
- a DispatchStub's per-capability kernel pointer: the release's value, copied (it is set once, when
  the release loads); one the release does not have (a capability it was not built for) is null,
  as the release's own is.

Anything else, a local data object with state, is not taken over: the build compiles it from the
release's own files or refuses it, naming it.
"""
import re
import subprocess
from pathlib import Path

# a DispatchStub's per-capability kernel pointer, demangled
STUB_STATIC = re.compile(r"^at::native::DispatchStub<.*, at::native::(\w+)>::(DEFAULT|AVX|AVX2|AVX512|VSX|ZVECTOR)$")
FUNCTION_TYPES, DATA_TYPES = set("tTwWiI"), set("dDbBrRgGsSvV")


def symbol_table(libs):
    """mangled name -> (library file name, symbol type, offset) of every defined symbol of the
    release's libraries, local ones included (``nm`` reads the symbol table)."""
    table = {}
    for lib in libs:
        out = subprocess.run(["nm", "--defined-only", str(lib)], capture_output=True, text=True)
        for line in out.stdout.splitlines():
            fields = line.split(None, 2)
            if len(fields) == 3 and fields[2] not in table:
                table[fields[2]] = (Path(lib).name, fields[1], int(fields[0], 16))
    return table


def demangle(names):
    """The C++ names of mangled symbols, in order (``c++filt``)."""
    if not names:
        return []
    out = subprocess.run(["c++filt"], input="\n".join(names) + "\n", capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def resolve(missing, table):
    """Each missing symbol (mangled) the release's own binary gives: (entries, the rest). An
    entry says how the library takes it over (module doc): ``call``, ``value`` or ``null``."""
    entries, rest = [], []
    for mangled, name in zip(missing, demangle(missing)):
        found = table.get(mangled)
        stub = STUB_STATIC.match(name)
        entry = {"symbol": name, "mangled": mangled}
        if found and found[1] in FUNCTION_TYPES:
            entries.append({**entry, "how": "call", "lib": found[0], "offset": found[2]})
        elif found and stub:
            entries.append({**entry, "how": "value", "lib": found[0], "offset": found[2]})
        elif stub:  # the release was not built with this capability: its pointer is null too
            entries.append({**entry, "how": "null"})
        else:
            rest.append(name)
    return entries, rest


def source(entries):
    """The library's definitions of ``entries`` (``resolve``), bound when it loads."""
    lines = ["#include <link.h>", "#include <cstdint>", "#include <cstdio>", "#include <cstdlib>",
             "#include <cstring>",
             # hidden: the jumps address it relative to themselves, however the library is linked
             'extern "C" { __attribute__((visibility("hidden"))) '
             f'void* bugimpact_local_slots[{max(len(entries), 1)}]; }}',
             "namespace {",
             "struct Want { const char* lib; uintptr_t base; };",
             "int bugimpact_find(struct dl_phdr_info* info, size_t, void* data) {",
             "  Want* want = static_cast<Want*>(data);",
             "  const char* slash = std::strrchr(info->dlpi_name, '/');",
             "  if (std::strcmp(slash ? slash + 1 : info->dlpi_name, want->lib) != 0) return 0;",
             "  want->base = info->dlpi_addr; return 1; }",
             "uintptr_t bugimpact_base(const char* lib) {",
             "  Want want{lib, 0}; dl_iterate_phdr(bugimpact_find, &want);",
             '  if (!want.base) { std::fprintf(stderr, "bugimpact: %s is not loaded\\n", lib); std::abort(); }',
             "  return want.base; }",
             "}"]
    binds = []
    for i, entry in enumerate(entries):
        symbol = entry["mangled"]
        if entry["how"] == "call":
            lines.append(f'asm(".text\\n.globl {symbol}\\n.type {symbol}, @function\\n{symbol}:\\n'
                         f'  jmp *bugimpact_local_slots+{8 * i}(%rip)\\n.size {symbol}, .-{symbol}\\n");')
            binds.append(f'  bugimpact_local_slots[{i}] = reinterpret_cast<void*>(bugimpact_base("{entry["lib"]}") + '
                         f'{entry["offset"]}u);')
        else:
            lines.append(f'asm(".data\\n.globl {symbol}\\n.type {symbol}, @object\\n.size {symbol}, 8\\n'
                         f'.p2align 3\\n{symbol}:\\n  .quad 0\\n.text\\n");')
            lines.append(f'extern "C" void* bugimpact_local_value_{i} __asm__("{symbol}");')
            if entry["how"] == "value":
                binds.append(f'  bugimpact_local_value_{i} = *reinterpret_cast<void**>('
                             f'bugimpact_base("{entry["lib"]}") + {entry["offset"]}u);')
    # before the library's own static initialisers (its registrations): nothing calls these sooner
    lines += ["__attribute__((constructor(101))) static void bugimpact_bind_locals() {", *binds, "}"]
    return "\n".join(lines) + "\n"
