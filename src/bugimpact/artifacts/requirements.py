"""Extra runtime requirements named by what they install, for runtime identities."""
import hashlib
from pathlib import Path

from ..harness.files import sha256_file

SKIPPED_IN_PACKAGES = ("__pycache__", ".git", "build", "dist")  # and *.egg-info, *.pyc


def requirements_identity(requirements):
    """Requirements as what they install: a local package folder or wheel by its content (edit the
    model package and the runtime, so the runs, are new), a package name by its text."""
    out = []
    for req in requirements:
        path = Path(req)
        if path.is_file():
            out.append({"path": req, "sha256": sha256_file(path)})
        elif path.is_dir():
            out.append({"path": req, "sha256": folder_sha256(path)})
        else:
            out.append(req)
    return out


def folder_sha256(path):
    """A package folder's content: its files' names and bytes, build leftovers and caches left out."""
    digest = hashlib.sha256()
    for item in sorted(Path(path).rglob("*")):
        rel = item.relative_to(path)
        if item.is_file() and not any(part in SKIPPED_IN_PACKAGES or part.endswith(".egg-info")
                                      for part in rel.parts) and item.suffix != ".pyc":
            digest.update(str(rel).encode() + b"\0" + item.read_bytes() + b"\0")
    return digest.hexdigest()
