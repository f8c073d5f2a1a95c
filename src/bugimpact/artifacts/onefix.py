"""One fix, no source build: a released wheel plus the fix's own diff.

Many fixes change only Python files of the package. For those, both arms of a bug come from one
released binary: if the release already contains the fix, the buggy arm is the release with the diff
reverse-applied; if the release predates it, the corrected arm is the release with the diff applied.
Which case holds is checked (the diff must apply in exactly one direction), never guessed.

The artifact is the release wheel plus an overlay: the patched files, made here on the host from
the wheel's own copies, and copied over the installed package by the runtime. Each change is placed
by its changed lines, as reach places it (``framework.patch``): a release cut from a branch may have
moved or edited the lines around a fix. A fix that changes ATen's op files also gets an override
library of them, built from the release's own files (``compiled``, ``kernels``). It is refused, with the reason recorded, when the diff touches any
other compiled code or build input (its kind named), or when a changed line itself is not in the
release's file, or is there in more than one place alike.
"""
import hashlib
import os
import re
import zipfile
from pathlib import Path

from ..failures import reading
from ..framework import patch
from ..framework.apply import NoDirection, direction_of
from ..framework.paths import CUDA, NOT_SHIPPED
from ..io import atomic_open, write_text
from ..overrides import generator_inputs, parts, shared_headers, taken_away
from ..overrides.parts import Refused
from . import other_side

PACKAGE = "torch"
# Anything that is compiled, generates code, or drives the build: a wheel cannot take it as a patch.
COMPILED_SUFFIX = re.compile(r"\.(c|cc|cpp|cxx|cu|cuh|h|hh|hpp|hxx|inl|mm|m|s|S|asm|metal|glsl|cl|"
                             r"yaml|yml|in|cmake|bzl|bazel|sh|txt|cfg|toml|so|pyx|pxd)$")
COMPILED_DIRS = ("aten/", "c10/", "caffe2/", "tools/", "torchgen/", "third_party/", "cmake/",
                 "torch/csrc/", "torch/lib/", "android/", "ios/", "binaries/", "modules/")
BUILD_FILES = re.compile(r"(^|/)(CMakeLists\.txt|setup\.py|Makefile|BUILD|WORKSPACE|"
                         r"\.gitmodules)$")
# shipped in the wheel, never imported by ``import torch`` or a training run: left out of a fix
NOT_IMPORTED = ("torch/testing/_internal/",)


CANNOT = "which a release wheel cannot take"


# Python files outside the package that some wheels ship (torch 1.x ships caffe2/python): the
# release wheel's own file list decides.
OTHER_PACKAGES = ("caffe2/python/",)


def classify(path, package=PACKAGE, shipped=None):
    """``python`` (patchable in the wheel), ``not_shipped`` (tests, docs), ``not_imported`` (the
    test suite's helpers the wheel ships, which no training process imports), ``compiled``,
    ``unknown``, or ``wheel``: a Python file outside the package whose fate the wheel decides.
    ``shipped``: the release wheel's own file list, where known."""
    if path.startswith(NOT_IMPORTED):
        return "not_imported"
    is_python = path.endswith((".py", ".pyi"))
    if is_python and shipped is not None and path in shipped:
        return "python"
    if is_python and path.startswith(package + "/") \
            and not path.startswith(tuple(d for d in COMPILED_DIRS if d.startswith(package))):
        return "python"
    if NOT_SHIPPED.search(path):
        return "not_shipped"
    if is_python and path.startswith(OTHER_PACKAGES):
        return "wheel" if shipped is None else "not_shipped"
    if COMPILED_SUFFIX.search(path) or path.startswith(COMPILED_DIRS) or BUILD_FILES.search(path):
        return "compiled"
    return "compiled" if not path.startswith(package + "/") else "unknown"


def cuda_only(paths, package=PACKAGE):
    """Whether every shipped or compiled file a diff changes is a CUDA source (``.cu``, a ``cuda``
    or ``cudnn`` folder, a cuDNN/MIOpen/NCCL file): a fix no CPU run can reach."""
    code = [p for p in paths if classify(p, package) not in ("not_shipped", "not_imported")]
    return bool(code) and all(CUDA.search(p) for p in code)


