"""How the release was built, read from its own torch (its C++ standard, ABI, flags, build type,
parallel backend and CPU capabilities), and compiling and linking a file as it was: the commands
of an override library's builds (``build``), each build's flags kept for the check to compare.
A compile that fails says whose fault it is: the arm's (the fix needs what the release does not
have) or the source's (the release's own file does not build against its headers)."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..framework.cpp import PARALLEL_BACKENDS
from . import objects

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
BUILD_TYPE_FLAGS = {"Release": ["-O3", "-DNDEBUG"], "RelWithDebInfo": ["-O2", "-g", "-DNDEBUG"],
                    "MinSizeRel": ["-Os", "-DNDEBUG"], "Debug": ["-g"]}
DEFINE_DISPATCH = re.compile(rb"^(\s*DEFINE_DISPATCH\(\w+\);)", re.M)
# every symbol resolved at link time, and the library's calls to its own functions bound to them
LINK_FLAGS = ("-Wl,--no-undefined", "-Wl,-Bsymbolic")


# Flags that make the host's compiler do a float computation as the release's compiler did, where
# a newer one rounds differently at the release's own flags: (release compiler, oldest host
# version it applies from, flags, why). Seen: torch 1.4's cdist (GCC 7.3) differed by an ulp
# rebuilt by g++ 12, the faithful build's training not the release's, until this flag.
PARITY = (("GCC", 8, ("-fno-tree-loop-vectorize",),
           "GCC 8 vectorizes a float sum in order (fold-left), multiplying apart from the add that GCC 7 "
           "fused into one FMA at -mfma: the sum rounds differently"),)


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


def parity(release_compiler, host_version):
    """The flags (``PARITY``) the host's compiler (its ``--version`` line) needs to compute as the
    release's compiler did (``GCC 7.3``, from its ``torch.__config__``), each with why: a rule
    applies where the release's compiler is older than the version the rounding changed in, and
    the host's is that one or newer (same vendor: g++ says ``g++``/``gcc``, clang ``clang``)."""
    release = re.match(r"(GCC|clang)\s+(\d+)", release_compiler or "")
    host = re.search(r"(\d+)\.\d+", host_version or "")  # its first version number: a wrapper may add words
    vendor = "clang" if "clang" in (host_version or "") else "GCC"
    if not release or not host or release.group(1) != vendor:
        return {}
    return {flag: why for name, since, flags, why in PARITY for flag in flags
            if name == vendor and int(release.group(2)) < since <= int(host.group(1))}


def language(config, version):
    """The ``-std=`` a release's files were compiled with, from its ``torch.__config__`` (``C++
    Version: 201402``): torch 1.x's CMake set ``CMAKE_CXX_STANDARD`` alone, so GNU's extensions
    were on (``gnu++14``; 1.3's ``QuantizedLinear.cpp`` writes the hex float ``0x1p-10``, which
    ``c++14`` refuses); 2.x's are taken as the standard's."""
    std = re.search(r"C\+\+ Version: (\d{4})", config)
    year = {"2014": "14", "2017": "17", "2020": "20"}.get(std.group(1)[:4] if std else "",
                                                        "14" if version < "2" else "17")
    return f"{'gnu' if version < '2' else 'c'}++{year}"


