"""Building a compiled fix's override library for a release wheel: the rebuilt kernel files, a
registration of every operator they implement under the key the release's generated code uses,
and what the release keeps to itself, taken from its own binary or its own files.

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
  for (read from its symbols); each build records the flags it compiled with, the check compares
  them with the release's, and the faithful build (the release's own files, compiled the same
  way) must give the release's training bit for bit.
- **what the release keeps to itself.** Its libraries do not export every function a rebuilt file
  calls (``get_cpu_capability``, a stub's per-capability kernels, helpers of other files): the
  library takes the release's own copies from its symbol table (``release_locals``), and compiles
  what is not even there from the release's own files (``support``); what neither gives refuses
  the build, named. ``DEFINE_DISPATCH`` lines are not compiled again (the release defines each
  stub once).
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..framework import cpp
from ..framework.declarations import manual_operators, op_name, operators
from ..harness.files import sha256_file
from . import release_locals
from .registration import defined_functions, registration_source, registrations
from .release_source import closure

PROBE = r"""
import json, os, sys, torch
root = os.path.dirname(torch.__file__)
parallel = getattr(torch.__config__, "parallel_info", lambda: "")()
print(json.dumps({"version": torch.__version__.split("+")[0], "config": torch.__config__.show(),
                  "parallel": parallel,
                  "abi": int(torch._C._GLIBCXX_USE_CXX11_ABI), "root": root,
                  "include": [os.path.join(root, "include"),
                              os.path.join(root, "include", "torch", "csrc", "api", "include")],
                  "lib": os.path.join(root, "lib")}))
"""
PARALLEL = {"OpenMP": ["-DAT_PARALLEL_OPENMP=1"], "native thread pool": ["-DAT_PARALLEL_NATIVE=1"],
            "native thread pool and TBB": ["-DAT_PARALLEL_NATIVE_TBB=1"]}
BUILD_TYPE_FLAGS = {"Release": ["-O3", "-DNDEBUG"], "RelWithDebInfo": ["-O2", "-g", "-DNDEBUG"],
                    "MinSizeRel": ["-Os", "-DNDEBUG"], "Debug": ["-g"]}
DEFINE_DISPATCH = re.compile(rb"^(\s*DEFINE_DISPATCH\(\w+\);)", re.M)
# every symbol resolved at link time, and the library's calls to its own functions bound to them
LINK_FLAGS = ("-Wl,--no-undefined", "-Wl,-Bsymbolic")


class BuildRefused(RuntimeError):
    """The override cannot be built as the release was: the message says what failed."""


def compiler():
    """The host's C++ compiler and its version, or ``BuildRefused`` naming its absence."""
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not cxx:
        raise BuildRefused("no C++ compiler on this host (g++ or $CXX): a compiled fix is built "
                           "with one (apt-get install g++)")
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout.splitlines()
    return cxx, (version or ["?"])[0]


def release_settings(python):
    """How the release was built, from the runtime's own torch: version, ABI, C++ standard, its
    ``CXX_FLAGS`` (codegen flags only: ``-D``, ``-O``, ``-f``, ``-m``), its build type's flags, its
    CPU capability, and where its headers and libraries are."""
    out = subprocess.run([python, "-c", PROBE], capture_output=True, text=True)
    if out.returncode != 0:
        raise BuildRefused(f"{python} cannot import torch: {out.stderr.strip()[-400:]}")
    info = json.loads(out.stdout.strip().splitlines()[-1])
    config = info.pop("config")
    # the parallel backend is a per-target definition of the release's build, not in its CXX_FLAGS
    # (1.x's ATen/Parallel.h defines parallel_for only under it); 2.x's ATen/Config.h says it too
    backend = re.search(r"ATen parallel backend: (.+)", info.pop("parallel"))
    parallel = PARALLEL.get(backend.group(1).strip() if backend else "", [])
    flags = re.search(r"CXX_FLAGS=(.*?)(?:, [A-Z_]+=|$)", config)
    cxx_flags = [f for f in (flags.group(1).split() if flags else [])
                 if f.startswith(("-D", "-O", "-f", "-m")) and not f.startswith("-fdiagnostics")]
    std = re.search(r"C\+\+ Version: (\d{4})", config)
    std_year = {"2014": "c++14", "2017": "c++17", "2020": "c++20"}.get(std.group(1)[:4] if std else "",
                                                                     "c++14" if info["version"] < "2" else "c++17")
    build_type = re.search(r"BUILD_TYPE=(\w+)", config)
    capability = re.search(r"CPU capability usage: (\w+)", config)
    info.update(std=std_year, cxx_flags=cxx_flags + parallel, capability_flags=capability_flags(info["lib"]),
                build_flags=BUILD_TYPE_FLAGS.get(build_type.group(1) if build_type else "", []),
                capability=capability.group(1) if capability else _host_capability(),
                major=int(info["version"].split(".")[0]), minor=int(info["version"].split(".")[1]))
    return info


