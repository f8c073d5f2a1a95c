"""A fix its release is entangled with (the release changed the fix's lines after it) is made on
the nearest release that takes it, on either side of the fix, and every try is named. Real git
histories made here, two release cuts each, and the real kernel part of an arm
(``overrides.arm.prepare``) on each release's reconstructed source."""
import pytest
from conftest import git
from test_overrides import HEADER, OP, commit, kernel, mirror, wheel

from bugimpact.artifacts import onefix, other_side
from bugimpact.overrides import arm as override_arm
from bugimpact.overrides.parts import Refused
from bugimpact.overrides.refusals import cause_of
from bugimpact.overrides.registration import no_registration, registered_files, registers_operators

FIXED = kernel(b"  return self * 2;  // fixed")
CUTS = {"9.8.0": b"#pragma once\nint cut_98();\n", "9.9.0": b"#pragma once\nint cut_99();\n"}


def history(tmp_path, order):
    """A master history of ``order``'s steps (each a day apart): ``fix`` (the op file fixed),
    ``edit`` (the fix's own line changed again), ``cut98``/``cut99`` (a release cut: the header its
    wheel ships; every other step changes it, so each cut is its release's branch point). Returns the
    repo and each step's commit."""
    repo = mirror(tmp_path)
    shas = {}
    for day, step in enumerate(order, start=1):
        when = f"2020-02-{day:02d}T00:00:00"
        if step == "fix":
            shas[step] = commit(repo, {OP: FIXED, HEADER: b"// fix\n"}, "Fix foo (#1)", when)
        elif step.startswith("edit"):
            line = kernel(f"  return self * {2 + day};  // fixed, then changed".encode())
            shas[step] = commit(repo, {OP: line, HEADER: f"// {step}\n".encode()}, f"Change foo again ({step})", when)
        else:
            shas[step] = commit(repo, {HEADER: CUTS[f"9.{step[-1]}.0"]}, f"release {step}", when)
    return repo, shas


def arms_on(repo, shas, tmp_path, versions, names=("9.8.0", "9.9.0")):
    """Both arms of the fix asked on the later cut's release, each made (its kernel part) on the
    nearest release of ``versions`` that takes it: arm -> manifest. ``names``: the cuts' versions."""
    parent = git(repo, "rev-parse", f"{shas['fix']}^")
    diff = git(repo, "diff", "--full-index", parent, shas["fix"]) + "\n"
    kernels = override_arm.parts.Kernels("op", {"op": [OP]}, diff)
    wheels = {v: wheel(tmp_path, version=v, headers={"ATen/native/Foo.h": h, "ATen/ATen.h": b""})
              for v, h in zip(names, CUTS.values())}
    made = {}
    for arm in ("buggy", "corrected"):
        folder = tmp_path / arm

        def make_on(spec, folder=folder):
            version = spec["release"]["version"]
            in_release, apply, part = override_arm.prepare(kernels, {"fix_clone": str(repo)}, spec, wheels[version],
                                                           version, folder)
            return {"source": "onefix", "release": spec["release"], "fix_in_release": in_release, "apply": apply,
                    "kernels": part, "patch_sha256": "0" * 64}

        spec = {"arm": arm, "release": {"source": "pypi", "version": names[1]}, "buggy_sha": parent,
                "corrected_sha": shas["fix"]}
        made[arm] = other_side.on_nearest_release(make_on, spec, versions, folder)
    return made


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the reconstructions' records go under results/


def test_a_fix_the_release_changed_after_is_taken_back_on_an_earlier_release_that_holds_it(tmp_path, results):
    """Before: refused, "the release changed them after the fix: 1 commit(s) to Foo.cpp". Now
    torch 9.8.0, cut between the fix and the change, holds the fix as it landed: taken back there."""
    repo, shas = history(tmp_path, ["fix", "cut98", "edit", "cut99"])
    with pytest.raises(Refused, match="the release changed them after the fix: 1 commit"):
        arms_on(repo, shas, tmp_path, [])  # the asked release alone: refused as before
    made = arms_on(repo, shas, tmp_path, ["9.8.0", "9.9.0", "10.0.0"])
    for manifest in made.values():
        assert manifest["release"]["version"] == "9.8.0" and manifest["fix_in_release"]
        first, then = manifest["release_tries"]
        assert first["version"] == "9.9.0" and first["cause"] == "the release changed the fix's lines after it"
        assert shas["edit"][:7] in first["refused"] and then == {"version": "9.8.0", "refused": None}
    buggy = made["buggy"]["kernels"]
    assert made["buggy"]["apply"] == "reverse" and made["corrected"]["kernels"] is None  # 9.8.0 as shipped
    tree = tmp_path / "buggy" / "kernels"
    assert (tree / "arm" / OP).read_bytes() == kernel(b"  return self * 1;")
    assert (tree / "release" / OP).read_bytes() == FIXED
    assert buggy["source"]["branch_point"] == shas["cut98"]
    assert onefix.describe(made["buggy"]).startswith("torch 9.8.0 with the fix's diff reversed")
    assert onefix.describe(made["buggy"]).endswith(
        "; torch 9.9.0 refused it (the release changed the fix's lines after it)")


