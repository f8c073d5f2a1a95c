"""Step 2: each fix PR to its corrected commit (the landing on the default branch) and its buggy
parent (that commit's first parent).

Resolvers are tried in the configured order; a PR none of them resolves is kept with the reasons.
- ``git``: a local clone, indexed in one ``git log --all`` pass. A commit lands PR N when its message
  carries PyTorch's bot line ``Pull Request resolved: https://github.com/<repo>/pull/N``, is a
  ``Merge pull request #N`` merge, or ends its subject with GitHub's squash ``(#N)``. Reverts never
  count. The default-branch landing wins; landings on other branches are recorded as cherry-picks.
- ``known``: a CSV of already-resolved PRs (e.g. the paper's 18), for offline studies.
- ``api``: the GitHub API's ``merge_commit_sha`` and its first parent.
"""
import logging
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from .io import InputError, read_csv, write_csv

log = logging.getLogger(__name__)

COLUMNS = ("id", "pr", "status", "resolver", "corrected_sha", "buggy_sha", "corrected_date",
           "buggy_date", "cherry_picks", "other_prs", "commits", "onefix", "reason")
SHA = re.compile(r"^[0-9a-f]{40}$")


@dataclass
class Resolution:
    corrected_sha: str
    buggy_sha: str
    corrected_date: str = ""
    buggy_date: str = ""
    cherry_picks: list = field(default_factory=list)
    note: str = ""  # e.g. a re-land, or a revert that was never re-landed


class Unresolved(Exception):
    pass


def _git(repo, *args):
    out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} in {repo}: {out.stderr.strip()}")
    return out.stdout


class GitResolver:
    name = "git"

    def __init__(self, clone, repo="pytorch/pytorch", default_branch=None):
        self.clone = Path(clone)
        if not (self.clone / ".git").exists() and not (self.clone / "HEAD").exists():
            raise InputError(clone, "not a git repository (resolve.clone in config.yaml)")
        self.repo = repo
        self.branch = default_branch or self._detect_default_branch()
        self._bot_line = re.compile(rf"^Pull Request resolved: https?://github\.com/"
                                    rf"{re.escape(repo)}/pull/(\d+)\b", re.MULTILINE)
        self._index = None

    def _detect_default_branch(self):
        for ref in ("refs/remotes/origin/HEAD",):
            try:
                return _git(self.clone, "symbolic-ref", "--short", ref).strip()
            except RuntimeError:
                pass
        for name in ("main", "master", "origin/main", "origin/master"):
            try:
                _git(self.clone, "rev-parse", "--verify", "--quiet", name)
                return name
            except RuntimeError:
                continue
        return "HEAD"

    def _landed_prs(self, message):
        """PR numbers a commit message says it lands: the bot line (anywhere), or a merge or
        squash subject (first line only, so a body that mentions ``(#N)`` does not count)."""
        subject = message.split("\n", 1)[0]
        found = {int(n) for n in self._bot_line.findall(message)}
        found.update(int(n) for n in re.findall(r"^Merge pull request #(\d+)\b", subject))
        found.update(int(n) for n in re.findall(r"\(#(\d+)\)\s*$", subject))
        return found

    def index(self):
        """PR number -> [(sha, parents, date, on_default_branch, reverted)] in commit-date order.

        Reverts are not landings. A revert names the commit it reverts ("This reverts commit
        <sha>"), or, in fbshipit style ("Revert D123: ..."), carries the reverted PR's bot line:
        then the PR's latest landing so far is the one reverted. A re-land is a new landing."""
        if self._index is not None:
            return self._index
        default = set(_git(self.clone, "rev-list", self.branch).split())
        raw = _git(self.clone, "log", "--all", "--reverse", "--date-order",
                   "--format=%H%x00%P%x00%cI%x00%B%x1e")
        index, reverted = {}, set()
        for record in raw.split("\x1e"):
            record = record.strip("\n")
            if not record:
                continue
            sha, parents, date, message = record.split("\x00", 3)
            message = message.strip()
            if message.startswith("Revert ") or "This reverts commit" in message:
                named = re.findall(r"This reverts commit ([0-9a-f]{7,40})", message)
                if named:
                    reverted.update(named)
                else:
                    for number in self._landed_prs(message):
                        if index.get(number):
                            reverted.add(index[number][-1][0])
                continue
            for number in self._landed_prs(message):
                index.setdefault(number, []).append([sha, parents.split(), date, sha in default])
        for landings in index.values():
            for landing in landings:
                landing.append(any(landing[0].startswith(r) for r in reverted))
        self._index = index
        return index

    def _date(self, sha):
        return _git(self.clone, "show", "-s", "--format=%cI", sha).strip()

    def resolve(self, pr):
        landings = self.index().get(pr, [])
        if not landings:
            raise Unresolved(f"git: no commit in {self.clone} lands PR #{pr}")
        on_default = [c for c in landings if c[3]]
        if not on_default:
            raise Unresolved(f"git: PR #{pr} only landed off {self.branch} "
                             f"({', '.join(c[0][:12] for c in landings)})")
        standing = [c for c in on_default if not c[4]]
        note = ""
        if standing:
            sha, parents, date, _, _ = standing[-1]  # a re-land after a revert is what stands
            if len(on_default) > 1:
                note = (f"re-landed: {sha[:12]} stands; earlier landings "
                        f"{', '.join(c[0][:12] for c in on_default[:-1])} were reverted")
        else:  # the pair still isolates the fix, but a later release may not contain it
            sha, parents, date, _, _ = on_default[-1]
            note = f"reverted later on {self.branch} and not re-landed"
        if not parents:
            raise Unresolved(f"git: landing commit {sha} of PR #{pr} is a root commit")
        return Resolution(corrected_sha=sha, buggy_sha=parents[0], corrected_date=date,
                          buggy_date=self._date(parents[0]),
                          cherry_picks=[c[0] for c in landings if not c[3]], note=note)