def split_diff(text):
    """Per-file sections of a git diff: (path, section). Leading prose is dropped."""
    sections = re.split(r"(?m)^(?=diff --git )", text)
    out = []
    for section in sections:
        match = re.match(r"diff --git a/(\S+) b/(\S+)", section)
        if match:
            out.append((match.group(2) if match.group(2) != "/dev/null" else match.group(1),
                        section))
    if not out:
        raise Refused("the diff holds no file changes (expected `git diff` output)")
    return out


def isolate(diff_text, package=PACKAGE, wheel_files=None):
    """The parts of a fix's diff that a release wheel can take, and the files of each kind;
    ``wheel_files``: the release wheel's file list, which decides whether a file outside the
    package is shipped.

    Returns ``(python patch, kinds, kernels)``: ``kernels`` is None for a Python-only fix, else the
    compiled part (``parts.Kernels``: its kind, its files by kind, its diff), which an override
    library takes. Refuses a file of unknown kind or binary, and compiled code of a kind no
    override can replace (``parts.refusal``, which names the kind)."""
    kinds = {"python": [], "not_shipped": [], "not_imported": [], "compiled": [], "unknown": [], "wheel": [],
             "comments": [], "declarations": []}
    shipped, code, header_code, generated = [], [], {}, []
    for path, section in split_diff(diff_text):
        _check_section(path, section)
        kind = classify(path, package, wheel_files)
        if kind in ("python", "compiled") and re.search(r"(?m)^(Binary files|GIT binary patch)", section):
            kind = "unknown"
        if kind == "compiled" and parts.only_comments(path, section):
            kind = "comments"  # changes no binary
        elif kind == "compiled" and CUDA.search(path) is None and parts.only_declarations(path, section):
            kind = "declarations"  # placed for the fix's own files; rebuilds no includer (a CUDA
            # header's includers are the CUDA half's, left out of a CPU arm with it)
        elif kind == "compiled" and path.endswith(parts.HEADER):
            header_code[path] = parts.includer_code(section)
        if kind == "compiled":
            generated += generator_inputs.changes(path, section)
        kinds[kind].append(path)
        if kind == "python":
            shipped.append(section)
        elif kind in ("compiled", "declarations"):
            code.append(section)
    if kinds["unknown"] or kinds["wheel"]:
        bad = kinds["unknown"] + kinds["wheel"]
        raise Refused(f"the fix touches files of unknown kind ({', '.join(bad[:5])}"
                      f"{' ...' if len(bad) > 5 else ''}), {CANNOT}")
    kernels = None
    if kinds["compiled"]:
        # shared headers with code changed: judged by the files that name what changed
        # (``shared_headers``), rebuilt beside the fix's other files, which decide its part
        shared = [p for p in kinds["compiled"] if header_code.get(p) and shared_headers.judged_by_names(p)]
        rest = [p for p in kinds["compiled"] if p not in shared]
        fix, by_kind = parts.fix_part(rest) if rest else ("header", {})
        inputs = by_kind.get("codegen", [])
        if fix == "codegen" and generator_inputs.one_library(generated):
            # its generated code may say only which kernel a key calls, or change a backward node's
            # formula or the generators' own code: the arm's generated code judges it
            # (``generated_code``), and its other files are the fix's kernels
            rest = [p for p in rest if p not in inputs]
            fix, by_kind = parts.fix_part(rest) if rest else ("codegen", {})
            if generator_inputs.calls_kernels(generated) and not by_kind.get("op") and not by_kind.get("stub"):
                raise Refused(f"the fix touches code generation and no op file whose kernels its generated "
                              f"code would call ({', '.join(inputs[:3])}), {CANNOT}")
            by_kind["codegen"] = inputs
        why = parts.refusal(fix, by_kind) if rest else ""
        if why:
            # a header refused: what of it its includers compile
            header = next((p for p in by_kind.get(fix, []) if header_code.get(p)), None)
            said = (f" ({header} changes {header_code[header]})" if header else
                    f" (its generated code: {generator_inputs.words(generated)})" if fix == "codegen" and generated
                    else "")
            raise Refused(f"the fix touches {why}{said}, {CANNOT}")
        if shared:
            by_kind["shared"] = shared
        kernels = parts.Kernels(fix, {**by_kind, **({"declarations": kinds["declarations"]}
                                                    if kinds["declarations"] else {})}, "".join(code))
    if not shipped and kernels is None and (kinds["comments"] or kinds["declarations"]):
        only = kinds["comments"] + kinds["declarations"]
        raise Refused(f"the fix changes comments only in compiled files, or declarations only in headers "
                      f"({', '.join(only[:5])}): nothing compiled or run differs, so no arm can")
    if not shipped and kernels is None:
        raise Refused("the fix changes no file of the installed package "
                      f"(only: {', '.join((kinds['not_shipped'] + kinds['not_imported'])[:5])})")
    return "".join(shipped), kinds, kernels


