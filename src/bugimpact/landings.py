"""Which commits land a pull request, and which revert or re-land it, read from commit messages in
the forms PyTorch's history uses (measured on its master, 2019-2020: tests/fixtures/pytorch-history).

A commit lands PR N when its message carries the landing bot's line ``Pull Request resolved:
https://github.com/<repo>/pull/N`` on a line of its own or after ``Summary:`` (about one landing in
five in 2019-2020 is written ``Summary: Pull Request resolved: ...``), is a ``Merge pull request #N``
merge, or ends its subject with GitHub's squash ``(#N)``. A line that only cites a PR (``Original Pull
Request resolved:``, a URL in prose, ``(#N)`` in a body) lands nothing.

A revert lands nothing of what it reverts. It names its target in one of four ways, tried in order:
``This reverts commit <sha>``; ``Revert D<n>`` (the target's ``Differential Revision: D<n>``);
``Original commit changeset: <hex>`` (the target's ``fbshipit-source-id``); or the target's subject
quoted (``Revert "<subject>"``, ``Back out "<subject>"``). A revert that carries the bot line of a PR
that already landed reverts that PR's latest landing. Reverting a revert re-lands what it reverted.
"""
import re
from dataclasses import dataclass, field

REVERT_SUBJECT = re.compile(r"^(revert|back(ed)?[ -]?out|unland)\b", re.IGNORECASE)
REVERTS_SHA = re.compile(r"This reverts commit ([0-9a-f]{7,40})")
REVERT_DIFF = re.compile(r"^(?:Revert|Back(?:ed)?[ -]?out)\s+D(\d+)\b", re.IGNORECASE)
QUOTED_SUBJECT = re.compile(r'^(?:Revert|Back(?:ed)?[ -]?out|Unland)\s+"(.+)"', re.IGNORECASE)
DIFF_REVISION = re.compile(r"Differential Revision:\s*(?:https?://\S+/)?D(\d+)\b")
CHANGESET = re.compile(r"Original commit changeset:\s*([0-9a-f]{7,40})\b")
FBSOURCE = re.compile(r"fbshipit-source-id:\s*([0-9a-f]{7,40})\b")
CHERRY_PICKED = re.compile(r"\(cherry picked from commit ([0-9a-f]{7,40})\)")
SQUASH = re.compile(r"\(#(\d+)\)\s*$")
MERGE = re.compile(r"^Merge pull request #(\d+)\b")
RELEASE_TAG = re.compile(r"^\s*\[(v?\d+\.\d+(\.\d+)?|release[/ ]?\d+\.\d+)\]\s*", re.IGNORECASE)


@dataclass
class Commit:
    sha: str
    parents: list
    date: str
    message: str
    on_default: bool = True

    @property
    def subject(self):
        return self.message.split("\n", 1)[0].strip()


@dataclass
class Landing:
    commit: Commit
    how: str  # "landed", "a re-land, reverting revert <sha>", or "a revert" (the PR is a revert)
    reverted_by: list = field(default_factory=list)


def normal_subject(subject):
    """A subject compared across branches and reverts: no release tag in front, no ``(#N)`` at the
    end, case and spacing folded; and whether GitHub truncated it (a title cut with ``…``)."""
    subject = RELEASE_TAG.sub("", subject)
    while True:
        trimmed = SQUASH.sub("", subject).strip()
        if trimmed == subject:
            break
        subject = trimmed
    truncated = subject.endswith("…")
    return " ".join(subject.rstrip("…").lower().split()), truncated


class LandingParser:
    def __init__(self, repo="pytorch/pytorch"):
        self.bot_line = re.compile(rf"^[ \t]*(?:Summary:[ \t]*)?Pull Request resolved:[ \t]*"
                                   rf"https?://github\.com/{re.escape(repo)}/pull/(\d+)\b",
                                   re.MULTILINE | re.IGNORECASE)

    def landed(self, message):
        """PR numbers the message says this commit lands (see the module doc)."""
        subject = message.split("\n", 1)[0]
        found = {int(n) for n in self.bot_line.findall(message)}
        found.update(int(n) for n in MERGE.findall(subject))
        found.update(int(n) for n in SQUASH.findall(subject))
        return found

    @staticmethod
    def squash_pr(message):
        match = SQUASH.search(message.split("\n", 1)[0])
        return int(match.group(1)) if match else None

    @staticmethod
    def is_revert(message):
        return bool(REVERT_SUBJECT.match(message)) or bool(REVERTS_SHA.search(message))


