"""Step 2 on real git repositories built here: linear history, a merge commit, a cherry-pick onto a
release branch, a revert, and PR numbers that are prefixes of each other."""
import pytest
from conftest import ROOT, git

from bugimpact.resolve import GitResolver, KnownResolver, Unresolved, resolve_bugs

BOT = "Pull Request resolved: https://github.com/o/r/pull/{}"


def commit(repo, name, message, date):
    (repo / name).write_text(message)
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", message,
        env={"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date})
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    repo = tmp_path_factory.mktemp("clone")
    git(repo, "init", "-q", "-b", "main")
    shas = {"root": commit(repo, "a", "init", "2020-01-01T00:00:00Z")}
    shas["pr12"] = commit(repo, "b", "Fix foo (#12)", "2020-01-02T00:00:00Z")
    shas["pr123"] = commit(repo, "c", "Add bar\n\nSummary.\n\n" + BOT.format(123),
                           "2020-01-03T00:00:00Z")
    git(repo, "checkout", "-q", "-b", "feature")
    shas["feature"] = commit(repo, "d", "feature work", "2020-01-04T00:00:00Z")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "feature", "-m", "Merge pull request #45 from u/feature",
        env={"GIT_AUTHOR_DATE": "2020-01-05T00:00:00Z", "GIT_COMMITTER_DATE": "2020-01-05T00:00:00Z"})
    shas["pr45"] = git(repo, "rev-parse", "HEAD")
    shas["revert"] = commit(repo, "e", 'Revert "Add bar"\n\nThis reverts commit {}.\n\n{}'.format(
        shas["pr123"], BOT.format(123)), "2020-01-06T00:00:00Z")
    # a release branch from before the fix, with the fix cherry-picked and a release-only fix
    git(repo, "checkout", "-q", "-b", "release/1.0", shas["pr12"])
    git(repo, "cherry-pick", "-x", shas["pr123"],
        env={"GIT_COMMITTER_DATE": "2020-01-07T00:00:00Z"})
    shas["pick"] = git(repo, "rev-parse", "HEAD")
    shas["pr77"] = commit(repo, "f", "Release only\n\n" + BOT.format(77), "2020-01-08T00:00:00Z")
    git(repo, "checkout", "-q", "main")
    return repo, shas


def test_bot_line_landing_with_cherry_pick_and_revert(repo):
    path, shas = repo
    result = GitResolver(path, "o/r").resolve(123)
    assert result.corrected_sha == shas["pr123"]
    assert result.note == f"reverted later on main (by {shas['revert'][:12]}) and not re-landed"
    assert result.buggy_sha == shas["pr12"]
    assert result.cherry_picks == [shas["pick"]]
    assert result.corrected_date.startswith("2020-01-03")
    assert len(result.corrected_sha) == 40 and len(result.buggy_sha) == 40


def test_prefix_pr_number_is_not_confused(repo):
    path, shas = repo
    resolver = GitResolver(path, "o/r")
    assert resolver.resolve(12).corrected_sha == shas["pr12"]
    assert resolver.resolve(12).buggy_sha == shas["root"]
    with pytest.raises(Unresolved, match="no commit"):
        resolver.resolve(1)


def test_merge_commit_uses_first_parent(repo):
    path, shas = repo
    result = GitResolver(path, "o/r").resolve(45)
    assert result.corrected_sha == shas["pr45"]
    assert result.buggy_sha == shas["pr123"]  # the default branch before the merge


def test_release_branch_only_is_unresolved_with_reason(repo):
    path, _ = repo
    with pytest.raises(Unresolved, match="landed only off main .* a release-branch-only fix"):
        GitResolver(path, "o/r").resolve(77)


def test_other_repository_bot_lines_do_not_count(repo):
    path, _ = repo
    with pytest.raises(Unresolved):
        GitResolver(path, "someone/else").resolve(123)