def verdict(diff_text, package=PACKAGE):
    """The sheet's ``onefix`` for a fix's diff: ``yes`` (its Python files are patched into a
    release wheel), ``yes: kernels (...)`` (also, or only, an override library of its kernels),
    ``wheel: ...`` (yes if the release wheel ships the Python files it changes outside the
    package), or ``no: <why>``."""
    paths = [path for path, _ in split_diff(diff_text)]
    depends = [p for p in paths if classify(p, package) == "wheel"]
    try:  # as if the wheel shipped them: whether it does is the wheel's to say
        _, _, kernels = isolate(diff_text, package, wheel_files=set(paths) if depends else None)
    except Refused as exc:
        return "no: " + re.sub(r"^the fix (touches|changes) ", "", str(exc)).replace(f", {CANNOT}", "")
    if depends:
        return f"wheel: yes if the release wheel ships {', '.join(depends[:3])}"
    if kernels is None:
        return "yes"
    built = kernels.built or kernels.generator_inputs  # a formula alone: its generated backward node
    return (f"yes: kernels ({kernels.part}: {', '.join(built[:3])}{' ...' if len(built) > 3 else ''}"
            f"{'; its CUDA half needs a CUDA compiler' if kernels.files.get('cuda') else ''})")


def _check_section(path, section):
    """A patch may change regular files inside the tree, nothing else: a symlink (mode 120000),
    a submodule or any special mode, or a path that is absolute or climbs out, is refused."""
    modes = re.findall(r"(?m)^(?:new file mode|deleted file mode|old mode|new mode|index [0-9a-f]+\.\.[0-9a-f]+) ?(\d{6})?$", section)
    if any(m and m not in ("100644", "100755") for m in modes):
        raise Refused(f"the diff makes {path} a symlink or special file (mode {', '.join(m for m in modes if m)}): refused")
    heads = re.findall(r"(?m)^--- .*\n\+\+\+ (?:b/)?(\S+)", section)
    if len(heads) > 1:  # a plain-diff section after a git one would be read as part of it
        raise Refused(f"the diff holds a file section without its own `diff --git` header "
                      f"({heads[1]}): refused")
    names = re.findall(r"(?m)^(?:diff --git a/(\S+) b/(\S+)|--- a/(\S+)|\+\+\+ b/(\S+)|rename (?:from|to) (\S+))", section)
    for name in (n for group in names for n in group if n):
        if name.startswith("/") or ".." in name.split("/"):
            raise Refused(f"the diff names {name}, which leaves the package: refused")


def wheel_files(wheel):
    with reading(wheel), zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def make_overlay(wheel, patch_text, arm, out_dir):
    """Decide the direction on the wheel's own files and write the arm's overlay.

    Each change of the diff is placed in the release's copy of its file (``framework.patch``: the
    changed lines must be there, the context may have moved on), forwards (the release lacks the
    fix) or in reverse (it has it); exactly one direction must place every change. The patched
    files must give back the release's bytes when the fix is reversed on them again.

    Returns ``(fix_in_release, apply, overlay, placement)``: ``apply`` is ``forward``, ``reverse``
    or None (this arm is the release itself); ``overlay`` maps package paths to their patched
    sha256 (None: the patch deletes the file); ``placement`` says where and how each change sat
    in the release."""
    out_dir = Path(out_dir).resolve()
    write_text(out_dir / "fix.diff", patch_text)
    diffs = patch.parse(patch_text)
    with reading(wheel), zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        release = {path: archive.read(path) if path in names else None
                   for fd in diffs for path in (fd.path, fd.old_path) if path}
    try:
        direction, files, placement = direction_of(diffs, release)
    except NoDirection as exc:
        raise Refused(str(exc)) from None
    fix_in_release = direction == "reverse"
    if arm == ("corrected" if fix_in_release else "buggy"):
        return fix_in_release, None, {}, placement
    overlay = {}
    for path, content in files.items():
        if content is None:
            overlay[path] = None
            continue
        with atomic_open(out_dir / "overlay" / path, "wb") as handle:
            handle.write(content)
        overlay[path] = hashlib.sha256(content).hexdigest()
    return fix_in_release, direction, overlay, placement