def release_settings(python):
    """How the release was built, from the runtime's own torch: version, ABI, C++ standard, its
    ``CXX_FLAGS`` (codegen flags only: ``-D``, ``-O``, ``-f``, ``-m``), its build type's flags, its
    CPU capability, its compiler and what the host's needs to compute as it did (``parity``), and
    where its headers and libraries are."""
    out = subprocess.run([python, "-c", PROBE], capture_output=True, text=True)
    if out.returncode != 0:
        raise BuildRefused(f"{python} cannot import torch: {out.stderr.strip()[-400:]}")
    info = json.loads(out.stdout.strip().splitlines()[-1])
    config = info["config"]
    # the parallel backend is a per-target definition of the release's build, not in its CXX_FLAGS
    # (1.x's ATen/Parallel.h defines parallel_for only under it); 2.x's ATen/Config.h says it too
    backend = re.search(r"ATen parallel backend: (.+)", info.pop("parallel"))
    parallel = [f"-D{d}=1" for d in PARALLEL_BACKENDS.get(backend.group(1).strip() if backend else "", ())]
    flags = re.search(r"CXX_FLAGS=(.*?)(?:, [A-Z_]+=|$)", config)
    cxx_flags = [f for f in (flags.group(1).split() if flags else [])
                 if f.startswith(("-D", "-O", "-f", "-m")) and not f.startswith("-fdiagnostics")]
    std_year = language(config, info["version"])
    build_type = re.search(r"BUILD_TYPE=(\w+)", config)
    capability = re.search(r"CPU capability usage: (\w+)", config)
    built_by = re.search(r"^\s*-\s*((?:GCC|clang)\s+[\d.]+)", config, re.M)
    info.update(std=std_year, cxx_flags=cxx_flags + parallel, capability_flags=capability_flags(info["lib"]),
                compiler=built_by.group(1) if built_by else "",
                parity=parity(built_by.group(1) if built_by else "", compiler()[1]),
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
             "-fpermissive", *settings["cxx_flags"], *settings["build_flags"], *settings["parity"]]
    return flags + settings["capability_flags"] + [f"-I{p}" for p in (*includes, *settings["include"])]


# a DispatchStub's per-capability kernel pointer, mangled: its capability is the last name
STUB_CAPABILITY = re.compile(r"12DispatchStubI.*E\d+(AVX|AVX2|AVX512|VSX|ZVECTOR)E$")


def capability_flags(lib):
    """The CPU capabilities the release compiled its kernels for, as the definitions its
    ``DispatchStub.h`` was compiled under (``-DHAVE_AVX2_CPU_DEFINITION``): a rebuilt file's stub
    calls choose among the same kernels as the release's (read from its libraries' symbols:
    AVX and AVX2 in 1.x, AVX2 and AVX512 in 2.13)."""
    found = set()
    for path in torch_libs(lib):
        out = subprocess.run(["nm", "--defined-only", path], capture_output=True, text=True)
        found.update(m.group(1) for m in map(STUB_CAPABILITY.search, out.stdout.splitlines()) if m)
    return [f"-DHAVE_{c}_CPU_DEFINITION" for c in sorted(found)]




# SLEEF's vector types by the element and lane count in a function's name (Sleef_expf8_u10: __m256)
SLEEF_TYPES = {("f", "4"): "__m128", ("d", "2"): "__m128d", ("f", "8"): "__m256", ("d", "4"): "__m256d",
               ("f", "16"): "__m512", ("d", "8"): "__m512d"}
SLEEF_PAIRS = {"sincos", "sincospi", "modf"}  # return both results, as SLEEF's Sleef_<vector>_2 struct
SLEEF_BINARY = {"atan2", "pow", "fmod", "hypot", "nextafter", "copysign", "fmax", "fmin", "fdim", "remainder"}
SLEEF_UNARY = {"sin", "cos", "tan", "asin", "acos", "atan", "exp", "exp2", "exp10", "expm1", "log", "log2",
               "log10", "log1p", "sqrt", "cbrt", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf",
               "erfc", "tgamma", "lgamma", "trunc", "floor", "ceil", "round", "rint", "fabs", "sinpi",
               "cospi"}
SLEEF_NAME = re.compile(r"^Sleef_([a-z0-9]+?)([fd])(\d+)(_u\d+)?([a-z0-9]*)$")


