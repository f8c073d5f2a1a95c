"""Building a compiled fix's override library for a release wheel: the rebuilt kernel files, a
registration of every operator they implement under the key the release's generated code uses,
their CPU stub kernels put into the release's stubs when it loads (``stubs``), and what the
release keeps to itself, taken from its own binary or its own files.

Every way this was seen to go wrong was silent, so each is guarded here or by the check that runs
the builds (``overrides.check``):

- **the key.** On torch 1.x an operator with no ``dispatch:`` and no derivative is called by the
  autograd layer (``VariableType``) directly, so a kernel registered under the CPU key is never
  called; it must go where the release's generated code puts it. The key is read from the
  release's ``native_functions.yaml`` and ``derivatives.yaml`` (``registration``), and every
  registered kernel counts its calls: the check refuses a build whose operators the workload never
  called.
- **symbol interposition.** Where libtorch's symbols are global, a library's calls to its own
  functions can bind to the release's copies: it is linked ``-Bsymbolic``, and a canary build,
  instrumented to count entries into the rebuilt code, must have run it.
- **flags.** The release's own C++ standard, ABI and ``CXX_FLAGS`` (``torch.__config__``), its
  build type's optimisation, its parallel backend and the CPU capabilities its kernels were built
  for (read from its symbols), and for a stub kernel file the flags of the capability the release
  chooses (``stubs.kernel_flags``); each build records the flags it compiled with, the check compares
  them with the release's, and the faithful build (the release's own files, compiled the same
  way) must give the release's training bit for bit.
- **what the release keeps to itself.** Its libraries do not export every function a rebuilt file
  calls (``get_cpu_capability``, a stub's per-capability kernels, helpers of other files): the
  library takes the release's own copies from its symbol table (``release_locals``), and compiles
  what is not even there from the release's own files (``support``); what neither gives refuses
  the build, named. ``DEFINE_DISPATCH`` lines are not compiled again (the release defines each
  stub once).

``release_build`` says how the release was built and compiles and links as it was.
"""
import hashlib
import re
import shutil
import subprocess
from pathlib import Path

from ..framework import cpp
from ..framework.declarations import manual_operators, op_name, operators
from ..framework.paths import part_of
from ..harness.files import sha256_file
from . import release_build, release_locals, stubs
from .interposed import REGISTERS, interposition, no_load_time_registrations, taken_over, version_script
from .kernel_tree import not_as_made
from .objects import the_release_in_the_arm
from .parts import Route
from .registration import (
    defined_functions,
    keyed_as_the_release,
    no_registration,
    registered_files,
    registration_source,
    registrations,
)
from .release_build import (
    LACKS,
    NOT_AS_BUILT,
    NOT_THE_RELEASE,
    BuildRefused,
    compile_flags,
    compile_job,
    compiler,
    flags_of,
    link,
    missing_headers,
    provide_headers,
    release_exports,
    release_flags,
    release_settings,
    run_all,
    stand_in_named,
    torch_libs,
    undefined_symbols,
)
from .release_source import STAND_IN, closure

# the canary's instrumentation: entries into the rebuilt code, in all and per function (its
# address, in an open-addressing table the harness reads back: ``harness.overrides.counts``)
HOOKS = r"""
extern "C" {
long long bugimpact_entries = 0;
int bugimpact_fn_slots = 8192;  /* a power of two */
void* bugimpact_fn[8192];
long long bugimpact_fn_calls[8192];
__attribute__((no_instrument_function)) void __cyg_profile_func_enter(void* fn, void*) {
  __atomic_fetch_add(&bugimpact_entries, 1, __ATOMIC_RELAXED);
  unsigned long start = ((unsigned long)fn >> 4) * 2654435761ul;
  for (int i = 0; i < 8192; i++) {
    int slot = (int)((start + i) & 8191);
    void* seen = __atomic_load_n(&bugimpact_fn[slot], __ATOMIC_ACQUIRE);
    if (seen == 0) {
      void* empty = 0;
      if (__atomic_compare_exchange_n(&bugimpact_fn[slot], &empty, fn, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        seen = fn;
      else
        seen = empty;
    }
    if (seen == fn) { __atomic_fetch_add(&bugimpact_fn_calls[slot], 1, __ATOMIC_RELAXED); return; }
  }
}
__attribute__((no_instrument_function)) void __cyg_profile_func_exit(void*, void*) {}
}
"""
# an interposed library registers nothing: its calls are counted by the canary, per function
NO_REGISTRATIONS = r"""
extern "C" { int bugimpact_op_count = 0; long long bugimpact_calls[1]; const char* bugimpact_ops[1]; }
"""


