"""Compiled objects kept by what was compiled, so that overrides never compile the same thing
twice: every compiled fix's override compiles the release's own files (faithful, canary) beside
its arm's, the same for every fix to those files on that release and for an override made again
(a retried or lost runtime). THTensorMath.cpp takes 72 s a compile on 2 cores.

What was compiled is the compiler (its ``--version``), the flags that are not paths, and the
preprocessed source (``-E -P``), which holds every header's text. Paths are not part of it: each
compile maps its folders away from ``__FILE__`` (``-fmacro-prefix-map``), so the same files in
another override's folder are the same input, and one object serves both.

A kept object proves itself before it is taken: its seal (``<digest>.json``) names the key it was
made for and its own sha256. One cut short, replaced by another object (the faithful build's in
the arm's place built the arm from the release's code), or kept without its seal is compiled
again, and the build's log names the file.
"""
import fcntl
import functools
import hashlib
import json
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..harness.files import sha256_file

log = logging.getLogger("bugimpact")
# flags that name where files are, not what is compiled
PATH_FLAGS = ("-I", "-fmacro-prefix-map=")


def path_maps(flags, root):
    """``-fmacro-prefix-map`` for the compile's own folder (``root``) and each include folder:
    ``__FILE__`` as the path below it, the same wherever the files lie."""
    folders = [str(root), *(f[2:] for f in flags if f.startswith("-I"))]
    return [f"-fmacro-prefix-map={folder.rstrip('/')}/=" for folder in folders]


@functools.lru_cache(maxsize=None)
def _compiler(cxx):
    return subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout


def key(cmd):
    """What ``cmd`` (``[cxx, *flags, "-c", source, "-o", object]``) compiles, as a digest, or
    None where the preprocessor fails on it (the compile then says why)."""
    cxx, flags, source = cmd[0], cmd[1:-4], cmd[-3]
    out = subprocess.run([cxx, *flags, "-E", "-P", source], capture_output=True)
    if out.returncode != 0:
        return None
    digest = hashlib.sha256()
    for part in (_compiler(cxx), *(f for f in flags if not f.startswith(PATH_FLAGS))):
        digest.update(part.encode() + b"\0")
    digest.update(out.stdout)
    return digest.hexdigest()


def compiled(cache, digest, cmd):
    """The object ``cmd`` makes: taken from ``cache`` where one with this digest is kept whole
    (``unsealed``), else compiled and kept with its seal (a failed compile keeps nothing). One
    process at a time per digest, so two overrides' jobs never compile the same object at once.
    Returns the compiler's output (one that replaced a kept object that was not whole says so
    first), or None for one taken from the cache."""
    cache = Path(cache)
    cache.mkdir(parents=True, exist_ok=True)
    kept_at, seal = kept(cache, digest), cache / f"{digest}.json"
    with open(cache / f"{digest}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        remade = ""
        if kept_at.exists():
            why = unsealed(kept_at, seal, digest)
            if not why:
                shutil.copyfile(kept_at, cmd[-1])
                return None
            remade = f"(the kept object {kept_at} {why}: compiled again)\n"
            log.warning("%s", remade.strip())
            kept_at.unlink()
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode == 0:
            partial = kept_at.with_name(f"{digest}.{os.getpid()}.partial")
            shutil.copyfile(cmd[-1], partial)
            made = {"key": digest, "sha256": sha256_file(partial), "bytes": partial.stat().st_size}
            os.replace(partial, kept_at)  # never a half-written object under its digest
            sealing = seal.with_name(f"{digest}.{os.getpid()}.seal")
            sealing.write_text(json.dumps(made, sort_keys=True))
            os.replace(sealing, seal)
        out.stdout = remade + out.stdout
        return out


def kept(cache, digest):
    """Where the object of ``digest`` is kept in ``cache``."""
    return Path(cache) / f"{digest}.o"


def unsealed(kept, seal, digest):
    """Why the object ``kept`` is not the one its digest names, in words, or "" where its seal
    says it is: made for this key, and its bytes those it was kept with."""
    try:
        made = json.loads(seal.read_text())
    except FileNotFoundError:
        return "has no seal saying what it was compiled from (kept before seals, or its seal lost)"
    except (OSError, ValueError):
        return f"has a seal that does not read ({seal})"
    if not isinstance(made, dict) or made.get("key") != digest:
        return f"is sealed for another compile ({str((made or {}).get('key', '?'))[:16]} in {seal})"
    if made.get("sha256") != sha256_file(kept):
        return (f"is not the object it was kept as ({kept.stat().st_size} bytes, sealed {made.get('bytes')}): "
                "cut short or replaced")
    return ""


def same_code(a, b):
    """Whether two objects hold the same code and data: the same bytes, or the same once their
    debug sections (which name the folder they were compiled in) are left out."""
    if Path(a).read_bytes() == Path(b).read_bytes():
        return True
    with tempfile.TemporaryDirectory(prefix="bugimpact-objects-") as tmp:
        stripped = []
        for i, path in enumerate((a, b)):
            out = Path(tmp) / f"{i}.o"
            subprocess.run(["objcopy", "--strip-debug", str(path), str(out)], check=True, capture_output=True)
            stripped.append(out.read_bytes())
    return stripped[0] == stripped[1]


def the_release_in_the_arm(jobs, kept, changed=None):
    """Why the arm is the release, or "": where the arm compiles other source than the faithful
    build (``jobs``: an override's compiles; another preprocessed text) in a file the fix changes
    (``changed``; None: every file), its object must hold other code. One alike is an arm that
    would pass the check as the fix: the build compiles the fix out, or the object is not the
    arm's own (``kept``: the objects taken from the cache, by what kept file each came from, which
    is named). A file rebuilt with the fix's own (an includer of a header whose declarations the
    fix changes) may well compile to the release's code."""
    faithful = {path: cmd for name, path, cmd in jobs if name == "faithful"}
    for name, path, cmd in jobs:
        if changed is not None and path not in changed:
            continue
        if name == "arm" and same_code(cmd[-1], faithful[path][-1]) and key(cmd) != key(faithful[path]):
            came = (f"its object, taken from {kept[cmd[-1]]}, holds the release's code: a kept object that is not "
                    "the arm's own (remove it)" if cmd[-1] in kept else
                    "its object holds the release's code: this build compiles the fix out")
            return f"the arm's {path} is other source than the release's, yet {came}; the arm would be the release"
    return ""
