"""A small GitHub REST client: pagination, bounded retries, rate-limit waits, token hygiene.

The token is read from ``GITHUB_TOKEN`` and only ever placed in the Authorization header: it is
never logged, never part of an exception message, and never written to any output.
"""
import logging
import os
import re
import time

import requests

log = logging.getLogger(__name__)

API_URL = "https://api.github.com"


class GitHubError(RuntimeError):
    pass


class NetworkError(GitHubError):
    """The API could not be reached at all (as opposed to an HTTP error answer)."""


class GitHubClient:
    def __init__(self, base_url=API_URL, token=None, max_retries=4, backoff=1.0,
                 max_rate_wait=900.0, timeout=30.0, sleep=time.sleep, clock=time.time):
        self.base_url = base_url.rstrip("/")
        self.max_retries, self.backoff = max_retries, backoff
        self.max_rate_wait, self.timeout = max_rate_wait, timeout
        self.sleep, self.clock = sleep, clock
        self.session = requests.Session()
        self.session.headers["Accept"] = "application/vnd.github+json"
        self.session.headers["User-Agent"] = "bugimpact"
        token = token if token is not None else os.environ.get("GITHUB_TOKEN")
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"

    def _rate_limit_wait(self, response):
        """Seconds to wait for a rate-limit answer, or None if the answer is not one."""
        if response.status_code not in (403, 429):
            return None
        if response.headers.get("Retry-After"):
            return float(response.headers["Retry-After"])
        if response.headers.get("X-RateLimit-Remaining") == "0":
            reset = float(response.headers.get("X-RateLimit-Reset", self.clock() + 60))
            return max(0.0, reset - self.clock()) + 1.0
        return None

    def get(self, url, params=None, headers=None):
        """GET with retries on network errors and 5xx, and waits on rate limits; returns the response."""
        if not url.startswith("http"):
            url = self.base_url + url
        attempt = 0
        while True:
            try:
                response = self.session.get(url, params=params, headers=headers,
                                            timeout=self.timeout)
            except (requests.ConnectionError, requests.Timeout) as exc:
                if attempt >= self.max_retries:
                    raise NetworkError(f"GET {url}: network error after {attempt + 1} tries: "
                                      f"{type(exc).__name__}") from None
                delay = self.backoff * 2 ** attempt
                log.warning("GET %s: %s; retry in %.1fs", url, type(exc).__name__, delay)
                attempt += 1
                self.sleep(delay)
                continue
            wait = self._rate_limit_wait(response)
            if wait is not None:
                if wait > self.max_rate_wait:
                    raise GitHubError(f"GET {url}: rate limited; reset in {wait:.0f}s exceeds the "
                                      f"{self.max_rate_wait:.0f}s wait allowed (set GITHUB_TOKEN)")
                if attempt >= self.max_retries:
                    raise GitHubError(f"GET {url}: still rate limited after {attempt + 1} tries")
                log.warning("GET %s: rate limited; waiting %.0fs for the reset", url, wait)
                attempt += 1
                self.sleep(wait)
                continue
            if response.status_code >= 500:
                if attempt >= self.max_retries:
                    raise GitHubError(f"GET {url}: HTTP {response.status_code} after {attempt + 1} tries")
                delay = self.backoff * 2 ** attempt
                log.warning("GET %s: HTTP %s; retry in %.1fs", url, response.status_code, delay)
                attempt += 1
                self.sleep(delay)
                continue
            if response.status_code >= 400:
                raise GitHubError(f"GET {url}: HTTP {response.status_code}: {response.text[:200]}")
            return response

    def paginate(self, path, params=None):
        """Every item of a list endpoint, following ``Link: <...>; rel="next"``."""
        params = dict(params or {}, per_page=100)
        url, items = path, []
        while url:
            response = self.get(url, params=params)
            items.extend(response.json())
            params = None  # the next link carries the query
            match = re.search(r'<([^>]+)>;\s*rel="next"', response.headers.get("Link", ""))
            url = match.group(1) if match else None
        return items

    def releases(self, repo):
        return self.paginate(f"/repos/{repo}/releases")

    def pull(self, repo, number):
        return self.get(f"/repos/{repo}/pulls/{number}").json()

    def commit(self, repo, sha):
        return self.get(f"/repos/{repo}/commits/{sha}").json()

    def compare_diff(self, repo, base, head):
        """The git diff between two commits, as ``git diff base head`` prints it."""
        return self.get(f"/repos/{repo}/compare/{base}...{head}",
                        headers={"Accept": "application/vnd.github.diff"}).text
