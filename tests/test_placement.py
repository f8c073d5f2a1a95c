"""Where a fix's changes sit in a release's copy of a file that moved on since the fix (lines
shifted, context edited): one placing for one-fix artifacts and for reach, the changed lines found
or the fix refused, never guessed. Real wheels and git's own diffs."""
import hashlib
import subprocess
import zipfile

import pytest
from conftest import git

from bugimpact.artifacts import onefix
from bugimpact.framework import patch

BASE = [f"line {i}" for i in range(1, 41)]
BASE[19] = "    value = compute(x)"  # the line the fix changes
BASE[20] = "    return value"


def text(lines, end="\n"):
    return "".join(line + end for line in lines)


def fix_diff(tmp_path, before, after, name="torch/mod.py"):
    """git's diff of one file, as a fix's diff is."""
    repo = tmp_path / "repo"
    (repo / name).parent.mkdir(parents=True, exist_ok=True)
    git(repo.parent, "init", "-q", str(repo))
    (repo / name).write_text(before)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "buggy")
    (repo / name).write_text(after)
    return git(repo, "diff") + "\n"


def wheel(tmp_path, files, label="release"):
    """A release wheel holding these package files ({path: text or bytes})."""
    path = tmp_path / f"{label}.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return path


def fixed(lines, at=19):
    out = list(lines)
    assert out[at] == "    value = compute(x)"
    out[at] = "    value = compute(x.detach())"
    return out


def test_a_fix_applies_to_a_release_whose_context_moved_and_changed(tmp_path):
    diff = fix_diff(tmp_path, text(BASE), text(fixed(BASE)))
    # the release: 7 lines more above the fix, and the context line right above it edited
    moved = [f"new {i}" for i in range(7)] + BASE
    moved[7 + 18] = "line 19 (edited on the release branch)"
    release = wheel(tmp_path, {"torch/mod.py": text(moved)})
    assert subprocess.run(["git", "apply", "--check", "-"], input=diff, text=True, cwd=tmp_path,
                          capture_output=True).returncode != 0  # git apply refuses it
    into, direction, overlay, placement = onefix.make_overlay(release, diff, "corrected", tmp_path / "a")
    assert (into, direction) == (False, "forward")
    patched = (tmp_path / "a" / "overlay" / "torch" / "mod.py").read_text()
    assert patched == text(fixed(moved, 26))  # only the changed line differs from the release
    assert overlay == {"torch/mod.py": hashlib.sha256(patched.encode()).hexdigest()}
    assert placement == [{"file": "torch/mod.py", "line": 27,
                          "placed": "shifted +7 lines, 5 of 6 context lines matching"}]
    # the release that has the fix: the buggy arm reverses it, the corrected arm is the release
    has_it = wheel(tmp_path, {"torch/mod.py": text(fixed(moved, 26))}, "later")
    assert onefix.make_overlay(has_it, diff, "corrected", tmp_path / "b")[:3] == (True, None, {})
    into, direction, _, _ = onefix.make_overlay(has_it, diff, "buggy", tmp_path / "c")
    assert (into, direction) == (True, "reverse")
    assert (tmp_path / "c" / "overlay" / "torch" / "mod.py").read_text() == text(moved)


def test_a_changed_line_missing_or_in_two_places_alike_refuses_the_fix(tmp_path):
    diff = fix_diff(tmp_path, text(BASE), text(fixed(BASE)))
    edited = list(BASE)
    edited[19] = "    value = compute(x, y)"  # the release changed the fixed line itself
    with pytest.raises(onefix.Refused, match=r"forwards, torch/mod.py: the change at line 20: its line "
                                             r"'value = compute\(x\)' is not in the copy; in reverse"):
        onefix.make_overlay(wheel(tmp_path, {"torch/mod.py": text(edited)}), diff, "buggy", tmp_path / "a")
    # the changed line twice, with no context around either to tell them apart
    twice = [f"other {i}" for i in range(10)] + BASE[19:20] + [f"more {i}" for i in range(10)] + BASE[19:20]
    with pytest.raises(onefix.Refused, match=r"its lines are in 2 places alike \(lines 22, 11\)"):
        onefix.make_overlay(wheel(tmp_path, {"torch/mod.py": text(twice)}, "twice"), diff, "buggy",
                            tmp_path / "b")


def test_an_insertion_is_placed_by_all_its_context_and_never_where_it_stands(tmp_path):
    added = BASE[:20] + ["    check(value)"] + BASE[20:]
    diff = fix_diff(tmp_path, text(BASE), text(added))
    # the release without it: placed forwards; with it: only in reverse
    assert onefix.make_overlay(wheel(tmp_path, {"torch/mod.py": text(BASE)}), diff, "corrected",
                               tmp_path / "a")[1] == "forward"
    assert onefix.make_overlay(wheel(tmp_path, {"torch/mod.py": text(added)}, "has"), diff, "buggy",
                               tmp_path / "b")[1] == "reverse"
    # an insertion has no line of its own to be found by: an edited context line refuses it
    edited = list(BASE)
    edited[18] = "line 19 (edited)"
    with pytest.raises(onefix.Refused, match="it adds lines only, and its context is not in the copy"):
        onefix.make_overlay(wheel(tmp_path, {"torch/mod.py": text(edited)}, "edited"), diff, "buggy",
                            tmp_path / "c")