def build(compiled, python, folder, log, tree=None, threads=None, cache=None):
    """The override libraries of a compiled one-fix arm, in ``folder``: ``arm`` (the arm's files),
    ``faithful`` (the release's own files) and ``canary`` (the release's, instrumented), each with
    the same registrations; one library does each route the fix's files take (``parts.Route``:
    its op files' operators registered, its TH and infrastructure files interposed, exporting only
    what they take over, ``interposed``). ``compiled``: the artifact manifest's ``kernels`` part
    (``arm.prepare``); ``tree``: the release's whole tree (``clone_tree.open_tree``), from
    which what the rebuilt files need that the release neither exports nor holds in its symbol
    table (``release_locals``) is compiled in (``support``); ``threads``: how many compilers run
    at once (the job's threads); ``cache``: a folder of compiled objects kept by what was
    compiled (``objects``), which the fixes of a release and a remade override share. Returns the
    runtime's ``override`` record; raises ``BuildRefused`` naming what failed."""
    cxx, version = compiler()
    settings = release_settings(python)
    route = Route.read(compiled.get("route"), compiled.get("interposed_parts"))
    stub_files = [p for p in compiled["rebuild"] if part_of(p) == "stub"]
    interposed = [p for p in compiled["rebuild"] if route.interposed(p)]
    registering = registered_files(compiled["rebuild"], route)
    refused = no_registration(settings["version"], registering)
    if refused:  # an artifact made before the artifact step refused it
        raise BuildRefused(refused)
    libs = torch_libs(settings["lib"])
    kernel, defined = (stubs.kernel_flags(settings), stubs.release_stubs(libs)) if stub_files else ([], set())
    source_tree = Path(compiled["tree"])
    edited = not_as_made(compiled)
    if edited:
        raise BuildRefused(f"{edited[0][0]} is not the file the artifact was made with ({edited[0][1]}): "
                           "`bugimpact retry-failed` makes the artifact again")
    folder = Path(folder).resolve()  # a run loads its library from wherever it runs
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    include = source_tree / "include"
    # headers neither the wheel nor the release's source holds (sleef.h, MKL's), before the
    # source's empty stand-ins for them
    third_party = folder / "shared" / "third-party"
    sides = {"arm": "arm", "faithful": "release", "canary": "release"}
    jobs = []
    for name, side in sides.items():
        for path in compiled["rebuild"]:
            # the tree's root after ATen's: a placed c10 or torch/csrc header before the wheel's
            flags = compile_flags(settings, (source_tree / side / "aten" / "src", source_tree / side, third_party,
                                             include))
            data = (source_tree / side / path).read_bytes()
            if path in stub_files:
                flags += kernel
                data = stubs.installing(data, path, defined)
            if name == "canary":
                flags += CANARY_FLAGS
            jobs.append(compile_job(cxx, name, path, data, folder, flags))
    no_load_time_registrations(interposed, source_tree / "release")
    source = compiled.get("source") or {}
    kept, provided = _compiled(jobs, source.get("standins", ()), settings, libs, third_party, log, threads, cache,
                               NOT_THE_RELEASE if source.get("reconstructed", True) else NOT_AS_BUILT)
    same = the_release_in_the_arm(jobs, kept, {u for p in compiled["changed"] for u in compiled["units"].get(p, [p])})
    if same:
        raise BuildRefused(same)
    shared = folder / "shared"
    chosen, skipped, overloads, arm_chosen, register = _registration_objects(
        compiled, route, sorted({*registering, *stub_files}), bool(stub_files), folder, source_tree, settings, cxx,
        include, log, threads)
    objects = {name: [str(folder / name / p) + ".o" for p in compiled["rebuild"]] for name in sides}
    # the arm's objects too: the fix may call what the release's own files do not
    extra, taken, support, support_jobs = _closure(cxx, [objects[name] + [register[name]] for name in
                                                         ("faithful", "arm")], libs, folder, compiled, tree, settings,
                                                   log, threads, cache)
    # every op (or TH, or infrastructure) object of a build alike, and every stub kernel's
    compiled_with = {name + (" kernels" if path in stub_files else ""): flags_of(cmd) for name, path, cmd in jobs}
    if support:
        compiled_with["support"] = flags_of(support_jobs[0][2])
    pairs = [((source_tree / "release" / p).read_bytes(), (source_tree / "arm" / p).read_bytes())
             for p in compiled["changed"]]
    own = {name: [str(folder / name / p) + ".o" for p in interposed] for name in sides}  # interposed files'
    # the canary's objects too: instrumented, every function it enters has a copy of its own (an
    # inline one the optimiser put into its callers elsewhere)
    changed, interposed_count = interposition(objects["faithful"] + objects["canary"], objects["arm"], libs, pairs,
                                              own["faithful"] + own["arm"])
    exported = release_exports(libs) if interposed else set()
    out = {}
    for name in sides:
        library = folder / f"{name}.so"
        hooks = [str(shared / "hooks.o")] if name == "canary" else []
        # preloaded before torch: its libraries found where they are, as they are when loaded
        # after, and only what it means to take over exported (``interposed``)
        where = [f"-Wl,-rpath,{settings['lib']}",
                 version_script(shared / f"{name}.map", taken_over(own[name], exported))] if interposed else []
        link(cxx, objects[name] + [register[name]] + extra + hooks, libs, library, log, where)
        out[name] = {"library": str(library), "sha256": sha256_file(library)}
    return {"route": str(route), "changed_functions": changed, "interposed_files": interposed,
            "interposed": interposed_count, "stubs": stubs.filled(source_tree / "release", stub_files, defined),
            "kernel_flags": kernel, "headers_provided": provided, "compiler": version,
            "flags": compile_flags(settings)[:-len(settings["include"])],
            "canary_flags": list(CANARY_FLAGS), "release_flags": release_flags(settings),
            "link_flags": list(release_build.LINK_FLAGS),  # read where link() reads them
            "include_order": ["<tree>/<arm or release>/aten/src", "<tree>/<arm or release>",
                              "<override>/shared/third-party", "<tree>/include",
                              *settings["include"]],
            "torch": settings["version"], "capability": settings["capability"],
            "release_compiler": settings["compiler"], "parity": settings["parity"],
            "registered": [{"op": op["name"], "key": key, **({"manual": True} if op["manual"] else {})}
                           for op, key, _ in chosen], "overloads": overloads,
            **({"registered_by_the_arm": [{"op": op["name"], "key": key, "kernel": op["cpp"]}
                                          for op, key, _ in arm_chosen]} if arm_chosen is not None else {}),
            "not_registered": skipped, "release_locals": taken, "support": support,
            "compiled_with": compiled_with, "libraries": out}