def sleef_header(libs):
    """A ``sleef.h`` declaring the SLEEF functions the release's libraries export, or None where
    they export none. The 1.x wheels do not ship the header their vector code includes for AVX
    and AVX2 (SLEEF's build generates it); SLEEF names say each function's signature: its
    mathematical function (one argument or two) and its vector type (element, lane count)."""
    declared = []
    for name in sorted(n for n in release_exports(libs) if n.startswith("Sleef_")):
        m = SLEEF_NAME.match(name)
        vector = m and SLEEF_TYPES.get((m.group(2), m.group(3)))
        if not vector or m.group(1) not in SLEEF_UNARY | SLEEF_BINARY | SLEEF_PAIRS:
            continue
        args = f"{vector}, {vector}" if m.group(1) in SLEEF_BINARY else vector
        result = f"Sleef_{vector}_2" if m.group(1) in SLEEF_PAIRS else vector
        declared.append(f"{result} {name}({args});")
    if not declared:
        return None
    pairs = [f"typedef struct {{ {v} x, y; }} Sleef_{v}_2;" for v in SLEEF_TYPES.values()]
    return "\n".join(["/* bugimpact: SLEEF's functions as the release exports them */", "#pragma once",
                      "#include <immintrin.h>", '#ifdef __cplusplus', 'extern "C" {', "#endif", *pairs, *declared,
                      "#ifdef __cplusplus", "}", "#endif", ""])


def missing_headers(jobs, standins=()):
    """The headers the compile ``jobs`` include that none of their include folders holds, or that
    only an empty stand-in holds (``standins``: names no source of the release held), by the
    preprocessor's own search (``-M -MG``: a header it cannot find is listed by its name)."""
    missing = set()
    for _, _, cmd in jobs:  # [compiler, *flags, "-c", source, "-o", object] (compile_job)
        out = subprocess.run([*cmd[:-4], "-M", "-MG", cmd[-3]], capture_output=True, text=True)
        if out.returncode != 0:
            continue  # the compile says what is wrong
        for dep in out.stdout.replace("\\\n", " ").split()[1:]:
            if not dep.startswith("/"):
                missing.add(dep)
            elif any(dep.endswith("/include/" + name) for name in standins):
                missing.add(next(n for n in standins if dep.endswith("/include/" + n)))
    return sorted(missing)


def provide_headers(names, settings, libs, where, standins=()):
    """The third-party headers ``names`` that a release's wheel and source lack, written under
    ``where``: ``sleef.h`` declaring what the release exports (``sleef_header``; SLEEF's build
    generates it), MKL's from Intel's own ``mkl-include`` of the release's MKL version (PyPI).
    Any other keeps its empty stand-in where it has one (``standins``: a file that needs what it
    declares fails to compile, naming it; ``nnpack.h``, included where its code is compiled out,
    does not), else refuses the build, naming it. Returns what each came from."""
    made, mkl = {}, None
    for name in names:
        header = sleef_header(libs) if name == "sleef.h" else None
        if header:
            where.mkdir(parents=True, exist_ok=True)
            (where / name).write_text(header)
            made[name] = "declared from the release's exported SLEEF functions"
        elif name.startswith("mkl") and name.endswith(".h"):
            mkl = mkl or _mkl_include(settings, where)  # all of MKL's headers at once
            made[name] = mkl
        elif name not in standins:
            raise BuildRefused(f"the rebuilt files include {name}, which neither torch {settings['version']}'s "
                               "wheel nor the source at hand holds where it looks (a submodule's, a generated "
                               "header, or one under an include folder the release's build adds, as qnnpack's)")
    return made


def stand_in_named(words, standins):
    """A compile's failure (``words``) named by the empty stand-in of a third-party header
    (``standins``: names no source of the release held, ``cpuinfo.h``) whose name begins the
    identifier the compiler found undeclared (``cpuinfo_initialize``), or its folder's name does
    (``fbgemm`` of ``fbgemm/Fbgemm.h``, a namespace): the header's, not the source's, is what is
    missing."""
    undeclared = re.search(r"[‘'`](\w+)[’'] was not declared", words)
    header = next((name for name in standins if undeclared and any(
        undeclared.group(1).startswith(part) for part in name.rsplit(".", 1)[0].split("/") if part)), None)
    if header is None:
        return words
    compiled = re.split(f": (?:{re.escape(NOT_THE_RELEASE)}|{re.escape(NOT_AS_BUILT)})", words)[0]
    return (f"{compiled}: {undeclared.group(1)} is {header}'s, a "
            "third-party header neither the wheel nor the source at hand holds (a submodule's): its stand-in "
            "declares nothing (a clone of the submodule gives it: artifacts.onefix.submodules)")


