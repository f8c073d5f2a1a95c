"""Compiled objects kept by what was compiled, so that overrides never compile the same thing
twice: every compiled fix's override compiles the release's own files (faithful, canary) beside
its arm's, the same for every fix to those files on that release and for an override made again
(a retried or lost runtime). THTensorMath.cpp takes 72 s a compile on 2 cores.

What was compiled is the compiler (its ``--version``), the flags that are not paths, and the
preprocessed source (``-E -P``), which holds every header's text. Paths are not part of it: each
compile maps its folders away from ``__FILE__`` (``-fmacro-prefix-map``), so the same files in
another override's folder are the same input, and one object serves both.
"""
import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

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
    """The object ``cmd`` makes: taken from ``cache`` where one with this digest is kept, else
    compiled and kept (a failed compile keeps nothing). One process at a time per digest, so two
    overrides' jobs never compile the same object at once. Returns (the compiler's output, or None for
    one taken from the cache)."""
    cache = Path(cache)
    cache.mkdir(parents=True, exist_ok=True)
    kept = cache / f"{digest}.o"
    with open(cache / f"{digest}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if kept.exists():
            shutil.copyfile(kept, cmd[-1])
            return None
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode == 0:
            partial = kept.with_name(f"{digest}.{os.getpid()}.partial")
            shutil.copyfile(cmd[-1], partial)
            os.replace(partial, kept)  # never a half-written object under its digest
        return out