def _registration_objects(compiled, route, registering, fills_stubs, folder, source_tree, settings, cxx, include,
                          log, threads):
    """The registration each library links, compiled into ``<folder>/shared`` with the canary's
    hooks: the release's operators (``_registered``), and, where the arm's generated code changed
    (``compiled["generated"]``), the arm's own (its declarations' kernels, compiled against its
    generated headers). Returns (chosen, skipped, overloads, the arm's chosen or None, the
    registration object of each library)."""
    shared = folder / "shared"
    shared.mkdir(exist_ok=True)
    arm_chosen = None
    if route.registers:
        chosen, skipped, overloads = _registered(registering, folder / "faithful", source_tree / "yaml", settings,
                                                 fills_stubs)
        (shared / "register.cpp").write_text(registration_source(chosen, settings))
        if compiled.get("generated"):  # the arm's generated code calls the kernels its declarations name
            arm_chosen, _, _ = _registered(registering, folder / "arm", source_tree / "arm-yaml", settings, True,
                                           keys=source_tree / "yaml")
            _every_generated_kernel(compiled["generated"], arm_chosen)
            (shared / "register-arm.cpp").write_text(registration_source(arm_chosen, settings))
    else:
        chosen, skipped, overloads = [], [], {}
        (shared / "register.cpp").write_text(NO_REGISTRATIONS)
    (shared / "hooks.cpp").write_text(HOOKS)
    registers = {"register": "release", **({"register-arm": "arm"} if arm_chosen is not None else {})}
    run_all([("shared", f"{name}.cpp", [cxx, *compile_flags(settings, includes=(source_tree / side / "aten" / "src",
                                                                                include)),
                                        "-c", str(shared / f"{name}.cpp"), "-o", str(shared / f"{name}.o")])
             for name, side in registers.items()]
            + [("shared", "hooks.cpp", [cxx, "-O2", "-fPIC", "-c", str(shared / "hooks.cpp"),
                                        "-o", str(shared / "hooks.o")])], log, threads)
    register = {name: str(shared / ("register-arm.o" if name == "arm" and arm_chosen is not None else "register.o"))
                for name in ("arm", "faithful", "canary")}
    return chosen, skipped, overloads, arm_chosen, register


