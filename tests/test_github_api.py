"""The GitHub client and API resolver against a real local HTTP server (pytest-httpserver)."""
import json
import logging
import time

import pytest
from werkzeug import Response

from bugimpact.mine.github import GitHubClient, GitHubError
from bugimpact.mine.releases import fetch_releases
from bugimpact.resolve import ApiResolver, Unresolved, resolve_bugs

TOKEN = "ghp_secret_token_value"


def release(tag, body="# Bug Fixes\n* x (#1)\n"):
    return {"tag_name": tag, "name": tag, "body": body, "published_at": "2020-01-01T00:00:00Z",
            "html_url": f"https://github.com/o/r/releases/tag/{tag}", "prerelease": False,
            "draft": False}


class Sleeps(list):
    def __call__(self, seconds):
        self.append(seconds)


def client(httpserver, sleeps, **kw):
    return GitHubClient(base_url=httpserver.url_for(""), token=TOKEN, sleep=sleeps, backoff=0.01, **kw)


def test_pagination_follows_link_headers_and_caches(httpserver, tmp_path):
    page2 = httpserver.url_for("/repos/o/r/releases") + "?per_page=100&page=2"
    httpserver.expect_ordered_request("/repos/o/r/releases", query_string={"per_page": "100"}) \
        .respond_with_json([release("v1.1.0"), release("v1.0.0")],
                           headers={"Link": f'<{page2}>; rel="next"'})
    httpserver.expect_ordered_request("/repos/o/r/releases", query_string={"per_page": "100", "page": "2"}) \
        .respond_with_json([release("v0.9.0")])
    sleeps = Sleeps()
    got = fetch_releases("o/r", tmp_path, client(httpserver, sleeps))
    assert [r["tag_name"] for r in got] == ["v1.1.0", "v1.0.0", "v0.9.0"]
    cached = tmp_path / "o__r"
    assert (cached / "bodies" / "v0.9.0.md").read_text() == "# Bug Fixes\n* x (#1)\n"
    # a rerun needs no network: the server would fail any further request
    again = fetch_releases("o/r", tmp_path, client=None)
    assert [r["tag_name"] for r in again] == ["v1.1.0", "v1.0.0", "v0.9.0"]
    assert TOKEN not in json.dumps(json.loads((cached / "releases.json").read_text()))
    for req, _ in httpserver.log:  # the token travels in the Authorization header only
        assert req.headers["Authorization"].endswith(f" {TOKEN}")


def rate_limited(reset):
    """GitHub's answer when the primary rate limit is used up."""
    return Response(json.dumps({"message": "API rate limit exceeded for 127.0.0.1."}), status=403,
                    headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset),
                             "Content-Type": "application/json"})


def test_rate_limit_waits_until_reset(httpserver):
    httpserver.expect_ordered_request("/repos/o/r/pulls/5").respond_with_response(
        rate_limited(int(time.time()) + 30))
    httpserver.expect_ordered_request("/repos/o/r/pulls/5").respond_with_json({"number": 5})
    sleeps = Sleeps()
    assert client(httpserver, sleeps).pull("o/r", 5)["number"] == 5
    assert len(sleeps) == 1 and 25 <= sleeps[0] <= 32


def test_rate_limit_wait_is_bounded(httpserver):
    httpserver.expect_request("/repos/o/r/pulls/5").respond_with_response(
        rate_limited(int(time.time()) + 7200))
    with pytest.raises(GitHubError, match="exceeds the 900s wait"):
        client(httpserver, Sleeps()).pull("o/r", 5)


def test_5xx_and_429_are_retried_with_backoff(httpserver):
    httpserver.expect_ordered_request("/repos/o/r/pulls/6").respond_with_data("bad", status=502)
    httpserver.expect_ordered_request("/repos/o/r/pulls/6").respond_with_data("bad", status=503)
    httpserver.expect_ordered_request("/repos/o/r/pulls/6").respond_with_data("slow", status=429)
    httpserver.expect_ordered_request("/repos/o/r/pulls/6").respond_with_json({"number": 6})
    sleeps = Sleeps()
    assert client(httpserver, sleeps).pull("o/r", 6)["number"] == 6
    assert sleeps == [0.02, 0.04]  # exponential: none before the first retry, then 2x, 4x


