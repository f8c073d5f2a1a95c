"""The release a one-fix arm is made on, when the one asked for cannot take the fix.

A fix taken back on a release that changed the fix's lines after it, or made on one that lacks
changes the fix builds on, is entangled with that release (``overrides.arm.Entangled``). The
nearer a release is to the fix, the less it changed around it: so the arm is tried on the releases
between (``artifacts.onefix.other_side``), nearest first, up to the first on the fix's other
side. Before the release where it holds the fix: an earlier release that holds it too is taken
back on (fewer commits since), the first that lacks it gets it forwards. After it where it does
not: the reverse. Measured on the mirror's 1.4.0 window (fixes landed from 2019-08-01 to the 1.4
cut, 31 accepted by their kind): of 8 entangled with 1.4.0, 4 are studied nearer the fix (three
on 1.3.0, one made forwards on 1.2.0; docs/usage.md, "The release to study on").

Both arms of a bug walk alike (each is refused on the same release for the same reason: the arm
that is the release as released is judged as the other, ``overrides.arm.prepare``), so they end
on the same release, and the arms gate refuses arms that did not (``steps.builds``); each try,
and why it was refused, is named in the manifest (``release_tries``) and in the verdict's scope.
A release that is not a pypi version (a wheel file) has no neighbours: it is tried alone."""
import shutil
from pathlib import Path

from packaging.version import InvalidVersion, Version

from ..overrides.arm import Entangled
from ..overrides.parts import Refused
from ..overrides.refusals import cause_of

# what one try writes into the artifact's folder (``OneFix.make``): cleared before the next
WRITTEN = ("overlay", "kernels", "fix.diff")


def releases_to_try(release, versions, entangled):
    """The pypi versions of ``versions`` to try after ``release`` refused the fix as
    ``entangled``, nearest first: earlier ones where the release holds the fix, later where not."""
    if release.get("source") != "pypi":
        return []
    here = _version(release["version"])
    known = sorted({v for v in versions if _version(v) is not None}, key=_version)
    if here is None:
        return []
    if entangled.fix_in_release:
        return [v for v in reversed(known) if _version(v) < here]
    return [v for v in known if _version(v) > here]


def on_nearest_release(make_on, spec, versions, folder):
    """``make_on(spec)`` (an arm's manifest) on ``spec``'s release, else on the nearest release of
    ``versions`` that takes the fix (module doc). The manifest names every try
    (``release_tries``); where none takes it, the refusal names each, the first's words first."""
    try:
        return make_on(spec)
    except Entangled as first:
        nearer = releases_to_try(spec["release"], versions, first)
        if not nearer:
            raise
        tries = [_tried(spec, first)]
        for version in nearer:
            other = moved(spec, version)
            for name in WRITTEN:
                path = Path(folder) / name
                shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
            try:
                made = make_on(other)
            except Refused as exc:
                tries.append(_tried(other, exc))
                if not isinstance(exc, Entangled) or exc.fix_in_release != first.fix_in_release:
                    break  # past the fix's other side, or refused for a reason no release nearer cures
                continue
            return {**made, "release_tries": tries + [_tried(other)]}
        others = "; ".join(t["refused"] if t["refused"].startswith(f"torch {t['version']}")
                           else f"torch {t['version']}: {t['refused']}" for t in tries[1:])
        raise Refused(f"{first}. Tried nearer the fix too: {others}") from None


def moved(spec, version):
    """``spec`` (an arm) on the release ``version`` instead: the release whose notes list the fix
    stays the one asked for, so a release cut before the fix does not read as holding it."""
    notes = spec.get("notes_release") or f"v{spec['release']['version']}"
    return {**spec, "release": {**spec["release"], "version": version}, "notes_release": notes}


def in_words(tries):
    """The tries before the release an arm is made on, for its scope: "" where the first took it."""
    refused = [f"torch {t['version']} refused it ({t['cause']})" for t in tries or () if t.get("refused")]
    return f"; {', '.join(refused)}" if refused else ""


def _tried(spec, refused=None):
    return {"version": spec["release"]["version"], **({"refused": str(refused), "cause": cause_of(str(refused))}
                                                      if refused else {"refused": None})}


def _version(text):
    try:
        return Version(str(text))
    except InvalidVersion:
        return None
