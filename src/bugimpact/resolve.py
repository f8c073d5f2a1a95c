"""Step 2: each fix PR to its corrected commit (the landing on the default branch) and its buggy
parent (that commit's first parent).

Resolvers are tried in the configured order; a PR none of them resolves is kept with the reasons.
- ``git``: a local clone, indexed in one ``git log --all`` pass (what counts as a landing, a revert
  and a re-land: ``landings``). The standing default-branch landing wins; landings on other branches
  are recorded as cherry-picks, and a PR that landed only as a release-branch cherry-pick resolves
  to the default-branch PR it picked.
- ``known``: a CSV of already-resolved PRs (e.g. the paper's 18), for offline studies.
- ``api``: the GitHub API's ``merge_commit_sha`` and its first parent.
"""
import logging
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from .artifacts.onefix import cuda_only, split_diff, verdict
from .framework.tables import SHA, checked_sha
from .io import InputError, read_csv, write_csv
from .landings import Commit, LandingIndex

log = logging.getLogger(__name__)

COLUMNS = ("id", "pr", "status", "resolver", "corrected_sha", "buggy_sha", "corrected_date",
           "buggy_date", "cherry_picks", "other_prs", "commits", "onefix", "diff_tags", "reason")
DIFF_FACTS = ("onefix", "diff_tags")  # what a fix's diff says: can a wheel take it, which device