class KnownResolver:
    """Already-resolved PRs from a CSV with columns pr, buggy_sha, corrected_sha (dates optional)."""
    name = "known"

    def __init__(self, path):
        _, rows = read_csv(path)
        self.rows = {}
        for number, row in enumerate(rows, start=2):
            for col in ("buggy_sha", "corrected_sha"):
                if not SHA.match(row.get(col, "")):
                    raise InputError(path, "expected a full 40-hex SHA", row=number, field=col)
            self.rows[int(row["pr"])] = row

    def resolve(self, pr):
        row = self.rows.get(pr)
        if row is None:
            raise Unresolved(f"known: PR #{pr} not in the table")
        return Resolution(row["corrected_sha"], row["buggy_sha"], row.get("corrected_commit_date", ""))


class ApiResolver:
    name = "api"

    def __init__(self, client, repo="pytorch/pytorch"):
        self.client, self.repo = client, repo
        self.unreachable = None  # after a network failure, the other PRs fail fast

    def resolve(self, pr):
        from .mine.github import GitHubError, NetworkError
        if self.unreachable:
            raise Unresolved(f"api: not tried, the API was unreachable ({self.unreachable})")
        try:
            pull = self.client.pull(self.repo, pr)
            if not pull.get("merged_at") or not pull.get("merge_commit_sha"):
                raise Unresolved(f"api: PR #{pr} was not merged")
            commit = self.client.commit(self.repo, pull["merge_commit_sha"])
        except NetworkError as exc:
            self.unreachable = str(exc)
            raise Unresolved(f"api: {exc}") from None
        except GitHubError as exc:
            raise Unresolved(f"api: {exc}") from None
        parents = commit.get("parents") or []
        if not parents:
            raise Unresolved(f"api: merge commit of PR #{pr} has no parent")
        parent = self.client.commit(self.repo, parents[0]["sha"])
        return Resolution(commit["sha"], parents[0]["sha"],
                          commit["commit"]["committer"]["date"],
                          parent["commit"]["committer"]["date"])


def _resolve_pr(pr, resolvers, cache):
    """(resolver name, Resolution) or (None, every resolver's reason); each PR is tried once."""
    if pr not in cache:
        reasons = []
        for resolver in resolvers:
            try:
                cache[pr] = (resolver.name, resolver.resolve(pr))
                break
            except Unresolved as exc:
                reasons.append(str(exc))
        else:
            cache[pr] = (None, "; ".join(reasons) or "no resolver configured")
    return cache[pr]


