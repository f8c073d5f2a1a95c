"""Step 1 end to end: releases in, ``bugs.csv`` and the per-release count table out."""
from ..io import write_csv
from .notes import NotesParser, assign_ids

BUG_COLUMNS = ("id", "release", "section", "area", "subarea", "kind", "pr", "prs", "text", "url")
COUNT_COLUMNS = ("release", "published_at", "entries", "entries_with_pr", "entries_without_pr",
                 "distinct_prs", "multi_pr_entries", "nested_entries")


def mine(releases, section_patterns=None, repo="pytorch/pytorch"):
    parser = NotesParser(section_patterns, repo) if section_patterns else NotesParser(repo=repo)
    entries = []
    for rel in releases:
        entries.extend(parser.parse(rel.get("body") or "", rel["tag_name"], rel.get("html_url") or ""))
    assign_ids(entries)
    rows = [{"id": e.id, "release": e.release, "section": e.section, "area": e.area,
             "subarea": e.subarea, "kind": e.kind,
             "pr": e.prs[0] if e.prs else "", "prs": " ".join(map(str, e.prs)), "text": e.text,
             "url": e.url} for e in entries]
    counts = []
    for rel in releases:
        mine_rows = [r for r in rows if r["release"] == rel["tag_name"]]
        prs = {p for r in mine_rows for p in r["prs"].split()}
        with_pr = sum(1 for r in mine_rows if r["pr"] != "")
        counts.append({"release": rel["tag_name"], "published_at": rel.get("published_at") or "",
                       "entries": len(mine_rows), "entries_with_pr": with_pr,
                       "entries_without_pr": len(mine_rows) - with_pr, "distinct_prs": len(prs),
                       "multi_pr_entries": sum(1 for r in mine_rows if len(r["prs"].split()) > 1),
                       "nested_entries": sum(1 for r in mine_rows if r["kind"] == "nested")})
    return rows, counts


def write_outputs(rows, counts, bugs_csv, counts_csv):
    write_csv(bugs_csv, rows, BUG_COLUMNS)
    write_csv(counts_csv, counts, COUNT_COLUMNS)
