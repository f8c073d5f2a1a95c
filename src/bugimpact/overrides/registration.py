"""Which operators a rebuilt kernel file implements and the key each is registered under, and the
registration source that puts counting wrappers of them over the release's kernels (``build``
builds it).

The key follows the release's generated code, read from its ``native_functions.yaml`` and
``derivatives.yaml``: on torch 1.x an operator with no ``dispatch:`` and no derivative (its own or,
for an in-place or out variant, its function's, as the autograd generator matches them:
``framework.declarations.signature``) is called by ``VariableType`` directly, so its kernel goes
under the autograd key (a CPU-key kernel would never be called: ``VariableTensorId`` on 1.4 and
1.5, ``Autograd`` on 1.6); on 2.x the CPU key, or
``CompositeImplicitAutograd`` for an implicit composite. 1.6 and 2.x register through
``TORCH_LIBRARY_IMPL``, 1.5 through ``torch::import().impl``, 1.4 through ``RegisterOperators``. 1.3 keeps most operators on its
ATen dispatcher, whose table refuses a second kernel for a key: the library writes its kernel
into the release's table entry when it loads (``ATEN_TABLE``), and registers the operators 1.3
had moved to c10 (``aten_op_is_already_moved_to_c10``) as 1.4 does, the newer registration
winning. 1.2 keeps every operator on its ATen dispatcher, a kernel per backend and one for
Variables: written into its table alike (``ATEN_TABLE_1_2``). 1.1 calls a virtual function of the
CPU or the Variable ``Type``: the kernel is written into that class's virtual table
(``TYPE_TABLE_1_1``).
"""
import json
import re

from ..framework.declarations import native_name, split_arguments
from ..framework.paths import part_of

# the 1.x releases whose registration API ``registration_source`` writes (and every 2.x), in words too
REGISTERED_RELEASES = ((1, 1), (1, 2), (1, 3), (1, 4), (1, 5), (1, 6))
REGISTERING = ", ".join(f"{a}.{b}" for a, b in REGISTERED_RELEASES) + " and 2.x"
# torch 1.2's ATen dispatcher: an operator's table is its schema, a kernel per backend (TypeDefault's
# under ``Undefined``, which a backend's own kernel goes before) and its Variable kernel, which the
# table refuses to take twice: the library writes its kernel into the release's table (its layout
# checked against the class where it is compiled)
ATEN_TABLE_1_2 = r"""
namespace bugimpact {
struct ATenOpTableLayout {
  std::string schema;
  void* kernels[static_cast<int64_t>(at::Backend::NumOptions)];
  void* variable;
};
static_assert(sizeof(ATenOpTableLayout) == sizeof(at::ATenOpTable), "torch 1.2's ATenOpTable is its schema, a kernel per backend and its Variable kernel");
bool take(const char* schema, bool variable, void* kernel) {
  auto* table = reinterpret_cast<ATenOpTableLayout*>(const_cast<at::ATenOpTable*>(at::globalATenDispatch().getOpTable(schema)));
  TORCH_CHECK(table->schema == schema, "bugimpact: torch 1.2's table for ", schema, " is not laid out as expected");
  (variable ? table->variable : table->kernels[static_cast<int64_t>(at::Backend::CPU)]) = kernel;
  return true;
}
}
"""
# torch 1.1 dispatches an operator through a virtual function of its ``Type`` (``TypeExtendedInterface``):
# the CPU type's for a kernel called under the backend, the Variable type's for one its autograd
# layer calls directly. The library writes its kernel into that class's virtual table (every
# instance shares it) when it loads; the slot is the one C++ gives the operator's virtual function
# (the Itanium ABI: a pointer to a virtual member function holds 1 + the slot's offset in bytes),
# and the kernel takes the type as the member function's ``this`` (1.1 checks with ``AT_CHECK``).
TYPE_TABLE_1_1 = r"""
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>
namespace bugimpact {
template <typename Sig> struct MemberOf;
template <typename R, typename... A> struct MemberOf<R(A...)> {
  using type = R (at::TypeExtendedInterface::*)(A...) const; };
template <typename Sig, Sig* F> struct OfType;
template <typename R, typename... A, R (*F)(A...)> struct OfType<R(A...), F> {
  static R call(const at::TypeExtendedInterface*, A... a) { return F(std::forward<A>(a)...); } };
template <typename M> std::size_t slot(M member, const char* name) {
  struct { std::size_t ptr; std::ptrdiff_t adj; } raw;
  static_assert(sizeof(M) == sizeof(raw), "a pointer to a member function is two words (the Itanium C++ ABI)");
  std::memcpy(&raw, &member, sizeof(raw));
  AT_CHECK(raw.ptr & 1, "bugimpact: torch 1.1's ", name, " is not a virtual function of its Type");
  return (raw.ptr - 1) / sizeof(void*);
}
bool take(bool variable, std::size_t index, void* kernel) {
  auto& type = variable ? at::globalContext().getVariableType(at::Backend::CPU, at::ScalarType::Float)
                        : at::globalContext().getNonVariableType(at::Backend::CPU, at::ScalarType::Float);
  void** table = *reinterpret_cast<void***>(&type);
  auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  void* start = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(&table[index]) & ~(page - 1));
  AT_CHECK(mprotect(start, page, PROT_READ | PROT_WRITE) == 0, "bugimpact: torch 1.1's Type table is not writable");
  table[index] = kernel;
  mprotect(start, page, PROT_READ);  // read-only again, as the loader left it
  return true;
}
}
"""
# torch 1.3's ATen dispatcher: an operator's table (``ATenOpTable``) is its schema and a kernel per
# key, private; the layout is checked against the class where it is compiled. A kernel written
# into it is the one ``callUnboxed`` calls for that key from then on.
ATEN_TABLE = r"""
#include <ATen/core/OpsAlreadyMovedToC10.h>
namespace bugimpact {
struct ATenOpTableLayout {
  std::string schema;
  void* kernels[static_cast<int64_t>(c10::TensorTypeId::NumTensorIds)];
};
static_assert(sizeof(ATenOpTableLayout) == sizeof(at::ATenOpTable), "torch 1.3's ATenOpTable is its schema and its kernels");
bool on_c10(const char* name, const char* overload) {
  return at::aten_op_is_already_moved_to_c10(c10::OperatorName(name, overload));
}
bool take(const char* schema, c10::TensorTypeId key, void* kernel) {
  auto* table = reinterpret_cast<ATenOpTableLayout*>(const_cast<at::ATenOpTable*>(at::globalATenDispatch().getOpTable(schema)));
  TORCH_CHECK(table->schema == schema, "bugimpact: torch 1.3's table for ", schema, " is not laid out as expected");
  table->kernels[static_cast<int64_t>(key)] = kernel;
  return true;
}
// At exit, the registries taking their kernels back warn that each overwrites the other's, and
// 1.3's Python warning handler, called after Python is gone, crashes the process (seen: exit -11
// after every run's record was written): from then on warnings go nowhere.
void quiet(const c10::SourceLocation&, const char*) {}
struct QuietAtExit { ~QuietAtExit() { c10::Warning::set_warning_handler(&quiet); } };
}
"""


