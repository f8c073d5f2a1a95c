"""Where release bodies come from (GitHub API, cache, offline snapshot) and which are selected."""
import json
import logging
import re
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from ..io import InputError, write_json, write_text

log = logging.getLogger(__name__)

FIELDS = ("tag_name", "name", "body", "published_at", "html_url", "prerelease", "draft")


def tag_version(tag):
    try:
        return Version(re.sub(r"^[^\d]*", "", tag))
    except InvalidVersion:
        return None


def load_snapshot(path):
    """An offline snapshot: a folder of ``<tag>.md`` files, or a JSON file in the API's shape."""
    path = Path(path)
    if path.is_dir():
        releases = []
        for md in sorted(path.glob("*.md")):
            if md.name.lower() == "readme.md":
                continue
            try:
                body = md.read_text("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(md, f"release {md.stem}: not UTF-8 text (byte {exc.start}: "
                                 f"{exc.object[exc.start:exc.start + 1]!r}); save the notes as "
                                 f"UTF-8 Markdown") from None
            releases.append({"tag_name": md.stem, "name": md.stem, "body": body,
                             "published_at": "", "html_url": "", "prerelease": False,
                             "draft": False})
        if not releases:
            raise InputError(path, "no <tag>.md files in the snapshot folder")
        return releases
    if not path.exists():
        raise InputError(path, "release snapshot not found")
    try:
        data = json.loads(path.read_text("utf-8"))
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise InputError(path, f"not valid JSON: {exc}") from None
    return check_releases(data, path)


def check_releases(data, source):
    """Releases in the API's shape, or an error naming the source, the release and the field."""
    if not isinstance(data, list):
        raise InputError(source, "expected a JSON list of releases (the GitHub API's shape)")
    for index, rel in enumerate(data):
        if not isinstance(rel, dict):
            raise InputError(source, f"release {index} is a {type(rel).__name__}, not an object",
                             row=index)
        tag = rel.get("tag_name")
        if not isinstance(tag, str) or not tag:
            raise InputError(source, f"release {index} has no text 'tag_name' (got {tag!r:.40})",
                             row=index, field="tag_name")
        for key, kinds in (("body", (str, type(None))), ("name", (str, type(None))),
                           ("published_at", (str, type(None))), ("html_url", (str, type(None)))):
            if key == "body" and key not in rel:
                raise InputError(source, f"release {tag} has no 'body'", row=index, field=key)
            if not isinstance(rel.get(key), kinds):
                raise InputError(source, f"release {tag}: '{key}' is a {type(rel[key]).__name__}, "
                                 f"expected text", row=index, field=key)
    return data


def cache_dir(cache_root, repo):
    return Path(cache_root) / repo.replace("/", "__")


def save_cache(cache_root, repo, releases):
    """Keep the API answer and a raw copy of each body, so a rerun needs no network."""
    folder = cache_dir(cache_root, repo)
    kept = [{k: rel.get(k) for k in FIELDS} for rel in releases]
    for rel in kept:
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", rel["tag_name"])
        write_text(folder / "bodies" / f"{safe}.md", rel.get("body") or "")
    write_json(folder / "releases.json", kept)
    return folder / "releases.json"


def fetch_releases(repo, cache_root, client=None, refresh=False):
    cached = cache_dir(cache_root, repo) / "releases.json"
    if cached.exists() and not refresh:
        log.info("releases of %s from the cache %s (no network)", repo, cached)
        return load_snapshot(cached)
    if client is None:
        from .github import GitHubClient  # PyGithub and requests: only when the API is asked
        client = GitHubClient()
    releases = check_releases(client.releases(repo), f"GitHub API: /repos/{repo}/releases")
    save_cache(cache_root, repo, releases)
    return releases


def select_releases(releases, tags=None, versions=None, include_prereleases=False,
                    include_drafts=False):
    """Pick releases by explicit tag list or a version range like ``>=1.1.0,<1.7.0``."""
    spec = SpecifierSet(versions) if versions else None
    wanted = set(tags or [])
    chosen = []
    for rel in releases:
        tag = rel["tag_name"]
        if rel.get("draft") and not include_drafts:
            continue
        if rel.get("prerelease") and not include_prereleases:
            continue
        if wanted and tag not in wanted:
            continue
        if spec is not None:
            version = tag_version(tag)
            if version is None or not spec.contains(version, prereleases=include_prereleases):
                continue
        chosen.append(rel)
    missing = wanted - {rel["tag_name"] for rel in chosen}
    if missing:  # a misspelt tag would silently mine less
        raise InputError("config", f"tags not found among the releases: {', '.join(sorted(missing))}",
                         field="mine.tags")
    return sorted(chosen, key=lambda r: (tag_version(r["tag_name"]) or Version("0"), r["tag_name"]))