def consecutive(landings):
    """The landings (``(pr, Resolution)``) ordered so that each one's parent is the one before,
    or None when they are not one unbroken run of commits on the default branch."""
    by_parent = {r.buggy_sha: (pr, r) for pr, r in landings}
    heads = {r.corrected_sha for _, r in landings}
    starts = [(pr, r) for pr, r in landings if r.buggy_sha not in heads]
    if len(by_parent) != len(landings) or len(starts) != 1:
        return None
    chain = [starts[0]]
    while chain[-1][1].corrected_sha in by_parent:
        chain.append(by_parent[chain[-1][1].corrected_sha])
    return chain if len(chain) == len(landings) else None


def resolve_bugs(bugs, resolvers):
    """One row per mined bug; unresolved ones carry every resolver's reason.

    An entry that cites several PRs is one fix: every PR is resolved and all landing commits are
    recorded. When they are consecutive on the default branch, buggy is the parent of the first and
    corrected the last; otherwise the row is ``non_contiguous`` and no commit is picked."""
    rows = []
    cache = {}
    for bug in bugs:
        prs = bug["prs"].split() if bug.get("prs") else []
        row = {"id": bug["id"], "pr": bug.get("pr", ""), "other_prs": " ".join(prs[1:])}
        if not prs:
            row.update(status="unresolved", reason="the entry cites no PR")
            rows.append(row)
            continue
        results = [(int(pr), *_resolve_pr(int(pr), resolvers, cache)) for pr in prs]
        failed = [(pr, result) for pr, name, result in results if name is None]
        if failed:
            reason = failed[0][1] if len(prs) == 1 else "; ".join(
                f"#{pr}: {result}" for pr, result in failed)
            row.update(status="unresolved", reason=reason)
            rows.append(row)
            continue
        landings, seen = [], set()
        for pr, _, result in results:
            if result.corrected_sha not in seen:  # two PRs landed in one commit: one landing
                seen.add(result.corrected_sha)
                landings.append((pr, result))
        row["commits"] = " ".join(f"{pr}:{result.corrected_sha}" for pr, _, result in results)
        chain = consecutive(landings)
        if chain is None:
            row.update(status="non_contiguous", resolver=" ".join(sorted({n for _, n, _ in results})),
                       reason="the PRs landed as commits that are not consecutive on the default "
                              "branch: " + ", ".join(f"#{pr} {r.corrected_sha[:12]} (parent "
                                                    f"{r.buggy_sha[:12]})" for pr, r in landings)
                              + "; pick the commits by hand")
            rows.append(row)
            continue
        first, last = chain[0][1], chain[-1][1]
        row.update(status="resolved", resolver=" ".join(sorted({n for _, n, _ in results})),
                   corrected_sha=last.corrected_sha, buggy_sha=first.buggy_sha,
                   corrected_date=last.corrected_date, buggy_date=first.buggy_date,
                   cherry_picks=" ".join(c for _, r in chain for c in r.cherry_picks),
                   reason="; ".join(f"#{pr}: {r.note}" if len(chain) > 1 else r.note
                                    for pr, r in chain if r.note))
        rows.append(row)
    return rows


def onefix_verdict(clone, buggy, corrected):
    """Whether a fix can be isolated on a release wheel (source onefix), from its diff's files:
    ``yes``, or ``no: <why>``. Blank when the clone cannot answer."""
    from .artifacts.onefix import classify
    out = subprocess.run(["git", "-C", str(clone), "diff", "--name-only", buggy, corrected],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return ""
    kinds = {}
    for path in out.stdout.split():
        kinds.setdefault(classify(path), []).append(path)
    bad = kinds.get("compiled", []) + kinds.get("unknown", [])
    if bad:
        return f"no: compiled or build files ({', '.join(bad[:3])}{', ...' if len(bad) > 3 else ''})"
    return "yes" if kinds.get("python") else "no: changes no file of the package"


def mark_onefix(rows, clone):
    """Fill the ``onefix`` column of resolved rows from the clone."""
    for row in rows:
        if row.get("status") == "resolved" and row.get("buggy_sha") and row.get("corrected_sha"):
            row["onefix"] = onefix_verdict(clone, row["buggy_sha"], row["corrected_sha"])
    return rows


def write_commits(rows, path):
    write_csv(path, rows, COLUMNS)
