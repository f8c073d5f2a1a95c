"""Steps 1-3: release notes into fixed bugs, their commits, and the filter sheet."""
import logging

from ..io import read_csv, write_csv, write_json
from ..mine.releases import fetch_releases, load_snapshot, select_releases
from ..resolve import ApiResolver, GitResolver, KnownResolver, mark_from_diff, resolve_bugs, write_commits

log = logging.getLogger("bugimpact")


def mine(cfg, repo, out_bugs, out_counts):
    """Step 1 (``cfg``: the config's ``mine``)."""
    from ..mine.github import GitHubClient  # PyGithub and requests: only when the API is asked
    from ..mine.run import mine as mine_releases  # markdown-it: every step job imports this module
    from ..mine.run import write_outputs  # markdown-it: every step job imports this module
    if cfg["source"] == "snapshot":
        releases = load_snapshot(cfg["snapshot"])
    else:
        releases = fetch_releases(repo, cfg["cache"], GitHubClient(base_url=cfg["api_url"]),
                                  cfg["refresh"])
    chosen = select_releases(releases, cfg["tags"], cfg["versions"], cfg["include_prereleases"],
                             cfg["include_drafts"])
    log.info("%d of %d releases selected: %s", len(chosen), len(releases),
             ", ".join(r["tag_name"] for r in chosen))
    rows, counts = mine_releases(chosen, cfg.get("section_patterns"), repo)
    write_outputs(rows, counts, out_bugs, out_counts)
    log.info("%d bug-fix entries mined", len(rows))
    return rows, counts


def resolvers_from_config(cfg, api_url, repo):
    """The resolvers ``cfg`` (the config's ``resolve``) names, in order."""
    from ..mine.github import GitHubClient  # PyGithub and requests: only when the API is asked
    out = []
    for name in cfg["resolvers"]:
        if name == "git":
            if not cfg["clone"]:
                log.warning("resolver git skipped: resolve.clone is not set")
                continue
            out.append(GitResolver(cfg["clone"], repo, cfg["default_branch"] or None))
        elif name == "known":
            if cfg["known"]:
                out.append(KnownResolver(cfg["known"]))
        elif name == "api":
            out.append(ApiResolver(GitHubClient(base_url=api_url), repo))
    return out


def resolve(cfg, api_url, repo, bugs_csv, out_commits):
    """Step 2 (``cfg``: the config's ``resolve``)."""
    _, bugs = read_csv(bugs_csv)
    rows = resolve_bugs(bugs, resolvers_from_config(cfg, api_url, repo))
    if cfg["clone"]:
        mark_from_diff(rows, cfg["clone"])
    write_commits(rows, out_commits)
    done = sum(1 for r in rows if r["status"] == "resolved")
    log.info("%d of %d bugs resolved; the rest are listed with their reason", done, len(rows))
    return rows


def merge_sheet(sheet_path, bugs_csv, commits_csv, out_merge):
    """Merge mining and resolution into the sheet (a side effect: the sheet is a person's, never an
    output), and report what changed."""
    from .. import sheet as sheets  # jsonschema and yaml: every step job imports this module
    from ..config import SHEET_SCHEMA  # jsonschema and yaml: every step job imports this module
    _, bugs = read_csv(bugs_csv)
    _, commits = read_csv(commits_csv)
    summary = sheets.update_sheet(sheet_path, bugs, commits, SHEET_SCHEMA)
    write_json(out_merge, {"sheet": str(sheet_path), **summary})
    log.info("sheet %s: %s", sheet_path, summary)
    return summary


def funnel(sheet_path, out_funnel):
    """The funnel, from the sheet as it is now: an edit to the sheet refreshes it."""
    from .. import sheet as sheets  # jsonschema and yaml: every step job imports this module
    _, rows, _ = sheets.read_sheet(sheet_path)
    write_csv(out_funnel, sheets.funnel(rows), ("stage", "count"))
