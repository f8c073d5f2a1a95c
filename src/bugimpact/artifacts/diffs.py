"""A fix's own diff, from where the config says: a patch file, a clone, or the GitHub API."""
import subprocess
from pathlib import Path

from .onefix import Refused


def fix_diff(sources, spec):
    """The fix's own diff and where it came from: a patch file, the clone, or the GitHub API."""
    if spec.get("patch"):
        return Path(spec["patch"]).read_text(encoding="utf-8"), f"file {spec['patch']}"
    from ..resolve import checked_sha
    buggy, corrected = spec.get("buggy_sha"), spec.get("corrected_sha")
    clone = sources["fix_clone"]
    if clone or sources["fix_api"]:
        try:  # commits from a sheet or an API are data: never an option for git
            checked_sha(buggy, "buggy_sha")
            checked_sha(corrected, "corrected_sha")
        except ValueError as exc:
            raise Refused(str(exc)) from None
    if clone:
        out = subprocess.run(["git", "-C", clone, "diff", "--full-index", buggy, corrected, "--"],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"git diff {buggy[:12]} {corrected[:12]} in {clone} failed: "
                               f"{out.stderr.strip()[-400:]}")
        return out.stdout, f"clone {clone}: git diff {buggy} {corrected}"
    if sources["fix_api"]:
        from ..mine.github import GitHubClient
        client = GitHubClient(base_url=sources["api_url"])
        return (client.compare_diff(sources["repo"], buggy, corrected),
                f"GitHub API: compare {buggy}...{corrected}")
    raise Refused("no source for the fix's diff: give a patch file, set artifacts.onefix.clone "
                  "(or resolve.clone), or set artifacts.onefix.api")