@dataclass
class Resolution:
    corrected_sha: str
    buggy_sha: str
    corrected_date: str = ""
    buggy_date: str = ""
    cherry_picks: list = field(default_factory=list)
    note: str = ""  # e.g. a re-land, or a revert that was never re-landed
    facts: dict = field(default_factory=dict)  # DIFF_FACTS, where the resolver knows them


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
        self._index, self._holding = None, {}

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

    def index(self):
        """Every PR's landings in the clone (all branches), read in one ``git log`` pass."""
        if self._index is None:
            default = set(_git(self.clone, "rev-list", self.branch, "--").split())
            raw = _git(self.clone, "log", "--all", "--reverse", "--date-order",
                       "--format=%H%x00%P%x00%cI%x00%B%x1e")
            self._index = LandingIndex(commits_from_log(raw, default), self.repo)
            tip = _git(self.clone, "log", "-1", "--format=%H%x00%cI", self.branch, "--").strip()
            self.tip_sha, self.tip_date = tip.split("\x00")
        return self._index

    def _date(self, sha):
        return _git(self.clone, "show", "-s", "--format=%cI", sha, "--").strip()

    def _branches(self, sha):
        """Up to three branches that hold ``sha`` (asked once per commit: it walks history)."""
        if sha not in self._holding:
            out = _git(self.clone, "for-each-ref", "--contains", sha, "--count=3",
                       "--format=%(refname:short)", "refs/heads", "refs/remotes")
            self._holding[sha] = ", ".join(out.split()) or "no branch"
        return self._holding[sha]

    def resolve(self, pr):
        index = self.index()
        landings = index.landings.get(pr, [])
        on_default = [c for c in landings if c.commit.on_default]
        if on_default:
            return self._pair(pr, landings, on_default)
        if landings:
            return self._off_default(pr, landings)
        raise Unresolved(self._absent(pr))

    def _pair(self, pr, landings, on_default):
        standing = [c for c in on_default if not c.reverted_by]
        note = ""
        if standing:
            chosen = standing[-1]  # a re-land after a revert is what stands
            if len(on_default) > 1:
                note = (f"re-landed: {chosen.commit.sha[:12]} stands; earlier landings "
                        f"{', '.join(c.commit.sha[:12] for c in on_default if c is not chosen)} "
                        f"were reverted")
        else:  # the pair still isolates the fix, but a later release may not contain it
            chosen = on_default[-1]
            note = (f"reverted later on {self.branch} (by {chosen.reverted_by[-1][:12]}) and not "
                    f"re-landed")
        if chosen.how != "landed":  # a re-land by reverting a revert, or a PR that is a revert
            note = "; ".join(filter(None, [note, f"its commit: {chosen.how}"]))
        commit = chosen.commit
        if not commit.parents:
            raise Unresolved(f"git: landing commit {commit.sha} of PR #{pr} is a root commit")
        return Resolution(corrected_sha=commit.sha, buggy_sha=commit.parents[0],
                          corrected_date=commit.date, buggy_date=self._date(commit.parents[0]),
                          cherry_picks=[c.commit.sha for c in landings if not c.commit.on_default],
                          note=note)

    def _off_default(self, pr, landings):
        """A PR that landed only off the default branch: a release-branch cherry-pick of a
        default-branch PR (resolved to that landing), a landing after the branch's tip, or a fix
        made only on a release branch."""
        index = self.index()
        where = ", ".join(f"{c.commit.sha[:12]} on {self._branches(c.commit.sha)}" for c in landings)
        for landing in reversed(landings):
            original = index.same_change_on_default(landing.commit)
            if original is not None:
                own = index.parser.squash_pr(original.message)  # the PR its subject names
                number = own if own in index.prs_of[original.sha] else min(index.prs_of[original.sha])
                result = self._pair(number, index.landings[number],
                                    [c for c in index.landings[number] if c.commit.on_default])
                result.cherry_picks = [c.commit.sha for c in landings]
                result.note = "; ".join(filter(None, [
                    f"cherry-pick: PR #{pr} landed only off {self.branch} ({where}); it is the "
                    f"change of #{number}, resolved to that PR's landing on {self.branch}",
                    result.note]))
                return result
        last = landings[-1].commit
        later = subprocess.run(["git", "-C", str(self.clone), "merge-base", "--is-ancestor",
                                self.tip_sha, last.sha], capture_output=True)
        if later.returncode == 0:  # it builds on the branch's tip: the clone's branch is behind
            raise Unresolved(f"git: PR #{pr} landed as {where} ({last.date}), on top of where "
                             f"{self.branch} ends in {self.clone} ({self.tip_sha[:12]}, "
                             f"{self.tip_date}): update the clone (git fetch), or set "
                             f"resolve.default_branch to a branch that holds it")
        raise Unresolved(f"git: PR #{pr} landed only off {self.branch} ({where}), and no commit on "
                         f"{self.branch} carries the same change (a cherry-pick line or the same "
                         f"subject): a release-branch-only fix; to study it, type its commits "
                         f"into the sheet (buggy_sha: the parent {last.parents[0] if last.parents else '?'}"
                         f", corrected_sha: {last.sha})")

    def _absent(self, pr):
        index = self.index()
        on_default = [n for n, ls in index.landings.items() if any(c.commit.on_default for c in ls)]
        newest = max(on_default, default=0)
        if pr > newest:
            return (f"git: no commit in {self.clone} lands PR #{pr}: it is newer than every PR "
                    f"landed on {self.branch} (the newest is #{newest}; the branch ends "
                    f"{self.tip_date}): it landed after the clone was made; update the clone "
                    f"(git fetch)")
        return (f"git: no commit in {self.clone}, on any branch, lands PR #{pr} (no landing line, "
                f"squash subject or merge names it); {self.branch} ends {self.tip_date}, so it may "
                f"have landed later, or never: check the PR on GitHub (the api resolver), or type "
                f"its commits into the sheet")


def commits_from_log(raw, default):
    """``git log --format=%H%x00%P%x00%cI%x00%B%x1e`` output as Commits; ``default``: the shas on
    the default branch."""
    for record in raw.split("\x1e"):
        record = record.strip("\n")
        if record:
            sha, parents, date, message = record.split("\x00", 3)
            yield Commit(sha, parents.split(), date, message.strip(), sha in default)