def test_line_ends_and_a_last_line_without_one_are_kept(tmp_path):
    lines = BASE[:21]
    diff = fix_diff(tmp_path, text(lines), text(fixed(lines)))
    crlf = text(lines, "\r\n")[:-2]  # CRLF line ends, and none after the last line
    _, _, _, _ = onefix.make_overlay(wheel(tmp_path, {"torch/mod.py": crlf}), diff, "corrected",
                                     tmp_path / "a")
    patched = (tmp_path / "a" / "overlay" / "torch" / "mod.py").read_bytes()
    assert patched == text(fixed(lines), "\r\n")[:-2].encode()


def test_a_renamed_file_is_found_under_each_sides_name(tmp_path):
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", str(repo))
    (repo / "torch" / "_old").mkdir(parents=True)
    (repo / "torch" / "_old" / "m.py").write_text(text(BASE))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "buggy")
    git(repo, "mv", "torch/_old", "torch/new")
    (repo / "torch" / "new" / "m.py").write_text(text(fixed(BASE)))
    diff = git(repo, "diff", "-M", "HEAD") + "\n"
    assert "rename from torch/_old/m.py" in diff
    release = wheel(tmp_path, {"torch/new/m.py": text(fixed(BASE))})
    into, direction, overlay, placement = onefix.make_overlay(release, diff, "buggy", tmp_path / "a")
    assert (into, direction) == (True, "reverse") and overlay["torch/new/m.py"] is None
    assert (tmp_path / "a" / "overlay" / "torch" / "_old" / "m.py").read_text() == text(BASE)
    assert placement[0] == {"file": "torch/new/m.py", "line": 1, "placed": "renamed to torch/_old/m.py"}


def test_reach_places_a_hunk_as_the_artifacts_do():
    hunk = patch.parse(
        "diff --git a/torch/m.py b/torch/m.py\n--- a/torch/m.py\n+++ b/torch/m.py\n"
        "@@ -18,4 +18,4 @@ def f(x):\n line 18\n line 19\n-    value = compute(x)\n"
        "+    value = compute(x.detach())\n     return value\n")[0].hunks[0]
    moved = ["header"] * 5 + BASE
    moved[5 + 18] = "line 19 (edited)"
    assert patch.locate(hunk, moved) == ("old", [25])  # the changed line, in the moved copy
    assert patch.locate(hunk, fixed(moved, 24)) == ("new", [25])
    assert patch.locate(hunk, ["nothing of it"]) is None


def test_a_change_whose_line_the_release_edited_around_the_fixs_own_edit_is_made_within_the_line(tmp_path):
    """pr38156's case: the fix appended "unique" to a list; the release branch took the fix without
    another element of that list ("istft"). The fix's own edit, with the characters around it,
    is in one line of the release: made there, the rest of the line is the release's."""
    before = BASE[:19] + ['    ops = ["stft", "istft", "lu", "norm"]'] + BASE[20:]
    after = BASE[:19] + ['    ops = ["stft", "istft", "lu", "norm", "unique"]'] + BASE[20:]
    diff = fix_diff(tmp_path, text(before), text(after))
    release = BASE[:19] + ['    ops = ["stft", "lu", "norm", "unique"]'] + BASE[20:]
    into, direction, _, placement = onefix.make_overlay(wheel(tmp_path, {"torch/mod.py": text(release)}),
                                                        diff, "buggy", tmp_path / "a")
    assert (into, direction) == (True, "reverse")
    reversed_ = (tmp_path / "a" / "overlay" / "torch" / "mod.py").read_text()
    assert reversed_ == text(BASE[:19] + ['    ops = ["stft", "lu", "norm"]'] + BASE[20:])
    assert placement[0]["placed"] == "within the line: '\", \"unique\"]' made '\"]'"
    # the edit in two lines of the release alike, up to where the fix's line is not the release's:
    # nothing tells which one, refused
    twice = release[:30] + ['    other = ["stft", "lu", "norm", "unique"]'] + release[30:]
    with pytest.raises(onefix.Refused, match="in either direction"):
        onefix.make_overlay(wheel(tmp_path, {"torch/mod.py": text(twice)}, "twice"), diff, "buggy", tmp_path / "b")


def test_a_change_the_release_re_indented_is_made_at_the_releases_indentation(tmp_path):
    """pr36503's case: the fix's new lines are in the release inside a new branch, one level
    deeper, with a blank line between them: found ignoring whitespace and blank lines, once, and
    the other side's lines go in at the release's indentation."""
    before = BASE[:19] + ["    copies.append(module.copy())"] + BASE[20:]
    after = BASE[:19] + ["    replica = module.copy()", "    replica.former = {}", "    copies.append(replica)"] + BASE[20:]
    diff = fix_diff(tmp_path, text(before), text(after))
    release = BASE[:19] + ["    if scripted:", "        replica = script_copy(module)", "    else:",
                           "        replica = module.copy()", "", "    replica.former = {}",
                           "    copies.append(replica)"] + BASE[20:]
    into, direction, _, placement = onefix.make_overlay(wheel(tmp_path, {"torch/mod.py": text(release)}),
                                                        diff, "buggy", tmp_path / "a")
    assert (into, direction) == (True, "reverse")
    assert placement[0]["placed"] == "re-indented: its lines found ignoring whitespace and blank lines, 4 lines of the copy"
    reversed_ = (tmp_path / "a" / "overlay" / "torch" / "mod.py").read_text().splitlines()
    assert reversed_[19:23] == ["    if scripted:", "        replica = script_copy(module)", "    else:",
                                "        copies.append(module.copy())"]
