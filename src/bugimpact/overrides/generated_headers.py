"""A reconstruction checked by the headers its own generators write.

A release branch takes cherry-picks after it is cut, and the headers the wheel ships find the
branch point, not them. But the wheel also ships headers that ATen's generator (``gen.py``) writes
from ``native_functions.yaml`` and the TH declarations (``NativeFunctions.h``, ``TypeDefault.h``,
``Functions.h``, ...): a reconstruction is the release's only if its generator writes them byte for
byte. Where they differ, the lines that differ name operators; a master commit after the branch
point that adds or removes one in the generators' inputs (``git log -S``) is a cherry-pick the
branch point lacks: it is placed on the tree (a three-way merge of its own files), and kept if the
headers then differ less. Measured on the mirror: at 1.4.0's branch point 3 of 13 headers differ
until #31517 (``_test_optional_float``) is placed, then none; 1.3.0's own commit writes all 12;
1.5.x's branch point differs in 9 of 13 until #34794 (``true_divide_``), #35560 (``real`` and
``imag`` taken out of the out variants) and #35777 (``TensorBody.h``'s autograd docs) are placed,
then none. A difference no master commit explains is named, not placed. The names those lines hold
are kept (``differing_names``): an arm's generated code that names one is refused, the rest of
the generated code being the release's.

The tree's own generator runs on this interpreter (a 2019-2020 ``gen.py`` needs PyYAML only, which
the host has), about 4 s a tree, once per commit and cherry-picks: its output is kept
(``layout.GENERATED``). A tree without ``gen.py`` (torch 2.x's ``torchgen``) is not checked, and
says so. ``generate`` is also where an arm's generated code is made (``generated_code``): with the
arm's generator inputs put in, and the autograd, TorchScript and binding generators run after
``gen.py`` (about 6 s a tree in all).
"""
import fcntl
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from .. import layout
from ..failures import reading
from ..framework import patch
from ..framework.apply import NotPlaced, merged
from ..io import write_json

GEN = "aten/src/ATen/gen.py"
AUTOGRAD = "tools/setup_helpers/generate_code.py"  # the autograd, TorchScript and binding generators
# what gen.py reads, besides the files cmake/Codegen.cmake lists for it
TREES = ("aten/src/ATen", "tools", "cmake/Codegen.cmake", "aten/src/THNN", "aten/src/THCUNN",
         "torch/_utils_internal.py", "torch/_thnn")  # the last two: 2019 tools/nnwrap reads them
# the generators' inputs where an operator is declared: a cherry-pick that adds or removes one
INPUTS = ("aten/src/ATen/native/native_functions.yaml", "aten/src/ATen/Declarations.cwrap",
          "aten/src/ATen/nn.yaml")
CWRAP_FILES = re.compile(r"set\(cwrap_files(.*?)\)", re.S)
NAME = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
OPERATOR = re.compile(r"\baten::(\w+)")
PICKED_GENERATORS = ("tools/autograd", "tools/jit", "tools/shared", "tools/setup_helpers", "tools/codegen")
KEPT = "every output"  # what a generation keeps: in its key, so a folder kept before is made again
MOST_SEARCHES, MOST_PICKS = 16, 6  # how far the search for cherry-picks goes, each pick costing a generation
TEMPLATES = "aten/src/ATen/templates"  # what the generators write around what they generate
# a generator run as a script (its folder first on the path), with ``yaml.load`` as PyYAML before
# 5.1 had it: a Loader was optional then, and 2019's cwrap parsers pass none (PyYAML 6 requires one)
AS_ITS_DAY = ("import os, runpy, sys, yaml\n"
              "load = yaml.load\n"
              "yaml.load = lambda stream, Loader=None, **kw: load(stream, Loader=Loader or yaml.Loader, **kw)\n"
              "sys.argv = sys.argv[1:]\n"
              "sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))\n"
              "runpy.run_path(sys.argv[0], run_name='__main__')\n")
NOT_NAMES = {"Tensor", "TensorList", "Scalar", "const", "return", "if", "CAFFE2_API", "TORCH_API",
             "static", "inline", "void", "bool", "int64_t", "double", "std", "c10", "at"}


def git(clone, *args, binary=False, check=True):
    out = subprocess.run(["git", "-C", str(clone), *args], capture_output=True, check=check)
    return out.stdout if binary else out.stdout.decode("utf-8", "replace")