MKL_VERSION = re.compile(r"Math Kernel Library Version (\d+)\.(\d+)")


def _mkl_include(settings, where):
    """MKL's headers of the release's MKL version (``torch.__config__``: its year and update),
    from Intel's ``mkl-include`` on PyPI; refused, named, where the release says none or PyPI has
    none of that version."""
    version = MKL_VERSION.search(settings.get("config", ""))
    if not version:
        raise BuildRefused(f"the rebuilt files include MKL's headers, and torch {settings['version']} does "
                           "not say which MKL it was built with")
    spec = f"mkl-include~={version.group(1)}.{version.group(2)}.0"
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run([sys.executable, "-m", "pip", "download", spec, "--no-deps", "--only-binary=:all:",
                              "--platform", "manylinux1_x86_64", "-d", tmp], capture_output=True, text=True)
        wheels = list(Path(tmp).glob("mkl_include-*.whl"))
        if out.returncode != 0 or not wheels:
            raise BuildRefused(f"the rebuilt files include MKL's headers, and no {spec} could be had from PyPI: "
                               f"{out.stderr.strip()[-300:]}")
        with zipfile.ZipFile(wheels[0]) as archive:
            for member in archive.namelist():
                _, _, rest = member.partition(".data/data/include/")
                if rest and not member.endswith("/"):
                    (where / rest).parent.mkdir(parents=True, exist_ok=True)
                    (where / rest).write_bytes(archive.read(member))
        return f"{wheels[0].name} (PyPI), for the release's MKL {version.group(1)}.{version.group(2)}"


def release_exports(libs):
    """The functions the release's libraries export (their dynamic symbol table), mangled."""
    out = set()
    for lib in libs:
        listing = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True, check=True)
        out.update(f[2] for f in (line.split() for line in listing.stdout.splitlines())
                   if len(f) == 3 and f[1] in "TWiI")
    return out


def release_flags(settings):
    """The flags that decide the code a file compiles to, as the release's own build had them
    (its ``CXX_FLAGS``, parallel backend, build type and CPU capabilities) and as the host's
    compiler needs to compute as the release's did (``parity``): what every rebuilt object must
    be compiled with, and no other such flag (the check compares them, ``check.flags_problems``)."""
    return sorted(set(settings["cxx_flags"]) | set(settings["build_flags"]) | set(settings["capability_flags"])
                  | set(settings["parity"]))


def flags_of(cmd):
    """The flags of a compile command, without its compiler, the flags that name folders
    (``objects.PATH_FLAGS``), its source and object."""
    skip = {cmd[0], "-c", "-o", cmd[-1], cmd[-3]}
    return [f for f in cmd if f not in skip and not f.startswith(objects.PATH_FLAGS)]


def compile_job(cxx, name, path, data, folder, flags):
    """One compile of a file's bytes as build ``name``: the release defines its stubs once, so a
    ``DEFINE_DISPATCH`` line, which would make a second stub, is left out."""
    source = folder / name / path
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_bytes(DEFINE_DISPATCH.sub(rb"// (bugimpact: defined by the release) \1", data))
    flags = [*flags, *objects.path_maps(flags, folder / name)]
    return (name, path, [cxx, *flags, "-c", str(source), "-o", str(source) + ".o"])


# a file that registers operators or kernels when it loads: compiled in again, it would register them twice


LACKS = "the arm's code needs what the release does not have (the fix is entangled with other changes)"
NOT_THE_RELEASE = ("the source at hand is not what the release was built from, here (a reconstruction "
                   "lacks the release branch's own changes: a clone with the release's tag or commit has them)")