def install_overlay(manifest, site_packages):
    """Copy an artifact's overlay over the installed package; returns the files' sha256 as
    installed (checked against the manifest). Stale bytecode of those files is removed.

    Each file is written beside its target and renamed over it: a venv made by uv holds hard
    links to uv's cache, and writing into a linked file would patch the cache and every other
    venv of the release. The rename gives the patched file an inode of its own."""
    overlay_dir = Path(manifest["overlay_dir"])
    site = Path(site_packages)
    installed = {}
    for path, digest in sorted(manifest["overlay"].items()):
        target = site / path
        cache = target.parent / "__pycache__"
        for stale in cache.glob(target.stem + ".*.pyc") if cache.exists() else ():
            stale.unlink()
        if digest is None:
            if target.exists():
                target.unlink()
            installed[path] = None
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        fresh = target.with_name(target.name + ".bugimpact-new")
        fresh.write_bytes((overlay_dir / path).read_bytes())
        os.replace(fresh, target)
        installed[path] = hashlib.sha256(target.read_bytes()).hexdigest()
        if installed[path] != digest:
            raise RuntimeError(f"{target}: sha256 {installed[path]} is not the overlay's {digest}")
    return installed


def describe(manifest):
    """What a one-fix arm is, in words, for a verdict's scope ("" for other artifacts): which arm is
    the release as shipped and which the release with the fix's diff applied or reversed."""
    if manifest.get("source") != "onefix" or manifest.get("status") == "failed":
        return ""
    release = manifest.get("release") or {}
    name = (f"torch {release['version']}" if release.get("version")
            else f"wheel {Path(str(release.get('wheel', '?'))).name}")
    what = {None: "as released", "forward": "with the fix's diff applied",
            "reverse": "with the fix's diff reversed"}[manifest.get("apply")]
    kernels = manifest.get("kernels")
    digest = manifest.get("patch_sha256") or (kernels or {}).get("diff_sha256") or "?"
    diff = f" (diff sha256 {digest[:12]})" if manifest.get("apply") else ""
    rebuilt = ""
    if kernels:
        source = kernels["source"]
        rebuilt = (f"; kernels rebuilt from {', '.join(Path(p).name for p in kernels['rebuild'])} "
                   f"({'reconstructed' if source['reconstructed'] else _own_source(source)})")
        generated = kernels.get("generated") or {}
        adds = generated.get("arm_adds") or []
        added = {taken_away.key(n) for n in adds}
        operators = [n for n in generated.get("operators") or [] if n not in adds]
        nodes = [n for n in generated.get("nodes") or [] if taken_away.key(n) not in added]
        if operators:
            rebuilt += (f", registered as its generated code calls them for {', '.join(operators[:4])}"
                        f"{' ...' if len(operators) > 4 else ''}")
        if nodes:
            rebuilt += (f", and its generated backward node{'s' * (len(nodes) > 1)} {', '.join(nodes[:4])}"
                        f"{' ...' if len(nodes) > 4 else ''} interposed")
        if adds:
            rebuilt += (f"; the operator{'s' * (len(adds) > 1)} {', '.join(adds[:4])}{' ...' if len(adds) > 4 else ''}"
                        " the arm adds registered with its schema, its Variable kernel and backward node compiled "
                        "from slices of its generated code (what only Python or TorchScript reaches left out: "
                        f"{', '.join(generated.get('left_out_for_added') or ['nothing'])})")
        lacking = generated.get("arm_lacks")
        if lacking:
            rebuilt += (f"; the operator{'s' * (len(lacking) > 1)} {', '.join(lacking[:4])}"
                        f"{' ...' if len(lacking) > 4 else ''} the arm lacks left registered as the release has "
                        f"{'them' if len(lacking) > 1 else 'it'}")
    return f"{name} {what}{diff}{rebuilt}{other_side.in_words(manifest.get('release_tries'))}"


def _own_source(source):
    """Where a release's own (not reconstructed) source was read, briefly: the archive shipped
    beside the fix, or the clone's or GitHub's tag or the release's commit."""
    if source.get("archive"):
        return f"archive {Path(source['archive']).name}"
    return source.get("origin", "?").rsplit(" at ", 1)[-1]