def test_resolve_bugs_lists_every_unresolved_row(repo):
    path, shas = repo
    bugs = [{"id": "pr12", "pr": "12", "prs": "12"}, {"id": "pr77", "pr": "77", "prs": "77"},
            {"id": "pr45", "pr": "45", "prs": "45 99"},
            {"id": "h1", "pr": "", "prs": ""}, {"id": "pr31167", "pr": "31167", "prs": "31167"}]
    known = KnownResolver(ROOT / "data" / "known_commits" / "pytorch.csv")
    rows = {r["id"]: r for r in resolve_bugs(bugs, [GitResolver(path, "o/r"), known])}
    assert rows["pr12"]["status"] == "resolved" and rows["pr12"]["resolver"] == "git"
    # an entry citing several PRs is resolved only when every one of them is
    assert rows["pr45"]["status"] == "unresolved" and rows["pr45"]["other_prs"] == "99"
    assert rows["pr45"]["reason"].startswith("#99: git: no commit")
    assert rows["pr77"]["status"] == "unresolved"
    assert "landed only off main (" in rows["pr77"]["reason"]
    assert "not in the table" in rows["pr77"]["reason"]
    assert rows["h1"]["reason"].startswith("the entry cites no PR: to study it")
    assert rows["pr31167"]["resolver"] == "known"
    assert rows["pr31167"]["corrected_sha"] == "a836c4ca78b72ecc8e0664e1b684af64ce83be42"


def test_not_a_repository(tmp_path):
    with pytest.raises(ValueError, match="not a git repository"):
        GitResolver(tmp_path)


PT = "https://github.com/pytorch/pytorch/pull/{}"


def landed(pr, title, summary=""):
    """A commit message in PyTorch's ghstack / fbshipit style."""
    return (f"{title}\n\nSummary:\n{summary or title}\n\nPull Request resolved: {PT.format(pr)}\n\n"
            f"ghstack-source-id: 1\nDifferential Revision: D{pr}\n\nfbshipit-source-id: {pr:040d}")


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """PyTorch's real conventions, one each: ghstack bot lines, Summary bodies citing other PRs,
    an fbshipit revert and a re-land, a plain revert, a cherry-pick into release/1.5 under its own
    PR number, and multi-PR fixes landed consecutively or not."""
    repo = tmp_path_factory.mktemp("pytorch")
    git(repo, "init", "-q", "-b", "master")
    day = iter(range(1, 28))

    shas = {}

    def c(message):
        return commit(repo, f"f{len(shas)}", message, f"2020-05-{next(day):02d}T00:00:00Z")
    shas["root"] = c("init")
    shas["pr200"] = c(landed(200, "Fix conv padding dim", "Follow-up to #100; see also "
                                                           f"{PT.format(101)} and (#102)."))
    shas["pr300"] = c(landed(300, "Fix adam eps"))
    shas["revert300"] = c("Revert D300: Fix adam eps\n\nSummary:\nOriginal commit changeset: D300\n\n"
                          f"Pull Request resolved: {PT.format(300)}")
    shas["reland300"] = c(landed(300, "Reland: Fix adam eps (with the CUDA case)"))
    shas["pr400"] = c("Fix sgd nesterov (#400)")
    shas["revert400"] = c(f'Revert "Fix sgd nesterov (#400)"\n\nThis reverts commit {shas["pr400"]}.')
    shas["pr500"] = c(landed(500, "Fix the stream switch, part 1"))
    shas["pr501"] = c(landed(501, "Fix the stream switch, part 2"))
    shas["pr600"] = c(landed(600, "Fix pow grad at zero"))
    shas["between"] = c(landed(650, "Unrelated change"))
    shas["pr601"] = c(landed(601, "Fix pow grad at zero, complex case"))
    git(repo, "checkout", "-q", "-b", "release/1.5", shas["pr200"])
    shas["pick200"] = c(f"[v1.5.1] Fix conv padding dim (#38583)\n\nSummary:\nFix conv padding dim\n"
                        f"Pull Request resolved: {PT.format(200)}\n\n(cherry picked from commit "
                        f"{shas['pr200']})")
    git(repo, "checkout", "-q", "master")
    return repo, shas


def test_real_conventions_ghstack_summary_and_cherry_pick(history):
    repo, shas = history
    resolver = GitResolver(repo, "pytorch/pytorch")
    result = resolver.resolve(200)
    assert (result.corrected_sha, result.buggy_sha) == (shas["pr200"], shas["root"])
    assert result.cherry_picks == [shas["pick200"]] and result.note == ""
    for cited in (100, 101, 102):  # cited in the Summary, not landed
        with pytest.raises(Unresolved, match="no commit"):
            resolver.resolve(cited)
    # the release branch's own PR number: its cherry-pick line names the master landing
    pick = resolver.resolve(38583)
    assert (pick.corrected_sha, pick.buggy_sha) == (shas["pr200"], shas["root"])
    assert pick.cherry_picks == [shas["pick200"]]
    assert pick.note.startswith("cherry-pick: PR #38583 landed only off master") and "#200" in pick.note


