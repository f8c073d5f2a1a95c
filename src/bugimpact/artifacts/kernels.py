"""Building a compiled fix's override library for a release wheel: the rebuilt kernel files, a
registration of every operator they implement under the key the release's generated code uses,
and stand-ins for what the release does not export.

Every way this was seen to go wrong was silent, so each is guarded here or by the check that runs
the builds (``steps.override_check``):

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
  build type's optimisation and its parallel backend; the faithful build (the release's own files,
  compiled the same way) must give the release's training bit for bit.
- **what the release keeps to itself.** 1.x wheels do not export a DispatchStub's per-capability
  kernels or ``get_cpu_capability``: stand-ins that fail loudly if a stub the release never chose
  is reached; any other missing symbol refuses the build. ``DEFINE_DISPATCH`` lines are not
  compiled again (the release defines each stub once).
"""
import json
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..harness.files import sha256_file
from .registration import defined_functions, operators, registration_source, registrations, standin_source

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
    info.update(std=std_year, cxx_flags=cxx_flags + parallel,
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
    if settings["major"] >= 2:  # a stub call links only with the capabilities the release has
        flags += ["-DHAVE_AVX2_CPU_DEFINITION", "-DHAVE_AVX512_CPU_DEFINITION"]
    return flags + [f"-I{p}" for p in (*includes, *settings["include"])]


HOOKS = r"""
extern "C" {
long long bugimpact_entries = 0;
__attribute__((no_instrument_function)) void __cyg_profile_func_enter(void*, void*) {
  __atomic_fetch_add(&bugimpact_entries, 1, __ATOMIC_RELAXED); }
__attribute__((no_instrument_function)) void __cyg_profile_func_exit(void*, void*) {}
}
"""
# --- the build -----------------------------------------------------------------------------------

def build(compiled, python, folder, log):
    """The override libraries of a compiled one-fix arm, in ``folder``: ``arm`` (the arm's files),
    ``faithful`` (the release's own files) and ``canary`` (the release's, instrumented), each with
    the same registrations. ``compiled``: the artifact manifest's ``kernels`` part
    (``compiled.prepare``). Returns the runtime's ``override`` record; raises ``BuildRefused``
    naming what failed."""
    cxx, version = compiler()
    settings = release_settings(python)
    if (settings["major"], settings["minor"]) not in ((1, 4), (1, 5)) and settings["major"] < 2:
        raise BuildRefused(f"torch {settings['version']}: no override registration is known for it "
                           "(1.4, 1.5 and 2.x are)")
    kernel_files = [p for p in compiled["rebuild"] if "/cpu/" in p]
    if kernel_files:
        raise BuildRefused(f"stub: {', '.join(kernel_files)} is a DispatchStub kernel; putting a rebuilt "
                           "CPU kernel into the release's stub is not built yet (op files are)")
    tree = Path(compiled["tree"])
    folder = Path(folder).resolve()  # a run loads its library from wherever it runs
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    include = tree / "include"
    sides = {"arm": "arm", "faithful": "release", "canary": "release"}
    jobs = []
    for name, side in sides.items():
        for path in compiled["rebuild"]:
            source = folder / name / path
            source.parent.mkdir(parents=True, exist_ok=True)
            # the release defines its stubs once: a second definition would be a second stub
            source.write_bytes(DEFINE_DISPATCH.sub(rb"// (bugimpact: defined by the release) \1",
                                                   (tree / side / path).read_bytes()))
            flags = compile_flags(settings, (tree / side / "aten" / "src", include))
            if name == "canary":
                flags += ["-finstrument-functions", "-finstrument-functions-exclude-file-list=/include/"]
            jobs.append((name, path, [cxx, *flags, "-c", str(source), "-o", str(source) + ".o"]))
    _run_all(jobs, log)
    ops = operators((tree / "yaml" / "aten/src/ATen/native/native_functions.yaml").read_bytes(),
                    (tree / "yaml" / "tools/autograd/derivatives.yaml").read_bytes())
    defined = []
    for path in compiled["rebuild"]:
        nm = subprocess.run(["nm", "-C", "--defined-only", str(folder / "faithful" / path) + ".o"],
                            capture_output=True, text=True, check=True)
        defined += defined_functions(nm.stdout.splitlines())
    chosen, skipped = registrations(defined, ops, settings)
    if not chosen:
        raise BuildRefused(f"the rebuilt files ({', '.join(compiled['rebuild'])}) define no operator "
                           "of the release's native_functions.yaml")
    shared = folder / "shared"
    shared.mkdir()
    (shared / "register.cpp").write_text(registration_source(chosen, settings))
    (shared / "hooks.cpp").write_text(HOOKS)
    base = compile_flags(settings, includes=(tree / "release" / "aten" / "src", include))
    _run_all([("shared", "register.cpp", [cxx, *base, "-c", str(shared / "register.cpp"), "-o", str(shared / "register.o")]),
              ("shared", "hooks.cpp", [cxx, "-O2", "-fPIC", "-c", str(shared / "hooks.cpp"), "-o", str(shared / "hooks.o")])], log)
    libs = _torch_libs(settings["lib"])
    objects = {name: [str(folder / name / p) + ".o" for p in compiled["rebuild"]] for name in sides}
    missing = _undefined(cxx, objects["faithful"] + [str(shared / "register.o")], libs, folder / "probe.so")
    extra = []
    if missing:
        includes = sorted({line for p in compiled["rebuild"] for line in
                           re.findall(r"^\s*#\s*include [<\"][^>\"]+[>\"]", (tree / "release" / p).read_text(), re.M)})
        source, others = standin_source(missing, includes)
        if others:
            raise BuildRefused(f"the release does not export what the rebuilt files need: "
                               f"{', '.join(others[:4])}{' ...' if len(others) > 4 else ''}")
        (shared / "standin.cpp").write_text(source)
        _run_all([("shared", "standin.cpp", [cxx, *base, "-c", str(shared / "standin.cpp"), "-o", str(shared / "standin.o")])], log)
        extra = [str(shared / "standin.o")]
    out = {}
    for name in sides:
        library = folder / f"{name}.so"
        hooks = [str(shared / "hooks.o")] if name == "canary" else []
        _link(cxx, objects[name] + [str(shared / "register.o")] + extra + hooks, libs, library, log)
        out[name] = {"library": str(library), "sha256": sha256_file(library)}
    return {"compiler": version, "flags": compile_flags(settings)[:-len(settings["include"])],
            "link_flags": list(LINK_FLAGS),
            "include_order": ["<tree>/<arm or release>/aten/src", "<tree>/include", *settings["include"]],
            "torch": settings["version"], "capability": settings["capability"],
            "registered": [{"op": op["name"], "key": key} for op, key, _ in chosen],
            "not_registered": skipped, "standins": missing, "libraries": out}


def _torch_libs(lib):
    """The release's own libraries to link against, its bundled OpenMP runtime among them (never the
    host's: two OpenMP runtimes in one process)."""
    names = sorted(os.listdir(lib))
    wanted = [n for n in names if re.match(r"lib(c10|torch|torch_cpu)\.so$", n) or n.startswith("libgomp")]
    return [str(Path(lib) / n) for n in wanted]


def _undefined(cxx, objects, libs, probe):
    """The symbols the objects need that neither they nor the release's libraries define."""
    out = subprocess.run([cxx, "-shared", "-o", str(probe), *objects, *libs, *LINK_FLAGS],
                         capture_output=True, text=True)
    if out.returncode == 0:
        return []
    found = sorted(set(re.findall(r"undefined reference to `([^']+)'", out.stderr)))
    if not found:
        raise BuildRefused(f"linking the override failed: {out.stderr.strip()[-600:]}")
    return found


def _link(cxx, objects, libs, library, log):
    cmd = [cxx, "-shared", "-o", str(library), *objects, *libs, *LINK_FLAGS]
    log.write(" ".join(cmd) + "\n")
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise BuildRefused(f"linking {library.name} failed: {out.stderr.strip()[-600:]}")


def _run_all(jobs, log):
    """Compile in parallel, one job per core; the first failure refuses the build with its output."""
    def run(job):
        name, path, cmd = job
        return job, subprocess.run(cmd, capture_output=True, text=True)
    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        results = list(pool.map(run, jobs))
    for (name, path, cmd), out in results:
        log.write(f"[{name}] {' '.join(cmd)}\n{out.stdout}{out.stderr}")
        if out.returncode != 0:
            raise BuildRefused(f"compiling {path} ({name} build) failed: {out.stderr.strip()[-800:]}")