def generate(clone, commit, picks=(), files=None, autograd=False):
    """ATen's generated code at ``commit`` of ``clone`` with the cherry-picks ``picks`` placed on
    it (``placed``) and then ``files`` (path -> bytes: an arm's generator inputs) put in: {"files":
    {name under ATen/: bytes}, "headers": those that are headers, "seconds"} or {"error": why}.
    ``autograd``: also the code ``tools/setup_helpers/generate_code.py`` writes from ATen's
    ``Declarations.yaml`` (the autograd layer, its backward nodes, TorchScript's operator table and
    the Python bindings), named ``torch/<file>``. Kept under ``layout.GENERATED`` by what went in,
    made once however many jobs ask (two releases may share a branch point: 1.5.0 and 1.5.1)."""
    files = dict(files or {})
    key = hashlib.sha256(json.dumps([commit, list(picks), KEPT, AS_ITS_DAY, TREES, autograd, sorted(
        (p, hashlib.sha256(d).hexdigest()) for p, d in files.items())]).encode()).hexdigest()[:16]
    folder = Path(layout.GENERATED.format(tree=f"{commit[:12]}-{key}"))
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _generated(clone, commit, picks, files, autograd, folder)


def _generated(clone, commit, picks, files, autograd, folder):
    record = folder / "generated.json"
    if record.is_file():
        made = json.loads(record.read_text())
        if made.get("error") or all((folder / "out" / n).is_file() for n in made["names"]):
            return _read(made, folder)
    started = time.time()
    if not _exists(clone, commit, GEN):
        made = {"error": f"the tree has no {GEN} (a generator this check does not run)"}
        write_json(record, made)
        return made
    with tempfile.TemporaryDirectory(prefix="bugimpact-gen-") as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        have = [p for p in TREES if _exists(clone, commit, p)]
        subprocess.run(["tar", "-x", "-C", str(src)], input=git(clone, "archive", commit, *have, binary=True),
                       check=True)
        for path, data in {**placed(clone, commit, picks), **files}.items():
            (src / path).parent.mkdir(parents=True, exist_ok=True)
            (src / path).write_bytes(data)
        common = src / "aten/src/ATen/common_with_cwrap.py"
        if common.is_file() and (src / "tools/shared").is_dir():  # as the tree's setup.py does
            shutil.copy(common, src / "tools/shared/cwrap_common.py")
        internal = src / "torch/_utils_internal.py"  # the same, for 2019's tools/nnwrap
        if internal.is_file() and (src / "tools/shared").is_dir():
            shutil.copy(internal, src / "tools/shared/_utils_internal.py")
        listed = CWRAP_FILES.search((src / "cmake/Codegen.cmake").read_text()) \
            if (src / "cmake/Codegen.cmake").is_file() else None
        inputs = [p for p in (line.strip().replace("${CMAKE_CURRENT_LIST_DIR}/../", "")
                              for line in (listed.group(1) if listed else "").splitlines()) if p and (src / p).is_file()]
        out = Path(tmp) / "out"
        ran = subprocess.run([sys.executable, "-c", AS_ITS_DAY, GEN, "--source-path", "aten/src/ATen", "--install_dir", str(out),
                              *inputs], cwd=src, capture_output=True, text=True)
        names = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) if out.is_dir() else []
        if not any(n.endswith(".h") for n in names):  # gen.py's closing check may fail after it wrote
            made = {"error": f"{GEN} wrote no header (exit {ran.returncode}): {ran.stderr.strip()[-300:]}"}
            write_json(record, made)
            return made
        if autograd:
            why = _autograd(src, out)
            if why:
                made = {"error": why}
                write_json(record, made)
                return made
            names = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
        if folder.exists():
            shutil.rmtree(folder)
        shutil.copytree(out, folder / "out")
    made = {"names": names, "seconds": round(time.time() - started, 1), "exit": ran.returncode}
    write_json(record, made)
    return _read(made, folder)


