"""GitHub access through PyGithub: pagination, bounded retries, bounded rate-limit waits, token
hygiene.

The token is read from ``GITHUB_TOKEN`` and only ever placed in the Authorization header. Every error
raised here is a ``GitHubError`` whose text passes through ``redact`` (a server may echo the token),
and PyGithub's own log records are scrubbed the same way.
"""
import base64
import logging
import os
import time
from urllib.parse import quote

import requests
from github import Auth, Github, GithubException, GithubRetry, RateLimitExceededExceedsMaxWait
from github.GitRelease import GitRelease
from github.PaginatedList import PaginatedList

from ..redact import RedactingFilter, redact

log = logging.getLogger(__name__)

API_URL = "https://api.github.com"


class GitHubError(RuntimeError):
    def __init__(self, message):
        super().__init__(redact(message))


class NetworkError(GitHubError):
    pass


class _Retry(GithubRetry):
    """PyGithub's retry (rate limits waited for up to ``max_rate_limit_wait``, 5xx retried with
    exponential backoff), with 429 retried too and the waiting done by an injectable ``sleeper``."""

    def __init__(self, sleeper=time.sleep, **kwargs):
        kwargs.setdefault("status_forcelist", list(range(500, 600)) + [429])
        super().__init__(**kwargs)
        self.sleeper = sleeper

    def new(self, **kwargs):
        retry = super().new(**kwargs)
        retry.sleeper = self.sleeper
        return retry

    def sleep(self, response=None):
        wait = self.get_retry_after(response) if response is not None else None
        if wait is None:
            wait = self.get_backoff_time()
        if wait > 0:
            log.warning("GitHub: waiting %.1fs before retrying", wait)
            self.sleeper(wait)


class GitHubClient:
    def __init__(self, base_url=API_URL, token=None, max_retries=4, backoff=1.0,
                 max_rate_wait=900.0, timeout=30.0, sleep=time.sleep):
        token = token if token is not None else os.environ.get("GITHUB_TOKEN")
        self.token, self.max_retries, self.max_rate_wait = token, max_retries, max_rate_wait
        self.base_url = base_url.rstrip("/")
        logging.getLogger("github").addFilter(RedactingFilter([token or ""]))
        retry = _Retry(sleeper=sleep, total=max_retries, backoff_factor=backoff,
                       max_rate_limit_wait=max_rate_wait, secondary_rate_wait=min(60, max_rate_wait))
        self.github = Github(auth=Auth.Token(token) if token else None, base_url=self.base_url,
                             timeout=int(timeout), retry=retry, per_page=100)

    def _call(self, what, func):
        """Run one PyGithub call; every failure becomes a redacted ``GitHubError``, and what it
        returns is scrubbed too (a server may echo the token in a 200 body: a release's text)."""
        try:
            return scrub(func(), (self.token or "",))
        except RateLimitExceededExceedsMaxWait as exc:
            raise GitHubError(f"{what}: rate limited; reset in {exc.wait:.0f}s exceeds the "
                              f"{self.max_rate_wait:.0f}s wait allowed (set GITHUB_TOKEN)") from None
        except GithubException as exc:
            raise GitHubError(f"{what}: HTTP {exc.status}: {str(exc.data)[:200]}") from None
        except requests.exceptions.RetryError as exc:
            raise GitHubError(f"{what}: failed after {self.max_retries + 1} tries: "
                              f"{str(exc)[-200:]}") from None
        except (requests.ConnectionError, requests.Timeout) as exc:
            raise NetworkError(f"{what}: network error after {self.max_retries + 1} tries: "
                               f"{type(exc).__name__}") from None

    def _get(self, path):
        """One API object as a dict, through PyGithub's requester (auth, retries, errors)."""
        return self._call(f"GET {path}", lambda: self.github.requester.requestJsonAndCheck(
            "GET", path)[1])

    def releases(self, repo):
        """Every release, in the API's shape (pages followed)."""
        path = f"/repos/{repo}/releases"
        pages = PaginatedList(GitRelease, self.github.requester, path, None)
        # the listed data as sent: ``raw_data`` would refetch each release to "complete" it
        return self._call(f"GET {path}", lambda: [dict(release._rawData) for release in pages])

    def pull(self, repo, number):
        return self._get(f"/repos/{repo}/pulls/{number}")

    def commit(self, repo, sha):
        return self._get(f"/repos/{repo}/commits/{sha}")

    def compare_diff(self, repo, base, head):
        """The diff between two commits in ``git diff`` format, rebuilt from the compare API's
        files (a file without a patch, e.g. binary, says so and is refused downstream)."""
        files = self._get(f"/repos/{repo}/compare/{base}...{head}").get("files") or []
        return "".join(_file_diff(f) for f in files)


    def file_at(self, repo, path, ref):
        """A file's bytes at ``ref`` (a tag), or None where the repository has no such file."""
        where = f"/repos/{repo}/contents/{quote(path)}"
        try:
            data = self._call(f"GET {where}?ref={ref}", lambda: self.github.requester.requestJsonAndCheck(
                "GET", where, parameters={"ref": ref})[1])
        except GitHubError as exc:
            if "HTTP 404" in str(exc):
                return None
            raise
        if not isinstance(data, dict) or data.get("encoding") != "base64":
            raise GitHubError(f"GET {where}?ref={ref}: not a file's contents (base64)")
        return base64.b64decode(data["content"])


def scrub(value, secrets=()):
    """``value`` with the token (and anything token-shaped) masked in every string it holds."""
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, list):
        return [scrub(v, secrets) for v in value]
    if isinstance(value, dict):
        return {k: scrub(v, secrets) for k, v in value.items()}
    return value


def _file_diff(f):
    name, status, patch = f["filename"], f.get("status"), f.get("patch")
    old = f.get("previous_filename") or name
    lines = [f"diff --git a/{old} b/{name}\n"]
    if status == "added":
        lines.append("new file mode 100644\n")
    elif status == "removed":
        lines.append("deleted file mode 100644\n")
    elif status == "renamed":
        lines += [f"rename from {old}\n", f"rename to {name}\n"]
    if not patch:
        if status != "renamed" or f.get("changes"):
            lines.append(f"Binary files a/{old} and b/{name} differ\n")
        return "".join(lines)
    lines.append("--- /dev/null\n" if status == "added" else f"--- a/{old}\n")
    lines.append("+++ /dev/null\n" if status == "removed" else f"+++ b/{name}\n")
    lines.append(patch if patch.endswith("\n") else patch + "\n")
    return "".join(lines)