# the same failure where the source is the release's own commit: the host's compile is what differs
NOT_AS_BUILT = ("the release's own source, at its own commit, does not compile on this host as the release's "
                "build compiled it (the host's compiler or flags differ from the build's)")




def torch_libs(lib):
    """The release's own CPU libraries to link against: ATen's home among them (``libcaffe2.so`` to
    1.1, ``libtorch.so`` from 1.2, ``libtorch_cpu.so`` from 1.5), and its bundled OpenMP runtime
    (never the host's: two OpenMP runtimes in one process)."""
    names = sorted(os.listdir(lib))
    wanted = [n for n in names if re.match(r"lib(c10|caffe2|torch|torch_cpu)\.so$", n) or n.startswith("libgomp")]
    return [str(Path(lib) / n) for n in wanted]


def undefined_symbols(cxx, objects, libs, probe):
    """The symbols the objects need that neither they nor the release's libraries define."""
    out = subprocess.run([cxx, "-shared", "-o", str(probe), *objects, *libs, *LINK_FLAGS, "-Wl,--no-demangle"],
                         capture_output=True, text=True)
    if out.returncode == 0:
        return []
    found = sorted(set(re.findall(r"undefined reference to `([^']+)'", out.stderr)))  # mangled
    if not found:
        raise BuildRefused(f"linking the override failed: {out.stderr.strip()[-600:]}")
    return found


def link(cxx, objects, libs, library, log, more=()):
    cmd = [cxx, "-shared", "-o", str(library), *objects, *libs, *LINK_FLAGS, *more]
    log.write(" ".join(cmd) + "\n")
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise BuildRefused(f"linking {library.name} failed: {out.stderr.strip()[-600:]}")


def run_all(jobs, log, threads=None, cache=None, faithful_fails=NOT_THE_RELEASE):
    """Compile in parallel, ``threads`` at once (the job's; else one per core); the first failure
    refuses the build with its output (a faithful build's failure with why, ``faithful_fails``:
    ``NOT_THE_RELEASE`` for a reconstruction, ``NOT_AS_BUILT`` for the release's own commit). With ``cache`` (a folder: ``objects``), what was compiled
    before, by this build or another, is taken from it, and jobs that compile the same thing
    compile it once. Returns the objects taken from the cache: object -> the kept file."""
    with ThreadPoolExecutor(max_workers=max(1, threads or os.cpu_count() or 1)) as pool:
        digests = list(pool.map(lambda job: objects.key(job[2]), jobs)) if cache else [None] * len(jobs)
        # the job that compiles each input: the first with its digest (a job without one, its own)
        leaders = [digests.index(d) if d else i for i, d in enumerate(digests)]

        def run(index):
            cmd = jobs[index][2]
            if digests[index] is None:
                return subprocess.run(cmd, capture_output=True, text=True)
            return objects.compiled(cache, digests[index], cmd)
        made = dict(zip(set(leaders), pool.map(run, set(leaders))))
    failed, kept = [], {}
    for index, (name, path, cmd) in enumerate(jobs):
        leader, out = leaders[index], made[leaders[index]]
        if out is None:
            kept[cmd[-1]] = str(objects.kept(cache, digests[index]))
        if out is None or leader != index:
            log.write(f"[{name}] {' '.join(cmd)}\n(not compiled: its input was compiled "
                      + ("before, and kept" if out is None else f"for [{jobs[leader][0]}] {jobs[leader][1]}")
                      + f": {digests[index][:16]})\n")
            if leader != index and (out is None or out.returncode == 0):
                shutil.copyfile(jobs[leader][2][-1], cmd[-1])
            out = out or subprocess.CompletedProcess(cmd, 0, "", "")
        else:
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
                               f"{cause}: {faithful_fails}")
        raise BuildRefused(f"compiling {path} ({name} build) failed: {cause}")
    return kept
