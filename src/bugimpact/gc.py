"""``bugimpact gc``: what no current config or record refers to, and removing it.

Kept: every artifact (build manifest and wheel) that a current config's plan or any run record
names (a record's artifact is its provenance); the runtimes (venvs, runtime images) and toolchain
images the current configs would use; the cached wheels the kept artifacts point at; the packages
in uv's cache that a kept venv links to. The rest is a cache that the workflow rebuilds when a
config needs it again. A cached wheel is removed only when a manifest the project wrote names it
(one it no longer needs): a wheel no manifest names is not the project's, and is never touched.
Sizes are what removing frees: bytes a kept venv still links are not.
"""
import os
import shutil
from pathlib import Path

from .artifacts.docker import RUNTIME_REPO, TOOLCHAIN_REPO
from .artifacts.engine import Engine
from .artifacts.interpreters import wheel_tags
from .artifacts.source_kinds import source
from .config import SHEET_SCHEMA
from .io import read_json
from .plan import Plan


def referenced(configs, results="results"):
    """What the configs' plans and the records under ``results`` use (``configs``: each config by
    the file it was read from)."""
    keep = {"artifacts": set(), "runtimes": set(), "toolchains": set(), "wheel_caches": set(),
            "wheel_dirs": set(), "named": set(), "uv_caches": set()}
    for path, config in configs.items():
        plan = Plan(config, SHEET_SCHEMA, path)
        keep["artifacts"] |= set(plan.artifacts)
        keep["runtimes"] |= {f"{a.runtime}/{a.ident}" for a in plan.placed_artifacts()}
        if plan.toolchain:
            keep["toolchains"].add(plan.toolchain)
        cache = config["artifacts"]["wheel_cache"]
        keep["wheel_caches"].add(cache)
        keep["uv_caches"].add(config["runtime"]["cache"])
        specs = [a.spec for a in plan.artifacts.values()]
        keep["wheel_dirs"] |= {str(d) for d in release_wheel_dirs(specs, cache)}
        keep["named"] |= {str(Path(w).resolve()) for w in named_wheels(specs)}
    for folder in ("runs", "repeats"):
        for path in Path(results, folder).rglob("*.json"):
            try:
                keep["artifacts"].add(read_json(path)["spec"]["artifact"])
            except (KeyError, TypeError, ValueError, OSError):
                continue  # a broken record keeps nothing alive (`bugimpact verify` lists it)
    return keep


def named_wheels(specs):
    """Wheel files a config names itself (a ``wheel`` arm, a one-fix release wheel): a person's
    files, never garbage, wherever they live."""
    for spec in specs:
        release = source(spec["source"]).release(spec)
        wheel = release.get("wheel")
        if wheel and "://" not in wheel:
            yield wheel


def release_wheel_dirs(specs, cache):
    """The cache folders of the release wheels that these artifacts need (made or not yet): a
    download of 400-750 MB each is kept while a current config wants it."""
    for spec in specs:
        release = source(spec["source"]).release(spec)
        folder = source(release["source"]).cache_dir(release, cache)
        if folder is not None:
            # a docker runtime's interpreter is only known inside its image: any tag of the version
            yield folder / wheel_tags(spec["python"])["key"] if spec.get("python") else folder


def _wheels_named(manifests):
    """The wheels (resolved paths) that these artifact manifests name: what the project fetched
    into its cache and recorded."""
    out = set()
    for manifest in manifests:
        try:
            record = read_json(manifest)
        except (OSError, ValueError):
            continue  # a broken manifest names nothing (`bugimpact retry-failed` lists it)
        if isinstance(record, dict) and record.get("wheel"):
            out.add(str(Path(record["wheel"]).resolve()))
    return out


def _stats(path):
    """The stat of every regular file under ``path`` (or of ``path``, a file)."""
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file() and not p.is_symlink()]
    return [f.stat() for f in files]


def _links_within(paths):
    """How many of the files under ``paths`` are each inode ((device, inode) -> count)."""
    links = {}
    for path in paths:
        for st in _stats(path):
            links[(st.st_dev, st.st_ino)] = links.get((st.st_dev, st.st_ino), 0) + 1
    return links


