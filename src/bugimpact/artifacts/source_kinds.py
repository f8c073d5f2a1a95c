"""Artifact sources: where an arm's framework comes from, each in one class behind one interface.

A source says which field an arm needs and what else it refuses at start, whether a sheet row's
arm still lacks its commits or diff, the artifact's id (keyed by what it is, never by the bug that
uses it), whether its wheel must fit the runtime's interpreter, whether it is built from a commit
(by the docker step), where it can run, which release a reach trace of its fix runs on, where its
fix is, the arms it makes of an accepted sheet row, the clone preflight checks its commits in, the
cache folder of its downloads, the pattern of its ids (the rules' ``{artifact}`` wildcard), how
its manifest is made, and which files a made manifest names that are gone for good (``lost``) or
fetched again (``fetched``). The plan, the rules, the runtime kinds, reach, preflight, the artifact step
and gc ask the source; adding one (a nightly, a conda package) is one class, registered in ``SOURCES`` here
or with ``@register`` from a plugin (``bugimpact.plugins``); the config schema takes the names
from there (``config.code_lists``)."""
import hashlib
import json
import re
import time
from pathlib import Path

from ..harness.files import sha256_file
from ..harness.registry import ARMS
from ..io import ConfigError, InputError, read_json
from ..overrides.arm import prepare
from ..overrides.kernel_tree import not_as_made
from ..plugins import Registry
from . import onefix, other_side
from .diffs import fix_diff
from .sources import installed_manifest, pypi_cache_dir, pypi_wheel, usable, user_wheel, wheel_manifest


class Lost(RuntimeError):
    """A file an artifact's manifest names is gone and cannot be had again as it was: the artifact
    must be made again (``bugimpact retry-failed`` removes its manifest)."""


class Source:
    name = ""
    needs = ""  # the arm field that says which one (a version, a commit, a wheel)
    fits_interpreter = False  # a release wheel, chosen for the runtime's Python
    built = False  # built from a commit by the docker step, with the toolchain image
    on_host = False  # the torch of the interpreter that runs the study: no artifact to install
    in_docker = True  # can run in a docker runtime image
    a_release = False  # a released wheel: what a one-fix arm's release can be
    commit_fields = ()  # the arm's fields naming commits a clone must hold (preflight checks)
    overrides = False  # may carry a compiled fix's override library, checked on the workload
    # the JSON schema of its own settings, ``artifacts.<name>`` in the config (None: it has none);
    # ``make`` finds them in its spec's ``settings`` (an edit remakes its artifacts)
    settings_schema = None

    @property
    def id_pattern(self):
        """The artifact ids ``identity`` makes, as a regular expression: the rules' ``{artifact}``
        wildcard is constrained by it (``artifact_pattern``)."""
        return re.escape(self.name) + r"(?:-[^/]+)?"

    def check(self, bug, arm, spec):
        """Refuse, naming the config key, an arm of this source the config leaves unmakeable."""
        if self.needs and not spec.get(self.needs):
            raise ConfigError(f"bug {bug}, arm {arm}: source {self.name} needs "
                              f"'{self.needs}'", field=f"bugs.{bug}.{arm}.{self.needs}")

    def unresolved(self, spec):
        """Whether a sheet row's arm still lacks what resolution gives (its commits or diff)."""
        return False

    def reach_release(self, arm, reach_version):
        """The release a reach trace of this arm's fix runs on (``reach_version``: reach.release,
        the sheet's release read), or None when the arm's fix needs no trace."""
        return None

    def sheet_arms(self, row, artifacts_cfg):
        """Both arms of an accepted sheet row when this source is ``artifacts.source``: the
        row's buggy and corrected commits."""
        return {"buggy": {"source": self.name, "commit": row["buggy_sha"]},
                "corrected": {"source": self.name, "commit": row["corrected_sha"]}}

    def sheet_override(self, spec, arm, row):
        """An arm that ``bugs.overrides`` sets for a sheet row, with what the row adds to it."""
        return dict(spec)

    def clone(self, config):
        """The clone this source's commits are read from, and the config key that names it."""
        return "", ""

    def cache_dir(self, release, cache):
        """The folder of the wheel cache that holds this release's downloads, or None when it
        downloads nothing (gc keeps it while a config wants the release)."""
        return None

    def fix(self, arms):
        """Where a bug's fix is, from its two arms: their commits, or a patch file."""
        return {"buggy_sha": arms["buggy"].get("commit"), "corrected_sha": arms["corrected"].get("commit"),
                "patch": arms["corrected"].get("patch")}

    def identity(self, arm, recipe_sha, target):
        raise NotImplementedError

    def release(self, arm):
        """The released package this arm is, or is made from (gc keeps its cached wheel)."""
        return arm

    def make(self, sources, spec, folder, toolchain_json=None):
        """The artifact's manifest (``sources``: ``steps.artifact_sources``)."""
        raise NotImplementedError(f"artifact source {self.name!r} is built by the docker step")

    def lost(self, manifest):
        """The files a made artifact's manifest names that are gone for good: missing, and not a
        download this source fetches again (``fetched`` does that). Any: the artifact is stale."""
        wheel = manifest.get("wheel")
        return [wheel] if wheel and not Path(wheel).is_file() else []

    def fetched(self, manifest, sources):
        """The manifest with every file it names at hand, for the runtime that installs it: a
        cached download that has gone is fetched again into the cache and must be the same bytes.
        Raises ``Lost`` naming what cannot be had (``sources``: ``steps.artifact_sources``)."""
        gone = self.lost(manifest)
        if gone:
            raise Lost(f"the artifact's {', '.join(gone)} is gone")
        return manifest


