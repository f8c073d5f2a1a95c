"""Step 2 on real git repositories built here: linear history, a merge commit, a cherry-pick onto a
release branch, a revert, and PR numbers that are prefixes of each other."""
import pytest

from bugimpact.resolve import GitResolver, KnownResolver, Unresolved, resolve_bugs

from conftest import ROOT, git

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
    with pytest.raises(Unresolved, match="only landed off main"):
        GitResolver(path, "o/r").resolve(77)


def test_other_repository_bot_lines_do_not_count(repo):
    path, _ = repo
    with pytest.raises(Unresolved):
        GitResolver(path, "someone/else").resolve(123)


def test_resolve_bugs_lists_every_unresolved_row(repo):
    path, shas = repo
    bugs = [{"id": "pr12", "pr": "12", "prs": "12 99"}, {"id": "pr77", "pr": "77", "prs": "77"},
            {"id": "h1", "pr": "", "prs": ""}, {"id": "pr31167", "pr": "31167", "prs": "31167"}]
    known = KnownResolver(ROOT / "data" / "known_commits" / "pytorch.csv")
    rows = {r["id"]: r for r in resolve_bugs(bugs, [GitResolver(path, "o/r"), known])}
    assert rows["pr12"]["status"] == "resolved" and rows["pr12"]["resolver"] == "git"
    assert rows["pr12"]["other_prs"] == "99"
    assert rows["pr77"]["status"] == "unresolved"
    assert "only landed off main" in rows["pr77"]["reason"]
    assert "not in the table" in rows["pr77"]["reason"]
    assert rows["h1"]["reason"] == "the entry cites no PR"
    assert rows["pr31167"]["resolver"] == "known"
    assert rows["pr31167"]["corrected_sha"] == "a836c4ca78b72ecc8e0664e1b684af64ce83be42"


def test_not_a_repository(tmp_path):
    with pytest.raises(ValueError, match="not a git repository"):
        GitResolver(tmp_path)