def registered_files(rebuild, route):
    """The rebuilt files whose operators the library registers: not the stub kernels (they go into
    the release's stubs) and not the files it interposes."""
    return sorted(p for p in rebuild if part_of(p) != "stub" and not route.interposed(p))


def registers_operators(version):
    """Whether torch ``version`` (a version's text) takes registered operators; a text that is not a
    version (a build of its own) is taken to: the build reads the installed torch's and says."""
    release = _major_minor(version)
    return release is None or release in REGISTERED_RELEASES or release[0] >= 2


def _major_minor(version):
    """(major, minor) of a version's text, or None for a text that is not a version."""
    match = re.match(r"(\d+)\.(\d+)", version or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


# the releases whose registration ``registration_source`` writes with the operator's schema
# (``RegisterOperators``' options on 1.4, ``torch::import().def`` on 1.5), so that an operator an
# arm adds is defined as it is registered; 1.2's and 1.3's ATen tables have no entry for it, and
# 1.6's ``m.impl`` defines no schema
DEFINES_SCHEMAS = ((1, 4), (1, 5))


def defines_schemas(version):
    """Whether the library's registration on torch ``version`` (a version's text) defines the
    schema of an operator the release does not have (``DEFINES_SCHEMAS``)."""
    return _major_minor(version) in DEFINES_SCHEMAS


def no_registration(version, files):
    """Why torch ``version`` cannot take ``files`` (``registered_files``), or "" where it can."""
    if not files or registers_operators(version):
        return ""
    return (f"torch {version}: no override registration is known for it ({REGISTERING} are), which its "
            f"op files need ({', '.join(sorted(files)[:3])})")


def registration_key(op, settings):
    """The key the release's generated code calls an operator's kernel under (module doc). An
    operator the release's autograd layer implements by hand (``manual``) keeps that kernel: the
    rebuilt one goes under the backend key, which the hand-written kernel calls on to (1.4's
    ``copy_``), or never does (``detach``: then the check finds it not called)."""
    if settings["major"] >= 2:
        if op["manual"]:
            return "CPU"
        return "CPU" if op["cpu_dispatch"] or op["composite"] == "explicit" else "CompositeImplicitAutograd"
    library = _library_api(settings)
    if op["cpu_dispatch"] or op["derivative"] or op["manual"]:
        return "CPU" if library else "CPUTensorId"
    return "Autograd" if library else "VariableTensorId"


def keyed_as_the_release(arm_ops, release_ops):
    """An arm's operators (``framework.declarations.operators`` of its own declarations, where its
    generated code changed), each keyed as the release's generated code calls it: its kernel is
    the one the arm's declarations name, but which key reaches it (a ``dispatch:`` entry, a
    derivative, a hand-written autograd kernel) is the release's to say, since the release's
    generated code is what runs (an arm that moves a kernel from the CPU key to the catch-all
    registers it under the CPU key, where the release's kernel stays)."""
    release = {op["name"]: op for op in release_ops}
    return [{**op, **{k: release[op["name"]][k] for k in ("cpu_dispatch", "derivative", "manual", "composite")}}
            if op["name"] in release else op for op in arm_ops]


def _library_api(settings):
    """Whether the release registers kernels through ``TORCH_LIBRARY_IMPL`` (1.6 on)."""
    return (settings["major"], settings["minor"]) >= (1, 6)


def defined_functions(nm_lines):
    """The ``at::native`` functions an object defines: (C++ name, parameter list) from ``nm -C``."""
    out = []
    for line in nm_lines:
        match = re.match(r"^[0-9a-f]+ [TW] at::native::(\w+)\((.*)\)$", line.strip())
        if match:
            out.append((match.group(1), match.group(2)))
    return out


def registrations(defined, ops, settings):
    """(op, key, parameter list) of each operator whose kernel a rebuilt file defines: a definition
    of the kernel's C++ name whose parameters are the schema's arguments, type for type (a file
    may define only another overload of a name, such as the named-tensor ``argmax(Tensor,
    Dimname, bool)`` beside ``argmax(Tensor, int?, bool)``); and what is left out, with why: an
    operator two definitions fit, or a definition of a kernel's name that fits none of its
    operators' schemas (the release's own kernel then stays, and the check's comparison with
    reach names an operator the workload runs through it)."""
    by_name = {}
    for name, params in defined:
        by_name.setdefault(name, []).append(params)
    chosen, skipped, used = [], [], set()
    for op in ops:
        types = _schema_types(op["schema"])
        fits = [p for p in by_name.get(op["cpp"], ()) if sorted(map(_arg_type, split_arguments(p))) == types]
        used.update((op["cpp"], p) for p in fits)
        if len(fits) > 1:
            skipped.append(f"{op['name']}: {len(fits)} definitions of {op['cpp']} fit its schema")
        elif fits:
            chosen.append((op, registration_key(op, settings), fits[0]))
    kernels = {op["cpp"] for op in ops}
    skipped += [f"{name}({params}): fits none of its operators' schemas" for name, params in defined
                if name in kernels and (name, params) not in used]
    return chosen, skipped


# an argument's type, from its schema type or its C++ type, the first pattern that matches (out
# arguments come first in 1.x's C++ and last in the schema: types are compared as multisets)
ARG_TYPES = (("dimname", r"Dimname"), ("tensor", r"Tensor"), ("intlist", r"int\[|ArrayRef<long>|IntArrayRef|SymInt\["),
         ("scalartype", r"ScalarType"), ("scalar", r"Scalar"), ("int", r"\bint\b|\blong\b|SymInt"),
         ("float", r"float|double"), ("bool", r"bool"), ("str", r"\bstr\b|string"))


def _arg_type(text):
    return next((name for name, pattern in ARG_TYPES if re.search(pattern, text)), "other")


def _schema_types(schema):
    inside = schema[schema.index("(") + 1:schema.rindex(") ->")]
    args = [arg.strip() for arg in split_arguments(inside) if arg.strip() not in ("*", "")]
    return sorted(_arg_type(arg.split()[0]) for arg in args)


def registration_source(chosen, settings):
    """The registration file: a counting wrapper of each kernel (its exact signature, taken from
    the definition it calls), registered under its key; the counts are the library's
    ``bugimpact_calls``."""
    names = [op["name"] for op, _, _ in chosen]
    lines = ["#include <ATen/ATen.h>", "#include <ATen/NativeFunctions.h>"]
    if _library_api(settings):
        lines.append("#include <torch/library.h>")
    else:
        lines.append("#include <ATen/core/op_registration/op_registration.h>")
    lines += [
        f'extern "C" {{ long long bugimpact_calls[{max(len(names), 1)}];',
        f'const char* bugimpact_ops[] = {{{", ".join(json.dumps(n) for n in names) or "nullptr"}}};',
        f"int bugimpact_op_count = {len(names)}; }}",
        "namespace bugimpact {",
        "template <typename Sig, Sig* F, int I> struct Counted;",
        "template <typename R, typename... A, R (*F)(A...), int I> struct Counted<R(A...), F, I> {",
        "  static R call(A... a) { __atomic_fetch_add(&bugimpact_calls[I], 1, __ATOMIC_RELAXED);",
        "                          return F(std::forward<A>(a)...); } };",
        "}"]
    wrappers = []
    for i, (op, key, params) in enumerate(chosen):
        fn = f"at::native::{op['cpp']}"
        args = ", ".join(f"std::declval<{p}>()" for p in split_arguments(params))
        # a name of its own: a macro (TORCH_FN) would split the template's arguments at commas
        lines.append(f"using bugimpact_w{i} = bugimpact::Counted<decltype({fn}({args}))({params}), &{fn}, {i}>;")
        wrappers.append((op, key, f"bugimpact_w{i}::call"))
    # 1.5 and 1.6 register an operator c10 does not box (``c10_full``) unboxed only, as their
    # generated code does: a boxed registration infers a schema, which reads Tensor? as Tensor
    # (seen: 1.6.0 refused bilinear's at load, pr37528)
    unboxed = {id(op) for op, _, _ in wrappers if settings["major"] == 1 and not op.get("c10_full")}
    if _library_api(settings):
        for key in sorted({k for _, k, _ in wrappers}):
            lines.append(f"TORCH_LIBRARY_IMPL(aten, {key}, m) {{")
            lines += [f'  m.impl_UNBOXED("{op["name"]}", &{w});' if id(op) in unboxed else
                      f'  m.impl("{op["name"]}", TORCH_FN({w}));' for op, k, w in wrappers if k == key]
            lines.append("}")
    elif (settings["major"], settings["minor"]) >= (1, 5):
        lines.append("static auto bugimpact_registry = torch::import()")
        # with its schema, as 1.5's TypeDefault does: an unboxed-only kernel infers none
        lines += [f'  .def({json.dumps("aten::" + op["schema"])}, torch::dispatch(c10::DispatchKey::{key}, '
                  + (f"c10::CppFunction::makeUnboxedOnly(&{w})))" if id(op) in unboxed else f"&{w}))")
                  for op, key, w in wrappers]
        lines[-1] += ";"
    elif (settings["major"], settings["minor"]) >= (1, 4):
        lines.append("static auto bugimpact_registry = torch::RegisterOperators()")
        lines += [f"  .op({_c10_options(op, 'c10::TensorTypeId', key, w)})" for op, key, w in wrappers]
        lines[-1] += ";"
    elif (settings["major"], settings["minor"]) == (1, 1):  # its Types' virtual tables (module doc)
        lines.append(TYPE_TABLE_1_1)
        for i, (op, key, w) in enumerate(wrappers):
            member = f"at::TypeExtendedInterface::{native_name(op['name'], op['schema'])}"
            lines.append(f"static bool bugimpact_r{i} = bugimpact::take({str(key == 'VariableTensorId').lower()}, "
                         f"bugimpact::slot(static_cast<bugimpact::MemberOf<decltype({w})>::type>(&{member}), "
                         f'"{member}"), reinterpret_cast<void*>(&bugimpact::OfType<decltype({w}), &{w}>::call));')
    elif (settings["major"], settings["minor"]) == (1, 2):  # its ATen table alone (module doc)
        lines.append(ATEN_TABLE_1_2)
        lines += [f'static bool bugimpact_r{i} = bugimpact::take({json.dumps("aten::" + op["schema"])}, '
                  f'{str(key == "VariableTensorId").lower()}, reinterpret_cast<void*>(&{w}));'
                  for i, (op, key, w) in enumerate(wrappers)]
    else:  # 1.3: its ATen table, or c10 where 1.3 had moved the operator (module doc)
        lines += [ATEN_TABLE, "static torch::RegisterOperators bugimpact_registry;"]
        for i, (op, key, w) in enumerate(wrappers):
            name, _, overload = op["name"].partition(".")
            lines.append(f'static bool bugimpact_r{i} = bugimpact::on_c10("aten::{name}", "{overload}") ? '
                         f"(std::move(bugimpact_registry).op({_c10_options(op, 'c10::TensorTypeId', key, w)}), "
                         "true) : "
                         f'bugimpact::take({json.dumps("aten::" + op["schema"])}, c10::TensorTypeId::{key}, '
                         f"reinterpret_cast<void*>(&{w}));")
        lines.append("static bugimpact::QuietAtExit bugimpact_quiet_at_exit;  // destroyed before the registry")
    return "\n".join(lines) + "\n"


def _c10_options(op, key_type, key, wrapper):
    """A ``RegisterOperators`` option (1.3, 1.4) that registers ``wrapper`` for ``op`` under ``key``."""
    return (f'torch::RegisterOperators::options().schema({json.dumps("aten::" + op["schema"])})'
            f".impl_unboxedOnlyKernel<decltype({wrapper}), &{wrapper}>({key_type}::{key})"
            ".aliasAnalysis(c10::AliasAnalysisKind::FROM_SCHEMA)")