def _registered(rebuild, objects, yamls, settings, fills_stubs=False, keys=None):
    """The operators the rebuilt files' objects define, each with its key (``registration``), what
    is left out, and every overload the release declares of their names (a profile names an
    operator without its overload: the check needs to know which it may have called); refused
    where they define none and put no kernel into a stub (``fills_stubs``). ``keys``: the
    release's declarations, where ``yamls`` are an arm's (its generated code changed): the kernel
    is the one the arm's declarations name, its key the one the release's generated code calls."""
    ops = _operators(yamls) if keys is None else keyed_as_the_release(_operators(yamls), _operators(keys))
    defined = []
    for path in rebuild:
        nm = subprocess.run(["nm", "-C", "--defined-only", str(objects / path) + ".o"],
                            capture_output=True, text=True, check=True)
        defined += defined_functions(nm.stdout.splitlines())
    chosen, skipped = registrations(defined, ops, settings)
    if not chosen and not fills_stubs:
        raise BuildRefused(f"the rebuilt files ({', '.join(rebuild)}) define no operator of the release's "
                           "native_functions.yaml")
    bases = {op_name(op["name"]) for op, _, _ in chosen}
    overloads = {base: sorted(op["name"] for op in ops if op_name(op["name"]) == base) for base in sorted(bases)}
    return chosen, skipped, overloads


def _operators(yamls):
    generator = yamls / "tools/autograd/gen_variable_type.py"
    return operators((yamls / "aten/src/ATen/native/native_functions.yaml").read_bytes(),
                     (yamls / "tools/autograd/derivatives.yaml").read_bytes(),
                     manual_operators(generator.read_bytes()) if generator.exists() else ())


def _every_generated_kernel(generated, chosen):
    """Refuses an arm whose generated code calls another kernel for an operator (``generated``:
    ``arm.generated_for``'s) that its library does not register: that operator would run the
    release's kernel in the arm."""
    missing = sorted(set(generated["operators"]) - {op["name"] for op, _, _ in chosen})
    if missing:
        raise BuildRefused(f"the arm's generated code calls another kernel for {', '.join(missing[:4])}"
                           f"{' ...' if len(missing) > 4 else ''}, which no rebuilt file of the arm defines: "
                           "its library would leave the release's kernel there")


CANARY_FLAGS = ("-finstrument-functions", "-finstrument-functions-exclude-file-list=/include/")
SUPPORT_ROUNDS = 4  # a support file may need functions of others the release keeps to itself


def _compiled(jobs, standins, settings, libs, where, log, threads, cache, faithful_fails=NOT_THE_RELEASE):
    """``run_all`` of ``jobs`` once the third-party headers they need that no source holds are
    made under ``where`` (``provide_headers``: SLEEF's, MKL's) or left to their empty stand-ins
    (``standins``); a failure on a stand-in names that header (``stand_in_named``). The canary's
    files are the faithful build's: not searched twice. Returns what ``run_all`` kept, and the
    headers made with what each came from; ``faithful_fails``: ``run_all``'s."""
    needed = missing_headers([job for job in jobs if job[0] != "canary"], standins)
    provided = provide_headers(needed, settings, libs, where, standins)
    try:
        return run_all(jobs, log, threads, cache, faithful_fails), provided
    except BuildRefused as exc:
        raise BuildRefused(stand_in_named(str(exc), [s for s in standins if s not in provided])) from None


