"""Input from outside is data, never an option or a path out: commit SHAs from an API and patches
with symlinks (issue: a SHA `--output=<path>` reached `git diff` as an option; a symlink in a
one-fix patch copied /proc/self/environ into an artifact)."""
import pytest
from conftest import config_with
from test_github_api import Sleeps, client

from bugimpact import steps
from bugimpact.artifacts import diffs, onefix
from bugimpact.resolve import ApiResolver, Unresolved, resolve_bugs


def test_a_sha_from_the_api_that_is_an_option_never_reaches_git(httpserver, tmp_path):
    evil = f"--output={tmp_path / 'created'}"
    httpserver.expect_request("/repos/o/r/pulls/10").respond_with_json(
        {"number": 10, "merged_at": "2020-02-01T00:00:00Z", "merge_commit_sha": evil})
    resolver = ApiResolver(client(httpserver, Sleeps()), "o/r")
    with pytest.raises(Unresolved, match="not a commit SHA"):
        resolver.resolve(10)
    rows = resolve_bugs([{"id": "pr10", "pr": "10", "prs": "10"}],
                        [ApiResolver(client(httpserver, Sleeps()), "o/r")])
    assert rows[0]["status"] == "unresolved" and not rows[0].get("corrected_sha")
    assert "not a commit SHA" in rows[0]["reason"]
    # and where a SHA is given by hand, git is never asked
    sources = steps.artifact_sources(config_with(**{"resolve.clone": str(tmp_path)}))
    with pytest.raises(onefix.Refused, match="not a commit SHA"):
        diffs.fix_diff(sources, {"buggy_sha": evil, "corrected_sha": "a" * 40})
    assert not (tmp_path / "created").exists()


def test_a_parent_sha_from_the_api_is_checked_too(httpserver):
    good = "c" * 40
    httpserver.expect_request("/repos/o/r/pulls/11").respond_with_json(
        {"number": 11, "merged_at": "2020-02-01T00:00:00Z", "merge_commit_sha": good})
    httpserver.expect_request(f"/repos/o/r/commits/{good}").respond_with_json(
        {"sha": good, "parents": [{"sha": "../../etc"}],
         "commit": {"committer": {"date": "2020-02-01T00:00:00Z"}}})
    with pytest.raises(Unresolved, match="not a commit SHA"):
        ApiResolver(client(httpserver, Sleeps()), "o/r").resolve(11)


SYMLINK = """diff --git a/torch/evil.py b/torch/evil.py
new file mode 120000
index 0000000..1111111
--- /dev/null
+++ b/torch/evil.py
@@ -0,0 +1 @@
+/proc/self/environ
\\ No newline at end of file
"""
ESCAPE = """diff --git a/torch/../../outside.py b/torch/../../outside.py
--- a/torch/../../outside.py
+++ b/torch/../../outside.py
@@ -1 +1 @@
-a = 1
+a = 2
"""


@pytest.mark.parametrize("diff, why", [(SYMLINK, "symlink or special file"),
                                       (ESCAPE, "leaves the package")])
def test_a_patch_with_a_symlink_or_a_path_out_is_refused(diff, why):
    with pytest.raises(onefix.Refused, match=why):
        onefix.isolate(diff)


def test_text_a_spreadsheet_would_evaluate_is_written_inert(tmp_path):
    """A release-note bullet that starts with `=` reaches bugs.csv and the sheet as text; numbers
    (a negative effect) and what a person typed in the sheet stay as they are."""
    from bugimpact.io import read_csv, write_csv
    from bugimpact.mine.run import mine, write_outputs
    from bugimpact.sheet import update_sheet
    body = ('# Bug Fixes\n\n* =HYPERLINK("http://evil.example","click") fixed (#123)\n'
            '* @SUM(A1) crash fixed (#124)\n* `torch.add`: fixed (#125)\n')
    rows, counts = mine([{"tag_name": "v9.9.9", "body": body, "html_url": ""}])
    write_outputs(rows, counts, tmp_path / "bugs.csv", tmp_path / "releases.csv")
    texts = {r["pr"]: r["text"] for r in read_csv(tmp_path / "bugs.csv")[1]}
    assert texts["123"].startswith("'=HYPERLINK(") and texts["124"].startswith("'@SUM")
    assert texts["125"].startswith("`torch.add`")
    sheet = tmp_path / "sheet.csv"
    bugs = read_csv(tmp_path / "bugs.csv")[1]
    update_sheet(sheet, bugs, [])
    columns, sheet_rows = read_csv(sheet)
    row = next(r for r in sheet_rows if r["pr"] == "123")
    assert row["text"].startswith("'=HYPERLINK(")
    row["notes"] = "=1+1 (my own formula)"
    write_csv(sheet, sheet_rows, columns, as_typed=("notes",))
    update_sheet(sheet, bugs, [])  # a merge keeps the person's cell as typed
    again = next(r for r in read_csv(sheet)[1] if r["pr"] == "123")
    assert again["notes"] == "=1+1 (my own formula)" and again["text"] == row["text"]
    write_csv(tmp_path / "v.csv", [{"effect": "-0.0245", "reason": "-x"}], ("effect", "reason"))
    assert read_csv(tmp_path / "v.csv")[1][0] == {"effect": "-0.0245", "reason": "'-x"}


def test_a_token_echoed_in_a_200_body_never_reaches_the_cache_or_the_mined_rows(httpserver, tmp_path):
    from test_github_api import TOKEN, release

    from bugimpact.mine.releases import fetch_releases
    from bugimpact.mine.run import mine
    httpserver.expect_request("/repos/o/r/releases").respond_with_json(
        [release("v1.0.0", f"# Bug Fixes\n* fixed a leak of {TOKEN} (#1)\n")])
    got = fetch_releases("o/r", tmp_path, client(httpserver, Sleeps()))
    rows, _ = mine(got)
    assert "[token redacted]" in rows[0]["text"] and TOKEN not in rows[0]["text"]
    cached = "".join(p.read_text() for p in tmp_path.rglob("*") if p.is_file())
    assert cached and TOKEN not in cached


def test_a_plain_diff_section_after_a_git_section_is_refused_not_dropped():
    diff = ("diff --git a/torch/optim/sgd.py b/torch/optim/sgd.py\n--- a/torch/optim/sgd.py\n"
            "+++ b/torch/optim/sgd.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n"
            "--- a/aten/src/ATen/native/Loss.cpp\n+++ b/aten/src/ATen/native/Loss.cpp\n"
            "@@ -1 +1 @@\n-int x;\n+int y;\n")
    with pytest.raises(onefix.Refused, match="without its own `diff --git` header"):
        onefix.isolate(diff)


@pytest.mark.parametrize("bullet", [
    '<p>Fixed NaN in `cdist` (<a href="https://github.com/pytorch/pytorch/pull/31167">#31167</a>)</p>',
    "<div>Fixed NaN in cdist (#31167)</div>",
    "<details><summary>Fixed NaN in cdist</summary> (#31167)</details>",
])
def test_a_bullet_written_in_html_is_mined(bullet):
    from bugimpact.mine.run import mine
    body = f"# Bug Fixes\n\n* {bullet}\n* <!-- a comment only -->\n* Plain fix (#2)\n"
    rows, _ = mine([{"tag_name": "v1.0.0", "body": body, "html_url": ""}])
    assert [str(r["pr"]) for r in rows] == ["31167", "2"]
    assert "Fixed NaN in" in rows[0]["text"] and "<" not in rows[0]["text"]