def _freed(paths):
    """Bytes that removing each of ``paths`` frees: a file hard-linked from elsewhere (a venv's
    file in uv's cache) frees nothing, and a file linked from several of them counts once, with
    the first path that holds it."""
    links, freed, counted = _links_within(paths), {path: 0 for path in paths}, set()
    for path in paths:
        for st in _stats(path):
            key = (st.st_dev, st.st_ino)
            if key not in counted and links[key] >= st.st_nlink:
                freed[path] += st.st_size
            counted.add(key)
    return freed


def _unlinked_cache_entries(caches, removed):
    """uv cache entries (one unpacked package each) that no venv links to once ``removed`` is
    gone: every file's links lie in the entry itself or in what is removed."""
    elsewhere = _links_within(removed)
    for cache in sorted(caches):
        for entry in sorted(Path(cache).glob("archive-v*/*/")):
            if all(st.st_nlink <= 1 + elsewhere.get((st.st_dev, st.st_ino), 0) for st in _stats(entry)):
                yield entry


def _images():
    """The project's docker images: (repo:tag, size in bytes); none when Docker is not running."""
    return Engine().images((RUNTIME_REPO, TOOLCHAIN_REPO)) if Engine.answers() else []


def garbage(configs, results="results"):
    """Everything to remove: a list of (kind, what, bytes), paths as strings."""
    keep = referenced(configs, results)
    res = Path(results)
    found = []
    kept_manifests = []
    for folder in sorted((res / "artifacts").glob("*/")):
        if folder.name in keep["artifacts"]:
            kept_manifests.append(folder / "manifest.json")
        else:
            found.append(("artifact", folder))
    kept_runtimes = []
    for folder in sorted((res / "runtimes").glob("*/*/")):
        if f"{folder.parent.name}/{folder.name}" in keep["runtimes"]:
            kept_runtimes.append(folder / "runtime.json")
        else:
            found.append(("runtime", folder))
    for record in sorted((res / "toolchains").glob("*.json")):
        if record.stem not in keep["toolchains"]:
            found.append(("toolchain record", record))
    kept_wheels = _wheels_named(kept_manifests)
    ours = kept_wheels | _wheels_named(folder / "manifest.json" for kind, folder in found
                                       if kind == "artifact")
    for cache in sorted(keep["wheel_caches"]):
        for wheel in sorted(Path(cache).glob("**/*.whl")):
            # a wheel no manifest names is not the project's (a person put it there): never removed
            if str(wheel.resolve()) in ours - kept_wheels - keep["named"] and not any(
                    str(wheel).startswith(d + os.sep) for d in keep["wheel_dirs"]):
                found.append(("cached wheel", wheel))
    found += [("uv cache entry", entry) for entry in _unlinked_cache_entries(
        keep["uv_caches"], [path for kind, path in found if kind == "runtime"])]
    # a file linked from a venv and uv's cache is counted with the cache entry: it is the package
    freed = _freed([path for kind, path in sorted(found, key=lambda item: item[0] != "uv cache entry")])
    out = [(kind, str(path), freed[path]) for kind, path in found]
    images_in_use = {read_json(p).get("image") for p in kept_runtimes if p.exists()}
    images_in_use |= {read_json(p)["tag"] for p in (res / "toolchains").glob("*.json")
                      if p.stem in keep["toolchains"]}
    out += [("docker image", name, size) for name, size in _images() if name not in images_in_use]
    return out


def remove(items):
    """Remove what ``garbage`` found; returns the lines that could not be removed."""
    problems = []
    for kind, what, _ in items:
        if kind == "docker image":
            from .artifacts.engine import Engine  # the Docker SDK: only where an engine is used
            refused = Engine().remove_image(what)
            if refused:
                problems.append(f"{what}: {refused[-300:]}")
        elif os.path.isdir(what):
            shutil.rmtree(what)
        else:
            os.unlink(what)
    return problems


def report(items):
    lines = [f"{kind:16} {size / 1e6:10.1f} MB  {what}" for kind, what, size in items]
    total = sum(size for _, _, size in items)
    return lines + [f"{len(items)} item(s), {total / 1e9:.2f} GB"]