def _autograd(src, out):
    """Run the tree's ``generate_code.py`` on the ``Declarations.yaml`` gen.py wrote, into
    ``out/torch``; returns why it could not, or ""."""
    if not (src / AUTOGRAD).is_file() or not (out / "Declarations.yaml").is_file():
        return f"the tree has no {AUTOGRAD}, or {GEN} wrote no Declarations.yaml"
    ran = subprocess.run([sys.executable, "-c", AS_ITS_DAY, AUTOGRAD, "--declarations-path", str(out / "Declarations.yaml"),
                          "--nn-path", "aten/src", "--install_dir", str(out / "torch")],
                         cwd=src, capture_output=True, text=True)
    if ran.returncode != 0:
        return f"{AUTOGRAD} failed (exit {ran.returncode}): {ran.stderr.strip()[-300:]}"
    return ""


def _read(made, folder):
    files = {n: (folder / "out" / n).read_bytes() for n in made.get("names", ())}
    return {**made, "files": files, "headers": {n: data for n, data in files.items() if n.endswith(".h")}}


def placed(clone, commit, picks):
    """The files under ``aten/src`` the cherry-picks ``picks`` change (the generator's inputs, and
    the kernels a fix may rebuild; not the tests a wheel is not made from), and those of the
    generators ``generate`` runs (``PICKED_GENERATORS``: #31517 taught 1.4's TorchScript generator
    the ``float?`` it adds), as the tree at ``commit`` has them with each made on it in turn (a
    three-way merge of the pick's own file, as ``git cherry-pick`` does); raises ``NotPlaced``
    naming a conflict under ``aten/src``. A generator's file that does not place is left as the
    tree has it: a generator that then fails says so (``generate``'s error)."""
    files = {}
    for pick in picks:
        for path in git(clone, "diff", "--name-only", f"{pick}^", pick, "--", "aten/src",
                        *PICKED_GENERATORS).split():
            old = _blob(clone, f"{pick}^", path)
            new = _blob(clone, pick, path)
            have = files.get(path, _blob(clone, commit, path))
            if old is None or new is None or have is None:
                if new is not None and have is None and old is None:  # a file the pick adds
                    files[path] = new
                continue  # removed by it, or absent here: nothing a generator reads changes
            try:
                files[path] = merged(have, old, new, "old", path)
            except NotPlaced:  # e.g. an operator added where master had changed the entry below it
                diff = git(clone, "diff", "--full-index", f"{pick}^", pick, "--", path)
                try:
                    files[path] = _added_after_lines_before(have, patch.parse(diff), path)
                except NotPlaced:
                    if not path.startswith("aten/src/"):
                        continue
                    raise
    return files


def _added_after_lines_before(have, diffs, path):
    """``have`` with each change of ``diffs`` that only adds lines placed after the context lines
    above it, where they stand once (the lines below may have changed since: the entry that
    follows a new operator in ``native_functions.yaml``). What this places is judged by its outcome:
    a cherry-pick is kept only where the generated headers then differ less (``check``)."""
    lines = have.decode("utf-8", "replace").split("\n")
    for change in reversed([c for fd in diffs for h in fd.hunks for c in patch.changes(h)]):
        above = change.before
        at = [i for i in range(len(lines) - len(above) + 1) if lines[i:i + len(above)] == above]
        if change.old or not above or len(at) != 1:
            raise NotPlaced(f"{path}: a change that is not an addition after lines that stand once")
        lines[at[0] + len(above):at[0] + len(above)] = change.new
    return "\n".join(lines).encode()


def compared(headers, wheel):
    """The generated headers the wheel ships, each the same or not: {"same": n, "of": m, "differ":
    {name: the lines only one side has}}."""
    with reading(wheel), zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        shipped = {n: archive.read(f"torch/include/ATen/{n}") for n in headers if f"torch/include/ATen/{n}" in names}
    differ = {}
    for name, data in shipped.items():
        if data != headers[name]:
            ours, theirs = set(headers[name].decode(errors="replace").splitlines()), \
                set(data.decode(errors="replace").splitlines())
            differ[name] = sorted(ours ^ theirs)
    return {"same": len(shipped) - len(differ), "of": len(shipped), "differ": differ}