def _closure(cxx, builds, libs, folder, compiled, tree, settings, log, threads, cache):
    """What the rebuilt files need that the release does not export: the release's own local
    functions and stub pointers, taken over in its binary (``release_locals``), and the release's own
    files that define the rest, compiled in (``support``), round by round; ``builds``: the objects
    of each library (what any of them misses, all of them get). Returns (extra
    objects, the locals taken over, the support files with the symbols each was compiled in
    for, their compile jobs); refuses what cannot be had, naming it."""
    extra, support, done, support_jobs, taken = [], [], set(compiled["rebuild"]), [], []
    flags = compile_flags(settings, includes=(Path(compiled["tree"]) / "release" / "aten" / "src",
                                              Path(compiled["tree"]) / "include"))
    table = None
    for _ in range(SUPPORT_ROUNDS + 1):
        needs = [set(undefined_symbols(cxx, objects + extra, libs, folder / "probe.so")) for objects in builds]
        missing = sorted(set().union(*needs))
        if not missing:
            break
        table = table or release_locals.symbol_table(libs)
        entries, others = release_locals.resolve(missing, table)
        taken += entries
        if entries:
            name = f"locals{len(taken)}"
            (folder / "shared" / f"{name}.cpp").write_text(release_locals.source(entries))
            run_all([("shared", f"{name}.cpp", [cxx, *flags, "-c", str(folder / "shared" / f"{name}.cpp"),
                                                "-o", str(folder / "shared" / f"{name}.o")])], log, threads)
            extra.append(str(folder / "shared" / f"{name}.o"))
        if not others:
            continue
        found = _defining_files(tree, others, done) if tree is not None else {}
        if not found:
            unexported = ", ".join(others[:4]) + (" ..." if len(others) > 4 else "")
            if not needs[0] & {m for m, n in zip(missing, release_locals.demangle(missing)) if n in others}:
                raise BuildRefused(f"the arm calls what torch {settings['version']} does not have (not exported, "
                                   f"not in its symbol table, in none of its files): {unexported}: {LACKS}")
            raise BuildRefused(f"the release does not export what the rebuilt files need, nor holds it in "
                               f"its symbol table: {unexported}"
                               + ("" if tree is not None else " (no tree of the release's source to compile "
                                  "it from: the release's source came from a shipped archive or GitHub; "
                                  "set artifacts.onefix.clone to a clone)"))
        headers = folder / "support-include"  # what the support files include that the wheel lacks
        wheel_include = Path(settings["include"][0])
        shipped = {str(h.relative_to(wheel_include)) for h in wheel_include.rglob("*") if h.is_file()}
        includes_found, standins = closure(tree.read_bytes, sorted(found), shipped, tree.include_roots)
        for name, data in [*includes_found.items(), *((name, STAND_IN) for name in standins)]:
            (headers / name).parent.mkdir(parents=True, exist_ok=True)
            (headers / name).write_bytes(data)
        jobs = [compile_job(cxx, "support", path, data, folder, [*flags, f"-I{headers}"])
                for path, (data, _) in sorted(found.items())]
        _compiled(jobs, standins, settings, libs, headers, log, threads, cache)
        support_jobs += jobs
        for path, (data, symbols) in sorted(found.items()):
            extra.append(str(folder / "support" / path) + ".o")
            support.append({"file": path, "sha256": hashlib.sha256(data).hexdigest(), "for": symbols[:8]})
            done.add(path)
    else:
        raise BuildRefused(f"the release does not export what the rebuilt files need, and "
                           f"{SUPPORT_ROUNDS} rounds of its own files did not give it all")
    return extra, [{k: v for k, v in e.items() if k != "mangled"} for e in taken], support, support_jobs


def _defining_files(tree, symbols, done):
    """The release's files (ATen's C++ outside its CUDA and test folders and the generators'
    templates, not yet compiled in) that define the functions ``symbols`` name, by their
    unqualified names and definitions (``framework.cpp``); a file that registers operators when it
    loads is never one. Returns path -> (bytes, the symbols it defines)."""
    names = {}
    for symbol in symbols:
        match = re.search(r"(~?\w+)(?:<[^()]*>)?\(", symbol) or re.search(r"(\w+)$", symbol)
        if match:
            names.setdefault(match.group(1), []).append(symbol)
    if not names:
        return {}
    listing = subprocess.run(["git", "-C", tree.clone, "grep", "-l", "-w", "-F", *sum((["-e", n] for n in names), []),
                              tree.commit, "--", "aten/src/ATen/*.cpp", "aten/src/TH/*.cpp"],
                             capture_output=True, text=True)
    found = {}
    for path in sorted(line.split(":", 1)[1] for line in listing.stdout.splitlines() if ":" in line):
        if path in done or re.search(r"/(cuda|cudnn|miopen|hip|test|mkldnn|xnnpack|vulkan|templates)/|"
                                     r"/native/cpu/|_test\.cpp$", path):
            continue
        data = tree.read_bytes(path)
        if not data or REGISTERS.search(data):
            continue
        defines = {fn.name for fn in cpp.functions(data.decode("utf-8", "replace")) if not fn.static}
        hits = [s for name, syms in names.items() if name in defines for s in syms]
        if hits:
            found[path] = (data, hits)
    return found