def test_retries_are_bounded_and_token_never_logged(httpserver, caplog):
    httpserver.expect_request("/repos/o/r/pulls/7").respond_with_data("down", status=500)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(GitHubError) as info:
        client(httpserver, Sleeps(), max_retries=2).pull("o/r", 7)
    assert "after 3 tries" in str(info.value)
    assert TOKEN not in str(info.value) and TOKEN not in caplog.text
    assert len(httpserver.log) == 3


def test_network_error_is_bounded():
    sleeps = Sleeps()
    c = GitHubClient(base_url="http://127.0.0.1:9", token="", sleep=sleeps, backoff=0.01,
                     max_retries=2, timeout=2)
    with pytest.raises(GitHubError, match="network error after 3 tries"):
        c.pull("o/r", 1)
    assert sleeps == [0.02]


def test_api_resolver(httpserver):
    corrected, buggy = "c" * 40, "b" * 40
    httpserver.expect_request("/repos/o/r/pulls/10").respond_with_json(
        {"number": 10, "merged_at": "2020-02-01T00:00:00Z", "merge_commit_sha": corrected})
    httpserver.expect_request(f"/repos/o/r/commits/{corrected}").respond_with_json(
        {"sha": corrected, "parents": [{"sha": buggy}],
         "commit": {"committer": {"date": "2020-02-01T00:00:00Z"}}})
    httpserver.expect_request(f"/repos/o/r/commits/{buggy}").respond_with_json(
        {"sha": buggy, "parents": [], "commit": {"committer": {"date": "2020-01-31T00:00:00Z"}}})
    httpserver.expect_request("/repos/o/r/pulls/11").respond_with_json(
        {"number": 11, "merged_at": None, "merge_commit_sha": "d" * 40})
    resolver = ApiResolver(client(httpserver, Sleeps()), "o/r")
    result = resolver.resolve(10)
    assert (result.corrected_sha, result.buggy_sha) == (corrected, buggy)
    assert result.buggy_date == "2020-01-31T00:00:00Z"
    with pytest.raises(Unresolved, match="not merged"):
        resolver.resolve(11)


def test_api_unreachable_fails_fast_for_the_rest():
    sleeps = Sleeps()
    resolver = ApiResolver(GitHubClient(base_url="http://127.0.0.1:9", token="", sleep=sleeps,
                                        backoff=0.01, max_retries=2, timeout=2), "o/r")
    rows = resolve_bugs([{"id": f"pr{n}", "pr": str(n), "prs": str(n)} for n in (1, 2, 3)],
                        [resolver])
    assert all(r["status"] == "unresolved" for r in rows)
    assert "not tried, the API was unreachable" in rows[2]["reason"]
    assert sleeps == [0.02]  # only the first PR paid for retries


def test_a_token_echoed_by_the_server_is_redacted_everywhere(httpserver, tmp_path, caplog):
    """A server that quotes the request's Authorization header in its 401 body."""
    from bugimpact.io import read_csv
    from bugimpact.resolve import write_commits
    httpserver.expect_request("/repos/o/r/pulls/12").respond_with_json(
        {"message": "Bad credentials", "echo": {"Authorization": f"token {TOKEN}"}}, status=401)
    caplog.set_level(logging.DEBUG)
    rows = resolve_bugs([{"id": "pr12", "pr": "12", "prs": "12"}],
                        [ApiResolver(client(httpserver, Sleeps()), "o/r")])
    write_commits(rows, tmp_path / "commits.csv")
    text = (tmp_path / "commits.csv").read_text()
    assert "HTTP 401" in text and "[token redacted]" in text and TOKEN not in text
    assert TOKEN not in caplog.text
    assert read_csv(tmp_path / "commits.csv")[1][0]["status"] == "unresolved"