def check(clone, commit, wheel, since, until, branch, unlike_wheel):
    """Whether ``commit``'s generator writes the wheel's generated headers, with the cherry-picks
    of ``branch`` (master commits from ``since`` to ``until``) that make more of them the same
    placed (module doc); ``unlike_wheel(files)``: the files (path -> bytes) that are headers the
    wheel ships otherwise (a pick that makes one is not the release's). Returns what the
    reconstruction record keeps."""
    made = generate(clone, commit)
    if made.get("error"):
        return {"checked": False, "why": made["error"]}
    now = compared(made["headers"], wheel)
    picks, tried = [], []
    while now["differ"] and len(tried) < MOST_PICKS:
        # searched again from what still differs after each pick kept
        fresh = [c for c in _candidates(clone, now["differ"], since, until, branch) if c not in tried]
        kept = None
        for pick in fresh[:MOST_PICKS - len(tried)]:
            tried.append(pick)
            kept = _better(clone, commit, [*picks, pick], wheel, now, unlike_wheel)
            if kept:
                picks, now = [*picks, pick], kept
                break
        if not kept:
            break
    return {"checked": True, "same": now["same"], "of": now["of"], "differ": sorted(now["differ"]),
            "names": differing_names(now["differ"]),
            "cherry_picks": [{"commit": p, "subject": git(clone, "show", "-s", "--format=%s", p).strip()}
                             for p in picks],
            "tried": len(tried), "example": next((f"{n}: {lines[0].strip()}" for n, lines in sorted(now["differ"].items())
                                                  if lines), "")}


def _better(clone, commit, picks, wheel, now, unlike_wheel):
    """What the generated headers compare as with ``picks`` placed, where they differ from the
    wheel's less than ``now``; else None (also where a pick does not place, fails the generator or
    makes a header the wheel ships otherwise)."""
    try:
        if unlike_wheel(placed(clone, commit, picks)):
            return None
        again = generate(clone, commit, picks)
    except NotPlaced:
        return None
    if again.get("error"):
        return None
    better = compared(again["headers"], wheel)
    if len(better["differ"]) < len(now["differ"]) or \
            sum(map(len, better["differ"].values())) < sum(map(len, now["differ"].values())):
        return better
    return None


def differing_names(differ):
    """The functions and operators (``aten::imag``) the lines that differ name: where the
    reconstruction's generated code is not the release's (an arm's generated code that names one
    is refused: ``overrides.arm.generated_for``)."""
    return sorted({n for lines in differ.values() for line in lines
                   for n in NAME.findall(line) + OPERATOR.findall(line)} - NOT_NAMES)


def _candidates(clone, differ, since, until, branch):
    """The master commits after the branch point that may make the differing lines the wheel's,
    oldest first for each thing the lines name: first those that declare or take away an operator
    they name (``aten::imag``), searched as the generators' inputs spell it (``func: imag.``: the
    generated ``imag_out`` is written nowhere in them), then those that add or remove a function
    name of the lines in the inputs or in ATen's templates (``TensorBody.h``'s own text)."""
    searches = []
    for lines in differ.values():
        for line in lines:
            for op in OPERATOR.findall(line):
                searches += [(f"func: {op}{end}", INPUTS) for end in "(."]
    for lines in differ.values():
        for line in lines:
            searches += [(name, (*INPUTS, TEMPLATES)) for name in NAME.findall(line) if name not in NOT_NAMES]
    found, done = [], []
    for text, paths in searches:
        if (text, paths) in done or len(done) >= MOST_SEARCHES:
            continue
        done.append((text, paths))
        log = git(clone, "log", "--first-parent", "--reverse", "--format=%H", f"--since={since}", f"--until={until}",
                  f"-S{text}", branch, "--", *paths, check=False)
        found += [c for c in log.split() if c not in found]
    return found


def _exists(clone, commit, path):
    return subprocess.run(["git", "-C", str(clone), "cat-file", "-e", f"{commit}:{path}"],
                          capture_output=True).returncode == 0


def _blob(clone, commit, path):
    out = subprocess.run(["git", "-C", str(clone), "cat-file", "blob", f"{commit}:{path}"], capture_output=True)
    return out.stdout if out.returncode == 0 else None


def in_words(checked):
    """What the check found, for a reconstruction's origin line."""
    if not checked or not checked.get("checked"):
        return f"generated headers not checked: {(checked or {}).get('why', 'no record')}"
    picks = "".join(f", with {p['subject']} placed" for p in checked["cherry_picks"])
    if not checked["differ"]:
        return f"its generator writes the wheel's {checked['of']} generated headers{picks}"
    return (f"{len(checked['differ'])} of the wheel's {checked['of']} generated headers differ{picks} "
            f"({checked['example'][:120]})")
