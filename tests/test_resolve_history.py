"""The resolver on real PyTorch history: tests/fixtures/pytorch-history.jsonl.xz (made by
bin/extract-history from github:zou3519/pytorch) rebuilt as a git repository. Every landing-line,
revert and re-land form PyTorch used in 2019-2020 is in it; the expected commits were checked by hand
with ``git show`` on the full clone."""
import re

import pytest
from conftest import ROOT
from pytorch_history import build_repo, load

from bugimpact.io import read_csv
from bugimpact.landings import Commit, LandingIndex
from bugimpact.mine.releases import load_snapshot
from bugimpact.mine.run import mine
from bugimpact.resolve import GitResolver, Unresolved, resolve_bugs

BOT = re.compile(r"Pull Request resolved: https://github\.com/pytorch/pytorch/pull/(\d+)")


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    path = tmp_path_factory.mktemp("pytorch-history") / "repo.git"
    header, commits, real, rebuilt = build_repo(path)
    return GitResolver(path, "pytorch/pytorch"), real, rebuilt


def resolved(history, pr):
    resolver, real, _ = history
    result = resolver.resolve(pr)
    return real[result.corrected_sha], real[result.buggy_sha], result


def test_every_landing_line_on_master_is_read():
    """Each master commit that carries the bot line for PR N (on its own line or after
    ``Summary:``) lands N; a line that only cites a PR lands nothing."""
    header, records = load()
    index = LandingIndex((Commit(r["sha"], r["parents"], r["date"], r["message"], r["on_default"])
                          for r in records), "pytorch/pytorch")
    forms = {"own line": 0, "after Summary:": 0}
    for r in records:
        if not r["on_default"] or index.parser.is_revert(r["message"]):
            continue
        for line in r["message"].splitlines():
            match = BOT.search(line)
            if not match:
                continue
            prefix = line[:match.start()].strip()
            if prefix.startswith("Original"):  # a citation of the PR a commit re-lands
                continue
            forms["after Summary:" if prefix == "Summary:" else "own line"] += 1
            assert prefix in ("", "Summary:"), line
            assert r["sha"] in {c.commit.sha for c in index.landings[int(match.group(1))]}, line
    # the form the resolver once missed is about one landing line in six
    assert forms["after Summary:"] > 1800 and forms["own line"] > 8000
    cited = next(r for r in records if "Original Pull Request resolved" in r["message"])
    number = int(re.search(r"Original Pull Request resolved: \S+/pull/(\d+)", cited["message"])[1])
    assert cited["sha"] not in {c.commit.sha for c in index.landings.get(number, [])}


def test_summary_form_landings_resolve(history):
    # v1.4.0 fixes whose only landing line is "Summary: Pull Request resolved: ..."
    corrected, buggy, result = resolved(history, 26332)
    assert corrected == "46f96d153864f6da798700d97eea8255d1e3ddf4"
    assert result.note == ""
    assert resolved(history, 28784)[0] == "efbaa8a563e0229689c9e5599d932a4865c406cc"


@pytest.mark.parametrize("pr, landing, revert, form", [
    (23861, "8160f390cf67", "9a9bb448ee49", "This reverts commit <sha>"),
    (25273, "16454095e09e", "34662f77c665", "Revert D<n>: the landing's Differential Revision"),
    (32044, "9e59244b5398", "ee60cd91240f", 'Back out "...": Original commit changeset'),
])
def test_reverts_in_each_form(history, pr, landing, revert, form):
    resolver, real, rebuilt = history
    corrected, _, result = resolved(history, pr)
    assert corrected.startswith(landing)
    revert_sha = next(s for s in rebuilt if s.startswith(revert))
    assert result.note == (f"reverted later on master (by {rebuilt[revert_sha][:12]}) and not "
                           f"re-landed"), form


def test_reverting_a_revert_re_lands(history):
    # 28770 landed as fe8804695bd5, was reverted by D18254898, and that revert was reverted
    corrected, buggy, result = resolved(history, 28770)
    assert corrected.startswith("ba6defeb072e")  # "Revert D18254898: Revert D18202646: ..."
    assert result.note.startswith("re-landed:") and "were reverted" in result.note
    assert "its commit: a re-land, reverting revert" in result.note


def test_a_release_branch_cherry_pick_resolves_to_the_master_original(history):
    # v1.4.0 cites #30793, landed only on the v1.4.0 branches; master landed it as #30771 under a
    # title GitHub cut with "…"
    corrected, buggy, result = resolved(history, 30793)
    assert corrected.startswith("a939b52ddbb0")
    assert "cherry-pick: PR #30793 landed only off master" in result.note
    assert "it is the change of #30771" in result.note
    assert [history[1][s][:12] for s in result.cherry_picks] == ["8891d4eeb1f1"]


def test_shipped_notes_end_resolved_or_with_a_true_reason(history):
    resolver, real, rebuilt = history
    bugs, _ = mine(load_snapshot(ROOT / "data" / "release_notes" / "pytorch"))
    rows = resolve_bugs(bugs, [resolver])
    release = {b["id"]: b["release"] for b in bugs}
    status = {}
    for row in rows:
        status.setdefault((release[row["id"]], row["status"]), []).append(row["id"])
    assert {k: len(v) for k, v in status.items()} == {
        ("v1.4.0", "resolved"): 79, ("v1.4.0", "unresolved"): 2,
        ("v1.5.1", "resolved"): 14, ("v1.5.1", "unresolved"): 9, ("v1.5.1", "non_contiguous"): 2}
    by_id = {r["id"]: r for r in rows}
    assert sorted(status[("v1.4.0", "unresolved")]) == ["he56609e77b", "pr31450"]
    assert "a release-branch-only fix" in by_id["pr31450"]["reason"]
    assert f"corrected_sha: {rebuilt['a7d187baa4bf821406b046c1e9de7879cf6c12e7']}" in by_id["pr31450"]["reason"]
    after_end = ("pr38943", "pr38025", "pr39212", "pr39301", "pr38850")
    for bug in after_end:
        assert "on top of where master ends" in by_id[bug]["reason"]
        assert "update the clone" in by_id[bug]["reason"]
    for bug in ("pr39344", "pr39039", "pr39791"):
        assert "newer than every PR landed on master (the newest is #39018" in by_id[bug]["reason"]
    for row in rows:
        if row["status"] == "resolved":  # every pair is a real parent and child
            assert real[row["corrected_sha"]] and real[row["buggy_sha"]]


def test_the_paper_fixes_resolve_as_the_authors_did(history):
    _, known = read_csv(ROOT / "data" / "known_commits" / "pytorch.csv")
    paper = [row for row in known if row["source"].startswith("paper")]
    assert len(paper) == 18
    for row in paper:
        pr = int(row["pr"])
        if pr == 39903:  # landed 2020-06-17, after the fork's master ends
            with pytest.raises(Unresolved, match="on top of where master ends"):
                history[0].resolve(pr)
            continue
        corrected, buggy, _ = resolved(history, pr)
        assert (corrected, buggy) == (row["corrected_sha"], row["buggy_sha"]), pr