def test_real_conventions_revert_and_reland(history):
    repo, shas = history
    resolver = GitResolver(repo, "pytorch/pytorch")
    relanded = resolver.resolve(300)  # the fbshipit revert carries the bot line, not a SHA
    assert (relanded.corrected_sha, relanded.buggy_sha) == (shas["reland300"], shas["revert300"])
    assert relanded.note.startswith(f"re-landed: {shas['reland300'][:12]} stands")
    reverted = resolver.resolve(400)
    assert reverted.corrected_sha == shas["pr400"]
    assert reverted.note == f"reverted later on master (by {shas['revert400'][:12]}) and not re-landed"


def test_an_entry_citing_several_prs_is_one_fix(history):
    repo, shas = history
    bugs = [{"id": "pr500", "pr": "500", "prs": "501 500"},  # cited out of order
            {"id": "pr600", "pr": "600", "prs": "600 601"},
            {"id": "pr300", "pr": "300", "prs": "300"}]
    rows = {r["id"]: r for r in resolve_bugs(bugs, [GitResolver(repo, "pytorch/pytorch")])}
    run = rows["pr500"]
    assert run["status"] == "resolved"
    assert (run["buggy_sha"], run["corrected_sha"]) == (shas["revert400"], shas["pr501"])
    assert run["commits"] == f"501:{shas['pr501']} 500:{shas['pr500']}"
    gap = rows["pr600"]
    assert gap["status"] == "non_contiguous" and not gap.get("buggy_sha") and not gap.get("corrected_sha")
    assert f"#600 {shas['pr600'][:12]}" in gap["reason"] and f"#601 {shas['pr601'][:12]}" in gap["reason"]
    assert rows["pr300"]["reason"].startswith("re-landed")


def test_the_known_table_says_why_a_pr_does_not_resolve(tmp_path):
    table = tmp_path / "known.csv"
    table.write_text("pr,buggy_sha,corrected_sha,onefix,diff_tags,note\n"
                     f"1,{'a' * 40},{'b' * 40},yes,cuda,reverted later\n"
                     "2,,,,,git: PR #2 landed only off master\n")
    known = KnownResolver(table)
    one = known.resolve(1)
    assert one.facts == {"onefix": "yes", "diff_tags": "cuda"} and one.note == "reverted later"
    with pytest.raises(Unresolved, match="^known: git: PR #2 landed only off master$"):
        known.resolve(2)
    rows = resolve_bugs([{"id": "pr1", "pr": "1", "prs": "1"}], [known])
    assert rows[0]["onefix"] == "yes" and rows[0]["diff_tags"] == "cuda"
    table.write_text("pr,buggy_sha,corrected_sha,note\n3,,,\n")  # no pair and no reason: an error
    with pytest.raises(ValueError, match="row 2.*buggy_sha|buggy_sha.*row 2"):
        KnownResolver(table)


def test_the_shipped_known_table_resolves_the_shipped_notes_offline():
    from bugimpact.mine.releases import load_snapshot
    from bugimpact.mine.run import mine
    bugs, _ = mine(load_snapshot(ROOT / "data" / "release_notes" / "pytorch"))
    rows = resolve_bugs(bugs, [KnownResolver(ROOT / "data" / "known_commits" / "pytorch.csv")])
    status = [r["status"] for r in rows]
    assert (status.count("resolved"), status.count("non_contiguous")) == (93, 2)
    python_only = [r["id"] for r in rows if r.get("onefix") == "yes"]
    assert len(python_only) == 21  # each with its diff and its own files shipped
    assert all((ROOT / "data" / "patches" / "pytorch" / f"{bug}{suffix}").is_file()
               for bug in python_only for suffix in (".diff", ".files.tar.xz"))
    assert all(r["reason"].startswith(("known: git:", "the entry cites no PR", "#"))
               for r in rows if r["status"] == "unresolved")