class Installed(Source):
    name, on_host, id_pattern = "installed", True, "installed"

    def identity(self, arm, recipe_sha, target):
        return "installed"

    def make(self, sources, spec, folder, toolchain_json=None):
        return installed_manifest()


class PyPI(Source):
    name, needs, fits_interpreter, a_release = "pypi", "version", True, True

    def identity(self, arm, recipe_sha, target):
        return f"pypi-{arm['version']}-{target}" if target else f"pypi-{arm['version']}"

    def cache_dir(self, release, cache):
        return pypi_cache_dir(cache, release["version"])

    def make(self, sources, spec, folder, toolchain_json=None):
        started = time.time()
        python = _target_interpreter(spec, toolchain_json)
        wheel = pypi_wheel(spec["version"], sources["wheel_cache"], python, sources["pip_index_url"])
        manifest = wheel_manifest("pypi", wheel, started)
        manifest.update(version_requested=spec["version"], python=python)
        return manifest

    def lost(self, manifest):
        return []  # the index has it: fetched again when the cache lost it

    def fetched(self, manifest, sources):
        if not sources or _at_hand(manifest):
            return super().fetched(manifest, sources)
        wheel = pypi_wheel(manifest["version_requested"], sources["wheel_cache"], manifest["python"],
                           sources["pip_index_url"])
        return _same_bytes(manifest, wheel, f"the index's torch=={manifest['version_requested']}")


class Wheel(Source):
    name, needs, a_release = "wheel", "wheel", True
    id_pattern = r"wheel-[0-9a-f]+"

    def identity(self, arm, recipe_sha, target):
        ident = arm.get("sha256") or hashlib.sha256(arm["wheel"].encode()).hexdigest()
        return f"wheel-{ident[:16]}"

    def make(self, sources, spec, folder, toolchain_json=None):
        started = time.time()
        wheel = user_wheel(spec["wheel"], spec.get("sha256", ""), sources["wheel_cache"])
        return dict(wheel_manifest("wheel", wheel, started), location=spec["wheel"])

    def lost(self, manifest):
        location = manifest.get("location", "")
        remote = location.startswith(("http://", "https://"))
        if Path(manifest["wheel"]).is_file() or remote or (location and Path(location).is_file()):
            return []
        return [manifest["wheel"]] + ([location] if location else [])

    def fetched(self, manifest, sources):
        if not sources or not manifest.get("location") or _at_hand(manifest):  # (no location: an
            return super().fetched(manifest, sources)                       # older manifest)
        wheel = user_wheel(manifest["location"], manifest["wheel_sha256"], sources["wheel_cache"])
        return _same_bytes(manifest, wheel, manifest["location"])


class Docker(Source):
    name, needs, built = "docker", "commit", True
    id_pattern = r"docker-[0-9a-f]+-[0-9a-f]+"
    commit_fields = ("commit",)

    def clone(self, config):
        return config["artifacts"][self.name]["clone"], f"artifacts.{self.name}.clone"

    def unresolved(self, spec):
        return not spec.get("commit")

    def reach_release(self, arm, reach_version):
        return {"source": "pypi", "version": reach_version} if reach_version else None

    def identity(self, arm, recipe_sha, target):
        return f"docker-{arm['commit'][:12]}-{recipe_sha}"