def _host_capability():
    """The capability a release that does not say it chooses here (torch 1.4): the best of
    DEFAULT, AVX and AVX2 this CPU has (1.x has no AVX512 kernels)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "DEFAULT"
    return "AVX2" if re.search(r"\bavx2\b", flags) else "AVX" if re.search(r"\bavx\b", flags) else "DEFAULT"


def compile_flags(settings, includes=()):
    """Flags of one rebuilt file: the release's standard, ABI and codegen flags, its build type's.
    ``includes`` come before the wheel's headers (a changed kernel header, then what the wheel
    lacks)."""
    # -fpermissive: a newer compiler's stricter diagnostics (a lambda's local type in an inline
    # template) are errors the release's compiler did not raise; it changes no code generated
    flags = [f"-std={settings['std']}", f"-D_GLIBCXX_USE_CXX11_ABI={settings['abi']}", "-fPIC", "-w",
             "-fpermissive", *settings["cxx_flags"], *settings["build_flags"]]
    return flags + settings["capability_flags"] + [f"-I{p}" for p in (*includes, *settings["include"])]


# a DispatchStub's per-capability kernel pointer, mangled: its capability is the last name
STUB_CAPABILITY = re.compile(r"12DispatchStubI.*E\d+(AVX|AVX2|AVX512|VSX|ZVECTOR)E$")


def capability_flags(lib):
    """The CPU capabilities the release compiled its kernels for, as the definitions its
    ``DispatchStub.h`` was compiled under (``-DHAVE_AVX2_CPU_DEFINITION``): a rebuilt file's stub
    calls choose among the same kernels as the release's (read from its libraries' symbols:
    AVX and AVX2 in 1.x, AVX2 and AVX512 in 2.13)."""
    found = set()
    for path in _torch_libs(lib):
        out = subprocess.run(["nm", "--defined-only", path], capture_output=True, text=True)
        found.update(m.group(1) for m in map(STUB_CAPABILITY.search, out.stdout.splitlines()) if m)
    return [f"-DHAVE_{c}_CPU_DEFINITION" for c in sorted(found)]


HOOKS = r"""
extern "C" {
long long bugimpact_entries = 0;
__attribute__((no_instrument_function)) void __cyg_profile_func_enter(void*, void*) {
  __atomic_fetch_add(&bugimpact_entries, 1, __ATOMIC_RELAXED); }
__attribute__((no_instrument_function)) void __cyg_profile_func_exit(void*, void*) {}
}
"""
# --- the build -----------------------------------------------------------------------------------

def build(compiled, python, folder, log, tree=None, threads=None):
    """The override libraries of a compiled one-fix arm, in ``folder``: ``arm`` (the arm's files),
    ``faithful`` (the release's own files) and ``canary`` (the release's, instrumented), each with
    the same registrations. ``compiled``: the artifact manifest's ``kernels`` part
    (``arm.prepare``); ``tree``: the release's whole tree (``release_source.open_tree``), from
    which what the rebuilt files need that the release neither exports nor holds in its symbol
    table (``release_locals``) is compiled in (``support``); ``threads``: how many compilers run
    at once (the job's threads). Returns the runtime's ``override`` record; raises
    ``BuildRefused`` naming what failed."""
    cxx, version = compiler()
    settings = release_settings(python)
    if (settings["major"], settings["minor"]) not in ((1, 4), (1, 5)) and settings["major"] < 2:
        raise BuildRefused(f"torch {settings['version']}: no override registration is known for it "
                           "(1.4, 1.5 and 2.x are)")
    kernel_files = [p for p in compiled["rebuild"] if "/cpu/" in p]
    if kernel_files:
        raise BuildRefused(f"stub: {', '.join(kernel_files)} is a DispatchStub kernel; putting a rebuilt "
                           "CPU kernel into the release's stub is not built yet (op files are)")
    source_tree = Path(compiled["tree"])
    folder = Path(folder).resolve()  # a run loads its library from wherever it runs
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    include = source_tree / "include"
    sides = {"arm": "arm", "faithful": "release", "canary": "release"}
    jobs = []
    for name, side in sides.items():
        for path in compiled["rebuild"]:
            flags = compile_flags(settings, (source_tree / side / "aten" / "src", include))
            if name == "canary":
                flags += CANARY_FLAGS
            jobs.append(_job(cxx, name, path, (source_tree / side / path).read_bytes(), folder, flags))
    _run_all(jobs, log, threads)
    chosen, skipped, overloads = _registered(compiled["rebuild"], folder / "faithful", source_tree / "yaml", settings)
    shared = folder / "shared"
    shared.mkdir()
    (shared / "register.cpp").write_text(registration_source(chosen, settings))
    (shared / "hooks.cpp").write_text(HOOKS)
    base = compile_flags(settings, includes=(source_tree / "release" / "aten" / "src", include))
    _run_all([("shared", "register.cpp", [cxx, *base, "-c", str(shared / "register.cpp"), "-o", str(shared / "register.o")]),
              ("shared", "hooks.cpp", [cxx, "-O2", "-fPIC", "-c", str(shared / "hooks.cpp"), "-o", str(shared / "hooks.o")])],
             log, threads)
    libs = _torch_libs(settings["lib"])
    objects = {name: [str(folder / name / p) + ".o" for p in compiled["rebuild"]] for name in sides}
    # the arm's objects too: the fix may call what the release's own files do not
    extra, taken, support, support_jobs = _closure(cxx, [objects[name] + [str(shared / "register.o")] for name in
                                                         ("faithful", "arm")], libs, folder, compiled, tree, settings,
                                                   log, threads)
    compiled_with = {name: _flags_of(cmd) for name, _, cmd in jobs}  # every object of a build alike
    if support:
        compiled_with["support"] = _flags_of(support_jobs[0][2])
    out = {}
    for name in sides:
        library = folder / f"{name}.so"
        hooks = [str(shared / "hooks.o")] if name == "canary" else []
        _link(cxx, objects[name] + [str(shared / "register.o")] + extra + hooks, libs, library, log)
        out[name] = {"library": str(library), "sha256": sha256_file(library)}
    return {"compiler": version, "flags": compile_flags(settings)[:-len(settings["include"])],
            "canary_flags": list(CANARY_FLAGS), "release_flags": release_flags(settings),
            "link_flags": list(LINK_FLAGS),
            "include_order": ["<tree>/<arm or release>/aten/src", "<tree>/include", *settings["include"]],
            "torch": settings["version"], "capability": settings["capability"],
            "registered": [{"op": op["name"], "key": key, **({"manual": True} if op["manual"] else {})}
                           for op, key, _ in chosen], "overloads": overloads,
            "not_registered": skipped, "release_locals": taken, "support": support,
            "compiled_with": compiled_with, "libraries": out}


def _registered(rebuild, objects, yamls, settings):
    """The operators the rebuilt files' objects define, each with its key (``registration``), what
    is left out, and every overload the release declares of their names (a profile names an
    operator without its overload: the check needs to know which it may have called); refused
    where they define none."""
    generator = yamls / "tools/autograd/gen_variable_type.py"
    ops = operators((yamls / "aten/src/ATen/native/native_functions.yaml").read_bytes(),
                    (yamls / "tools/autograd/derivatives.yaml").read_bytes(),
                    manual_operators(generator.read_bytes()) if generator.exists() else ())
    defined = []
    for path in rebuild:
        nm = subprocess.run(["nm", "-C", "--defined-only", str(objects / path) + ".o"],
                            capture_output=True, text=True, check=True)
        defined += defined_functions(nm.stdout.splitlines())
    chosen, skipped = registrations(defined, ops, settings)
    if not chosen:
        raise BuildRefused(f"the rebuilt files ({', '.join(rebuild)}) define no operator "
                           "of the release's native_functions.yaml")
    bases = {op_name(op["name"]) for op, _, _ in chosen}
    overloads = {base: sorted(op["name"] for op in ops if op_name(op["name"]) == base) for base in sorted(bases)}
    return chosen, skipped, overloads


CANARY_FLAGS = ("-finstrument-functions", "-finstrument-functions-exclude-file-list=/include/")


def release_flags(settings):
    """The flags that decide the code a file compiles to, as the release's own build had them
    (its ``CXX_FLAGS``, parallel backend, build type and CPU capabilities): what every rebuilt
    object must be compiled with, and no other such flag (the check compares them,
    ``check.flags_problems``)."""
    return sorted(set(settings["cxx_flags"]) | set(settings["build_flags"]) | set(settings["capability_flags"]))


def _flags_of(cmd):
    """The flags of a compile command, without its compiler, include folders, source and object."""
    skip = {cmd[0], "-c", "-o", cmd[-1], cmd[-3]}
    return [f for f in cmd if f not in skip and not f.startswith("-I")]


def _job(cxx, name, path, data, folder, flags):
    """One compile of a file's bytes as build ``name``: the release defines its stubs once, so a
    ``DEFINE_DISPATCH`` line, which would make a second stub, is left out."""
    source = folder / name / path
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_bytes(DEFINE_DISPATCH.sub(rb"// (bugimpact: defined by the release) \1", data))
    return (name, path, [cxx, *flags, "-c", str(source), "-o", str(source) + ".o"])


# a file that registers operators or kernels when it loads: compiled in again, it would register them twice
REGISTERS = re.compile(rb"RegisterOperators\s*\(|TORCH_LIBRARY|REGISTER_\w*DISPATCH\s*\(|static auto \w+ = c10::")
SUPPORT_ROUNDS = 4  # a support file may need functions of others the release keeps to itself
# why an arm that the release's own files build beside cannot be built: not a defect of the build
LACKS = "the arm's code needs what the release does not have (the fix is entangled with other changes)"
NOT_THE_RELEASE = ("the source at hand is not what the release was built from, here (a reconstruction "
                   "lacks the release branch's own changes: a clone with the release's tag or commit has them)")


def _closure(cxx, builds, libs, folder, compiled, tree, settings, log, threads):
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
        needs = [set(_undefined(cxx, objects + extra, libs, folder / "probe.so")) for objects in builds]
        missing = sorted(set().union(*needs))
        if not missing:
            break
        table = table or release_locals.symbol_table(libs)
        entries, others = release_locals.resolve(missing, table)
        taken += entries
        if entries:
            name = f"locals{len(taken)}"
            (folder / "shared" / f"{name}.cpp").write_text(release_locals.source(entries))
            _run_all([("shared", f"{name}.cpp", [cxx, *flags, "-c", str(folder / "shared" / f"{name}.cpp"),
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
        includes_found, _ = closure(tree.read_bytes, sorted(found), shipped)
        for name, data in includes_found.items():
            (headers / name).parent.mkdir(parents=True, exist_ok=True)
            (headers / name).write_bytes(data)
        jobs = [_job(cxx, "support", path, data, folder, [*flags, f"-I{headers}"])
                for path, (data, _) in sorted(found.items())]
        _run_all(jobs, log, threads)
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
    """The release's files (ATen's C++ outside its CUDA and test folders, not yet compiled in) that
    define the functions ``symbols`` name, by their unqualified names and definitions
    (``framework.cpp``); a file that registers operators when it loads is never one. Returns
    path -> (bytes, the symbols it defines)."""
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
        if path in done or re.search(r"/(cuda|cudnn|miopen|hip|test|mkldnn|xnnpack|vulkan)/|"
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


def _torch_libs(lib):
    """The release's own libraries to link against, its bundled OpenMP runtime among them (never the
    host's: two OpenMP runtimes in one process)."""
    names = sorted(os.listdir(lib))
    wanted = [n for n in names if re.match(r"lib(c10|torch|torch_cpu)\.so$", n) or n.startswith("libgomp")]
    return [str(Path(lib) / n) for n in wanted]


def _undefined(cxx, objects, libs, probe):
    """The symbols the objects need that neither they nor the release's libraries define."""
    out = subprocess.run([cxx, "-shared", "-o", str(probe), *objects, *libs, *LINK_FLAGS, "-Wl,--no-demangle"],
                         capture_output=True, text=True)
    if out.returncode == 0:
        return []
    found = sorted(set(re.findall(r"undefined reference to `([^']+)'", out.stderr)))  # mangled
    if not found:
        raise BuildRefused(f"linking the override failed: {out.stderr.strip()[-600:]}")
    return found


def _link(cxx, objects, libs, library, log):
    cmd = [cxx, "-shared", "-o", str(library), *objects, *libs, *LINK_FLAGS]
    log.write(" ".join(cmd) + "\n")
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise BuildRefused(f"linking {library.name} failed: {out.stderr.strip()[-600:]}")


def _run_all(jobs, log, threads=None):
    """Compile in parallel, ``threads`` at once (the job's; else one per core); the first failure
    refuses the build with its output."""
    def run(job):
        name, path, cmd = job
        return job, subprocess.run(cmd, capture_output=True, text=True)
    with ThreadPoolExecutor(max_workers=max(1, threads or os.cpu_count() or 1)) as pool:
        results = list(pool.map(run, jobs))
    failed = []
    for (name, path, cmd), out in results:
        log.write(f"[{name}] {' '.join(cmd)}\n{out.stdout}{out.stderr}")
        if out.returncode != 0:  # the first error is the cause; the whole output is in the log
            errors = [line for line in out.stderr.splitlines() if re.search(r"(^|: )(fatal )?error: ", line)]
            failed.append((name, path, errors[0].strip() if errors else out.stderr.strip()[-800:]))
    if failed:
        name, path, cause = failed[0]
        builds = {n for n, _, _ in failed}
        if builds == {"arm"}:  # the release's own files compiled: the fix needs more
            raise BuildRefused(f"compiling {path} (arm build) failed, where the release's own files compile: "
                               f"{cause}: {LACKS}")
        if "faithful" in builds:  # the release's own file does not build against the release's headers
            path, cause = next((p, c) for n, p, c in failed if n == "faithful")
            raise BuildRefused(f"compiling {path} failed for the release's own file too (the faithful build): "
                               f"{cause}: {NOT_THE_RELEASE}")
        raise BuildRefused(f"compiling {path} ({name} build) failed: {cause}")
