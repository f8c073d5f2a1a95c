"""A release's own source shipped as an archive beside a fix's patch (``<id>.release.tar.xz``, made
by ``bin/release-sources``; or a folder of the same members), so that a study of the fix needs no
clone (written and read by ``release_source``). It names the release it was made for
(``SOURCE.json``: the release, its wheel's sha256 and its headers' digest), and is used for that
release only (``serves``)."""
from pathlib import Path

ARCHIVE_SUFFIX = ".release.tar.xz"


def archive_of(patch):
    """The release source shipped beside a fix's patch: ``pr38674.diff`` -> the archive
    ``pr38674.release.tar.xz``, or the folder ``pr38674.release/`` of the same members (plain
    files a person can read: the compiled fault control's)."""
    stem = Path(patch).with_name(Path(patch).name[:-len(".diff")])
    folder = stem.with_name(stem.name + ".release")
    return folder if folder.is_dir() else stem.with_name(stem.name + ARCHIVE_SUFFIX)


ANY_RELEASE = "any"  # a source made for every release (the compiled fault controls'): its faithful build vouches


def serves(facts, release):
    """Why a release source whose ``facts`` (an archive's ``SOURCE.json``) name the release it was
    made for is not ``release``'s (a ``Release``), or "" where it is: the same version, and the
    same wheel or one shipping the same headers (that release's wheel for another Python). An
    archive of 1.5.1 read as 1.5.0's took 1.5.0 to hold a fix it lacks: both arms were the bug."""
    named = facts.get("release")
    if named == ANY_RELEASE:
        return ""
    if not named:
        return "it names no release it was made for (an archive made before they did: bin/release-sources makes it again)"
    if named != release.version:
        return f"it is torch {named}'s source, not torch {release.version}'s"
    mine = release.identity
    if facts.get("wheel_sha256") == mine["wheel_sha256"] or facts.get("wheel_headers_sha256") == mine["wheel_headers_sha256"]:
        return ""
    return (f"it was made from another wheel of torch {named} (sha256 {str(facts.get('wheel_sha256'))[:12]}), whose "
            f"headers are not those of {Path(release.wheel).name} (sha256 {release.sha256[:12]})")