def test_a_fix_landed_after_the_earlier_cut_is_made_forwards_there(tmp_path, results):
    """The other side: torch 9.8.0 was cut before the fix, and its notes (9.9.0's) do not make it
    a cherry-pick there: the fix is made forwards, and the buggy arm is 9.8.0 as shipped."""
    repo, shas = history(tmp_path, ["cut98", "fix", "edit", "cut99"])
    made = arms_on(repo, shas, tmp_path, ["9.8.0", "9.9.0"])
    for manifest in made.values():
        assert manifest["release"]["version"] == "9.8.0" and not manifest["fix_in_release"]
        assert manifest["kernels"] is None or manifest["kernels"]["source"]["fix"].startswith(
            "not in the release: landed after the branch point, listed in v9.9.0's notes")
    assert made["buggy"]["apply"] is None and made["corrected"]["apply"] == "forward"
    assert (tmp_path / "corrected" / "kernels" / "arm" / OP).read_bytes() == FIXED
    assert (tmp_path / "corrected" / "kernels" / "release" / OP).read_bytes() == kernel(b"  return self * 1;")


def test_where_no_release_nearer_takes_it_the_refusal_names_each_try_and_keeps_its_cause(tmp_path, results):
    repo, shas = history(tmp_path, ["fix", "edit1", "cut98", "edit2", "cut99"])
    with pytest.raises(Refused) as refused:
        arms_on(repo, shas, tmp_path, ["9.8.0", "9.9.0"])
    text = str(refused.value)
    assert text.startswith("the fix does not apply to torch 9.9.0's own files")
    assert "Tried nearer the fix too: torch 9.8.0: the fix does not apply to torch 9.8.0's own files" in text
    assert shas["edit1"][:7] in text.split("Tried nearer")[1]
    assert cause_of(text) == "the release changed the fix's lines after it"
    assert not (tmp_path / "buggy" / "kernels").exists() or not any((tmp_path / "buggy" / "kernels").iterdir())


def test_the_releases_tried_are_the_nearest_first_on_the_side_away_from_the_fix():
    versions = ["1.2.0", "1.10.0", "1.3.0", "1.5.0", "not-a-version", "1.4.0"]
    pypi = {"source": "pypi", "version": "1.4.0"}
    assert other_side.releases_to_try(pypi, versions, override_arm.Entangled("", True)) == ["1.3.0", "1.2.0"]
    assert other_side.releases_to_try(pypi, versions, override_arm.Entangled("", False)) == ["1.5.0", "1.10.0"]
    assert other_side.releases_to_try({"source": "wheel", "wheel": "x.whl"}, versions,
                                      override_arm.Entangled("", True)) == []


def test_on_a_release_without_a_known_registration_the_op_files_are_interposed(tmp_path, results):
    """Seen on the mirror: pr28982 and pr26303, entangled with 1.4.0, were made on 1.3.0 (one
    forwards, one taken back), and their runtimes refused: "no override registration is known for
    1.3" (1.3's, 1.2's and 1.1's are known now; 1.0's is not). Such a release's generated code calls each op file's
    exported ``at::native`` functions through the PLT, so a preloaded library takes them over: the
    route there interposes op files."""
    repo, shas = history(tmp_path, ["fix", "cut98", "edit", "cut99"])
    made = arms_on(repo, shas, tmp_path, ["1.0.0", "1.4.0"], names=("1.0.0", "1.4.0"))
    assert made["buggy"]["release"]["version"] == "1.0.0" and made["buggy"]["apply"] == "reverse"
    part = made["buggy"]["kernels"]
    assert part["route"] == "interposed" and "op" in part["interposed_parts"]
    route = override_arm.parts.Route.read(part["route"], part["interposed_parts"])
    assert route.interposed(OP) and not route.registers
    assert registered_files(part["rebuild"], route) == []
    on_14 = override_arm.parts.Kernels("op", {"op": [OP]}, "").route_on(registers_operators("1.4.0"))
    assert str(on_14) == "registered" and not on_14.interposed(OP)
    # an arm made before routes named their parts reads as registered: its build says why not
    assert no_registration("1.0.0", registered_files([OP], override_arm.parts.Route.read("registered"))) == (
        f"torch 1.0.0: no override registration is known for it (1.1, 1.2, 1.3, 1.4, 1.5, 1.6 and 2.x are), which "
        f"its op files need ({OP})")


def test_the_scope_names_where_a_release_s_own_source_was_read():
    """Seen: "kernels rebuilt from LinearAlgebra.cpp (tag ?)" for 1.3.0, whose own commit the clone holds."""
    kernels = {"rebuild": ["aten/src/ATen/native/LinearAlgebra.cpp"], "diff_sha256": "ab" * 32,
               "source": {"reconstructed": False, "commit": "6742476ba370164af3b8b45bfc2b86b96d286ad6",
                          "origin": "clone /m at the release's commit 6742476ba370 (its torch/version.py)"}}
    manifest = {"source": "onefix", "release": {"version": "1.3.0"}, "apply": "reverse", "kernels": kernels}
    assert onefix.describe(manifest) == (
        "torch 1.3.0 with the fix's diff reversed (diff sha256 abababababab); kernels rebuilt from "
        "LinearAlgebra.cpp (the release's commit 6742476ba370 (its torch/version.py))")