class KnownResolver:
    """Already-resolved PRs from a CSV with columns pr, buggy_sha, corrected_sha (dates, source, the
    diff's facts and a note optional). A row with no commits is a PR known not to resolve, and its
    note says why."""
    name = "known"

    def __init__(self, path):
        _, rows = read_csv(path)
        self.rows = {}
        for number, row in enumerate(rows, start=2):
            if not (row.get("buggy_sha") or row.get("corrected_sha")) and row.get("note"):
                self.rows[int(row["pr"])] = row
                continue
            for col in ("buggy_sha", "corrected_sha"):
                if not SHA.match(row.get(col, "")):
                    raise InputError(path, "expected a full 40-hex SHA (or both blank, with a note "
                                     "saying why the PR does not resolve)", row=number, field=col)
            self.rows[int(row["pr"])] = row

    def resolve(self, pr):
        row = self.rows.get(pr)
        if row is None:
            raise Unresolved(f"known: PR #{pr} not in the table")
        if not row["corrected_sha"]:
            raise Unresolved(f"known: {row['note']}")
        return Resolution(row["corrected_sha"], row["buggy_sha"], row.get("corrected_commit_date", ""),
                          note=row.get("note") or "",
                          facts={k: row[k] for k in DIFF_FACTS if row.get(k)})


class ApiResolver:
    name = "api"

    def __init__(self, client, repo="pytorch/pytorch"):
        self.client, self.repo = client, repo
        self.unreachable = None  # after a network failure, the other PRs fail fast

    def resolve(self, pr):
        from .mine.github import GitHubError, NetworkError  # PyGithub and requests: only when the API is asked
        if self.unreachable:
            raise Unresolved(f"api: not tried, the API was unreachable ({self.unreachable})")
        try:
            pull = self.client.pull(self.repo, pr)
            if not pull.get("merged_at") or not pull.get("merge_commit_sha"):
                raise Unresolved(f"api: PR #{pr} was not merged")
            commit = self.client.commit(self.repo, checked_sha(pull["merge_commit_sha"],
                                                               f"PR #{pr}'s merge commit"))
        except NetworkError as exc:
            self.unreachable = str(exc)
            raise Unresolved(f"api: {exc}") from None
        except GitHubError as exc:
            raise Unresolved(f"api: {exc}") from None
        except ValueError as exc:
            raise Unresolved(f"api: {exc}") from None
        parents = commit.get("parents") or []
        if not parents:
            raise Unresolved(f"api: merge commit of PR #{pr} has no parent")
        try:
            corrected = checked_sha(commit.get("sha"), f"PR #{pr}'s merge commit")
            buggy = checked_sha(parents[0].get("sha"), f"the parent of PR #{pr}'s merge commit")
        except ValueError as exc:
            raise Unresolved(f"api: {exc}") from None
        parent = self.client.commit(self.repo, buggy)
        return Resolution(corrected, buggy,
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
            row.update(status="unresolved", reason="the entry cites no PR: to study it, find its "
                                                   "commits and type them into the sheet")
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
        if len(chain) == 1:
            row.update(first.facts)
        row.update(status="resolved", resolver=" ".join(sorted({n for _, n, _ in results})),
                   corrected_sha=last.corrected_sha, buggy_sha=first.buggy_sha,
                   corrected_date=last.corrected_date, buggy_date=first.buggy_date,
                   cherry_picks=" ".join(c for _, r in chain for c in r.cherry_picks),
                   reason="; ".join(f"#{pr}: {r.note}" if len(chain) > 1 else r.note
                                    for pr, r in chain if r.note))
        rows.append(row)
    return rows


def diff_facts(clone, buggy, corrected):
    """What a fix's diff says (``onefix.verdict``): ``onefix`` (can a release wheel take it: ``yes``,
    ``yes: kernels (...)``, ``wheel: ...`` or ``no: <why>``) and ``diff_tags`` (``cuda`` when it
    changes only CUDA sources). Empty when the clone cannot answer."""
    out = subprocess.run(["git", "-C", str(clone), "diff", buggy, corrected, "--"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return {}
    if not out.stdout.strip():
        return {"onefix": "no: changes no file of the package", "diff_tags": ""}
    paths = [path for path, _ in split_diff(out.stdout)]
    return {"onefix": verdict(out.stdout), "diff_tags": "cuda" if cuda_only(paths) else ""}


def mark_from_diff(rows, clone):
    """Fill the diff's facts (DIFF_FACTS) of resolved rows from the clone."""
    for row in rows:
        if row.get("status") == "resolved" and row.get("buggy_sha") and row.get("corrected_sha"):
            row.update(diff_facts(clone, row["buggy_sha"], row["corrected_sha"]))
    return rows


def write_commits(rows, path):
    write_csv(path, rows, COLUMNS)