class OneFix(Source):
    """A release wheel plus one arm's overlay of the fix's Python files, and an override library
    of its kernels where it changes op files (built by the runtime, ``artifacts.kernels``)."""
    name, needs, fits_interpreter, in_docker, overrides = "onefix", "release", True, False, True
    commit_fields = ("buggy_sha", "corrected_sha")  # the diff's, where no patch file gives it

    def clone(self, config):
        return (config["artifacts"][self.name]["clone"] or config["resolve"]["clone"],
                f"artifacts.{self.name}.clone")

    def reach_release(self, arm, reach_version):
        return dict(arm["release"])

    def fix(self, arms):
        return arms["corrected"]  # its diff (a patch, or the commits), its release, its arm

    @classmethod
    def arms(cls, release, fix):
        """Both arms of a one-fix bug: one release, one diff (a patch file or the row's commits),
        the sheet's ``onefix`` verdict where it says no (the refusal's reason when no diff is at
        hand; a ``yes`` changes nothing, so finished one-fix studies are not redone), and the
        release whose notes list the fix where it is another (``notes_release``: a fix that
        landed after the release was cut is in it only where its notes list it)."""
        refused = {"onefix": fix["onefix"]} if str(fix.get("onefix", "")).startswith("no:") else {}
        notes = fix.get("notes_release") or ""
        listed = {"notes_release": notes} if notes and notes.lstrip("v") != release.get("version") else {}
        return {arm: {"source": cls.name, "release": dict(release), "arm": arm, **refused, **listed,
                      **{k: fix[k] for k in ("patch", "buggy_sha", "corrected_sha") if fix.get(k)}}
                for arm in ARMS}

    def sheet_arms(self, row, artifacts_cfg):
        """The release (version ``sheet``: the release whose notes list the fix, ``v1.4.0``:
        torch 1.4.0) and the diff: ``artifacts.onefix.patches/<id>.diff`` where one is there (no
        clone, no API needed), else the row's commits."""
        onefix_cfg = artifacts_cfg[self.name]
        release = dict(onefix_cfg.get("release") or {})
        if release.get("version") == "sheet":
            release["version"] = re.sub(r"^v", "", row.get("release", ""))
        folder = onefix_cfg.get("patches") or ""
        path = Path(folder) / f"{row['id']}.diff" if folder else None
        fix = dict(row, notes_release=row.get("release", ""))
        return self.arms(release, dict(fix, patch=str(path)) if path and path.is_file() else fix)

    def sheet_override(self, spec, arm, row):
        return {**spec, "arm": arm, **{k: row[k] for k in ("buggy_sha", "corrected_sha") if not spec.get(k)}}

    def check(self, bug, arm, spec):
        if not spec.get("release"):
            raise ConfigError(f"bug {bug}, arm {arm}: source onefix needs 'release'",
                              field="artifacts.onefix.release")
        # (a release that is not a pypi version or a wheel is refused by the schema)
        if spec.get("patch") and not Path(spec["patch"]).is_file():
            raise InputError(spec["patch"], f"bug {bug}: the fix's patch file does not exist",
                             field="patch")

    def unresolved(self, spec):
        return not spec.get("patch") and not (spec.get("buggy_sha") and spec.get("corrected_sha"))

    def identity(self, arm, recipe_sha, target):
        diff = ({"patch": sha256_file(arm["patch"])} if arm.get("patch")
                else {"commits": [arm.get("buggy_sha"), arm.get("corrected_sha")]})
        if arm.get("notes_release"):  # another release's notes: the reconstruction differs
            diff["notes_release"] = arm["notes_release"]
        what = json.dumps([artifact_id(arm["release"], recipe_sha, target), diff], sort_keys=True)
        return f"onefix-{arm['arm']}-{hashlib.sha256(what.encode()).hexdigest()[:12]}"

    def release(self, arm):
        return arm.get("release", arm)

    def lost(self, manifest):
        """Its release's, its overlay's and its kernel tree's files gone (a kernel file edited since
        is one whose file the artifact was made with is gone: ``overrides.kernel_tree.not_as_made``)."""
        overlay = Path(manifest.get("overlay_dir") or ".")
        return source(manifest["release"]["source"]).lost(manifest) + [
            str(overlay / path) for path, digest in manifest.get("overlay", {}).items()
            if digest is not None and not (overlay / path).is_file()] + [
            path if how == "gone" else f"{path} as made ({how})"
            for path, how in not_as_made(manifest.get("kernels"))]

    def fetched(self, manifest, sources):  # its release's download, then its own files
        return super().fetched(source(manifest["release"]["source"]).fetched(manifest, sources), sources)

    def make(self, sources, spec, folder, toolchain_json=None):
        """The arm on its release, else on the nearest release that takes the fix (``other_side``)."""
        return other_side.on_nearest_release(lambda arm: self._made_on(sources, arm, folder, toolchain_json),
                                             spec, sources.get("other_side") or (), folder)

    def _made_on(self, sources, spec, folder, toolchain_json):
        release = dict(spec["release"], python=spec.get("python"))
        base = source(release["source"]).make(sources, release, folder)
        try:
            diff_text, origin = fix_diff(sources, spec)
        except onefix.Refused:
            if str(spec.get("onefix", "")).startswith("no:"):  # the resolver read the real diff
                raise onefix.Refused(f"{spec['onefix'][4:]}, which a release wheel cannot take (the "
                                     f"sheet's onefix, read from the fix's diff)") from None
            raise
        patch_text, kinds, kernels = onefix.isolate(diff_text, wheel_files=onefix.wheel_files(base["wheel"]))
        fix_in_release, direction, overlay, placement = (
            onefix.make_overlay(base["wheel"], patch_text, spec["arm"], folder) if patch_text
            else (None, None, {}, []))
        built = None
        if kernels is not None:  # its kernels: the release's own files, rebuilt by the runtime

            in_release, apply, built = prepare(kernels, sources, spec, base["wheel"],
                                               release_version(base), folder)
            if patch_text and in_release != fix_in_release:
                raise onefix.Refused("the fix's Python files and its kernel files disagree on whether "
                                     "the release holds it")
            fix_in_release, direction = in_release, direction if patch_text else apply
        return {**base, "source": "onefix", "arm": spec["arm"], "release": release,
                "diff_origin": origin, "diff_sha256": hashlib.sha256(diff_text.encode()).hexdigest(),
                "patch": str((folder / "fix.diff").resolve()) if patch_text else None,
                "patch_sha256": hashlib.sha256(patch_text.encode()).hexdigest() if patch_text else None,
                "files_changed": kinds["python"] + (kernels.built if kernels else []),
                "files_not_shipped": kinds["not_shipped"] + kinds["comments"],
                "files_not_imported": kinds["not_imported"],
                "fix_in_release": fix_in_release, "apply": direction, "placement": placement,
                "overlay_dir": str((folder / "overlay").resolve()), "overlay": overlay, "kernels": built}