class LandingIndex:
    """Every landing of every PR in a history, from its commits oldest first."""

    def __init__(self, commits, repo="pytorch/pytorch"):
        self.parser = LandingParser(repo)
        self.landings = {}  # PR -> [Landing] oldest first
        self.commits = {}  # sha -> Commit
        self.prs_of = {}  # sha -> PRs that commit lands
        self.revert_targets = {}  # sha of a revert -> shas it reverts
        self._by_diff, self._by_fbsource, self._by_subject = {}, {}, {}
        self._short, self._truncated = {}, []
        for commit in commits:
            self._add(commit)

    def _add(self, commit):
        self.commits[commit.sha] = commit
        self._short.setdefault(commit.sha[:7], []).append(commit.sha)
        own = self.parser.landed(commit.message)
        if self.parser.is_revert(commit.message):
            targets = self._targets(commit, own)
            self.revert_targets[commit.sha] = targets
            reverted_prs = {pr for t in targets for pr in self.prs_of.get(t, ())}
            for target in targets:
                for landing in self._landings_at(target):
                    landing.reverted_by.append(commit.sha)
                for original in self.revert_targets.get(target, ()):  # a revert reverted: re-land
                    for pr in self.prs_of.get(original, ()):
                        self._land(pr, commit, f"a re-land, reverting revert {target[:12]}")
            for pr in own - reverted_prs:  # the revert's own PR (a revert can land as a PR)
                self._land(pr, commit, "a revert")
        else:
            for pr in own:
                self._land(pr, commit, "landed")
        for diff in DIFF_REVISION.findall(commit.message):
            self._by_diff[diff] = commit.sha
        for source in FBSOURCE.findall(commit.message):
            self._by_fbsource.setdefault(source[:12], commit.sha)
        subject, truncated = normal_subject(commit.subject)
        self._by_subject.setdefault(subject, []).append(commit.sha)
        if truncated:
            self._truncated.append((subject, commit.sha))

    def _land(self, pr, commit, how):
        self.landings.setdefault(pr, []).append(Landing(commit, how))
        self.prs_of.setdefault(commit.sha, set()).add(pr)

    def _landings_at(self, sha):
        return [landing for pr in self.prs_of.get(sha, ()) for landing in self.landings[pr]
                if landing.commit.sha == sha]

    def full_sha(self, prefix):
        return next((s for s in self._short.get(prefix[:7], ()) if s.startswith(prefix)), None)

    def _targets(self, commit, own):
        """The commits a revert reverts, by the first way of naming them that finds any."""
        message = commit.message
        named = [self.full_sha(s) for s in REVERTS_SHA.findall(message)]
        found = [s for s in named if s]
        if not found:
            found = [self._by_diff[d] for d in REVERT_DIFF.findall(commit.subject) if d in self._by_diff]
        if not found:
            found = [self._by_fbsource[c[:12]] for c in CHANGESET.findall(message)
                     if c[:12] in self._by_fbsource]
        if not found:
            quoted = QUOTED_SUBJECT.match(commit.subject)
            earlier = self._by_subject.get(normal_subject(quoted.group(1))[0]) if quoted else None
            found = earlier[-1:] if earlier else []
        if not found:  # fbshipit style: the reverted PR's bot line, and that PR landed before
            own_pr = self.parser.squash_pr(message)
            found = [self.landings[pr][-1].commit.sha for pr in sorted(own)
                     if pr != own_pr and self.landings.get(pr)]
        return [s for s in found if s != commit.sha]

    def same_change_on_default(self, commit):
        """For a commit off the default branch: the default-branch commit it was cherry-picked
        from (named in the message, or with the same subject), or None."""
        for prefix in CHERRY_PICKED.findall(commit.message):
            sha = self.full_sha(prefix)
            if sha and self.commits[sha].on_default:
                return self.commits[sha]
        subject, truncated = normal_subject(commit.subject)
        shas = list(self._by_subject.get(subject, ()))
        shas += [s for prefix, s in self._truncated if subject.startswith(prefix)]
        if truncated:
            shas += [s for key, found in self._by_subject.items() if key.startswith(subject)
                     for s in found]
        same = [self.commits[s] for s in shas if self.commits[s].on_default and self.prs_of.get(s)]
        return max(same, key=lambda c: c.date) if same else None