def release_version(manifest):
    """The torch version of an artifact's manifest: the index's, the installed one's, or its
    wheel's file name's (a build from source: ``1.5.0a0+git...``)."""
    return (manifest.get("version_requested") or manifest.get("version")
            or Path(manifest["wheel"]).name.split("-")[1].split("+")[0])


SOURCES = Registry("artifact source", "source", {s.name: s() for s in (Installed, PyPI, Wheel, Docker, OneFix)})


def register(cls):
    """Add an artifact source class (a plugin's: ``bugimpact.plugins``); a class decorator."""
    SOURCES.add(cls.name, cls())
    return cls


sources = SOURCES.every  # name -> Source, the plugins' included
source = SOURCES.named


def host_source():
    """The name of the source that is the host's own torch, as it is installed."""
    return next(name for name, s in SOURCES.items() if s.on_host)


def artifact_pattern(built):
    """The ``{artifact}`` wildcard of the rule that makes the artifacts of the sources that are
    (``built=True``: the docker build) or are not built."""
    return "|".join(f"(?:{s.id_pattern})" for s in sources().values() if s.built == built)


def artifact_id(arm, recipe_sha="", target=""):
    """Artifacts are keyed by what they are, never by the bug that uses them: docker builds by
    commit plus the hash of the build recipe; release wheels by version and the wheel tags of the
    runtime's interpreter (``target``); one-fix artifacts by their release, their diff and the arm."""
    return source(arm["source"]).identity(arm, recipe_sha, target)


def _at_hand(manifest):
    """Whether the wheel a manifest names is there and reads as a wheel."""
    return Path(manifest["wheel"]).is_file() and usable(manifest["wheel"])


def _same_bytes(manifest, wheel, where):
    """The manifest with ``wheel``, fetched again, in place of the one it names: refused (``Lost``)
    unless it holds the bytes the artifact was made from."""
    got = sha256_file(wheel)
    if got != manifest["wheel_sha256"]:
        raise Lost(f"{manifest['wheel']} was gone and {where} now has other bytes (sha256 {got}, "
                   f"made from {manifest['wheel_sha256']})")
    return dict(manifest, wheel=str(Path(wheel).resolve()))


def _target_interpreter(spec, toolchain_json):
    """The interpreter a release wheel must fit: the venv's (probed when the plan was made), or
    the docker runtime image's (probed by the toolchain job)."""
    if spec.get("python"):
        return spec["python"]
    if not toolchain_json:
        raise ValueError("a docker runtime's wheel needs the toolchain's record")
    return read_json(toolchain_json)["python"]
