"""A fix made on the generators' lists and op files entry by entry, where a line merge conflicts: a
TH port taken back on a release that took its neighbours' entries away too (pr25041, pr25285 on
torch 1.3.0 and 1.4.0), and the conflicts named by entry."""
import pytest

from bugimpact.framework import entries
from bugimpact.framework.apply import NotPlaced, merged


def cwrap(*names):
    return "".join(f"[[\n  name: {n}\n  cname: {n[4:]}\n  return: argument 0\n]]\n" for n in names).encode()


def test_a_port_taken_back_beside_its_neighbours_ports_conflicts_by_line_and_merges_by_entry():
    # the fix took _th_ceil away; the release then took its neighbours away too
    buggy, fixed = cwrap("_th_abs", "_th_floor", "_th_ceil", "_th_round", "_th_neg"), cwrap(
        "_th_abs", "_th_floor", "_th_round", "_th_neg")
    release = cwrap("_th_abs", "_th_neg")
    with pytest.raises(NotPlaced, match="conflict"):
        merged(release, buggy, fixed, "new", "aten/src/ATen/Declarations.cwrap")
    taken_back = entries.merged(release, buggy, fixed, "new", "aten/src/ATen/Declarations.cwrap")
    assert taken_back == cwrap("_th_abs", "_th_ceil", "_th_neg")  # after the entry it followed that is left
    # made forwards on a release that still has it, the entry goes
    assert entries.merged(cwrap("_th_ceil", "_th_neg"), buggy, fixed, "old", "x/Declarations.cwrap") == cwrap("_th_neg")


def test_an_entry_the_release_changed_itself_is_a_conflict_named_by_its_key():
    yaml_before = b"# head\n\n- func: sign(Tensor self) -> Tensor\n  named_guard: True\n\n- func: abs(Tensor self) -> Tensor\n"
    yaml_after = yaml_before.replace(b"named_guard: True", b"named_guard: False")
    release = yaml_before.replace(b"named_guard: True", b"supports_named_tensor: True")
    with pytest.raises(NotPlaced, match=r"by entry too, 1 of the fix's entries read otherwise on the release "
                                        r"\(sign\(Tensor self\) -> Tensor\)"):
        entries.merged(release, yaml_before, yaml_after, "old", "aten/src/ATen/native/native_functions.yaml")
    # an entry added after one the release no longer has: after the nearest before it that it has
    added = yaml_before + b"\n- func: sgn(Tensor self) -> Tensor\n"
    made = entries.merged(yaml_before.replace(b"abs", b"absolute"), yaml_before, added, "old", "native_functions.yaml")
    assert made == b"# head\n\n- func: sign(Tensor self) -> Tensor\n  named_guard: True\n\n" \
                   b"- func: sgn(Tensor self) -> Tensor\n- func: absolute(Tensor self) -> Tensor\n"
    assert entries.kind_of("tools/autograd/derivatives.yaml") == "yaml" and entries.kind_of("nn.yaml") is None


def test_an_entry_without_a_name_is_known_by_its_text_not_its_line():
    # 2020's Declarations.cwrap has a stray "[[" before _th_bmm's entry: keyed by its line, it read
    # as another entry wherever the fix or the release had moved it (pr37659 taken back on the tree
    # of 1.6.0 conflicted on "line 587" against "line 513", where git's own revert goes through)
    stray = b"[[\n"
    buggy = cwrap("_th_gather", "_th_equal") + stray + cwrap("_th_bmm")
    fixed = cwrap("_th_equal") + stray + cwrap("_th_bmm")
    release = cwrap("_th_equal", "_th_addr") + stray + cwrap("_th_bmm")  # the release's own entries before it
    taken_back = entries.merged(release, buggy, fixed, "new", "aten/src/ATen/Declarations.cwrap")
    assert taken_back == cwrap("_th_gather", "_th_equal", "_th_addr") + stray + cwrap("_th_bmm")
    # a nameless entry whose text the release changed is still a conflict, named by its text
    with pytest.raises(NotPlaced, match=r"read otherwise on the release \(\[\[ cname: x \]\]\)"):
        entries.merged(b"[[\n  cname: y\n]]\n", b"[[\n  cname: x\n]]\n", b"[[\n  cname: z\n]]\n", "old", "x.cwrap")


UNARY = """// the unary ops
#include <ATen/ATen.h>

namespace at { namespace native {

Tensor& neg_out(Tensor& result, const Tensor& self) {
  return result;
}
%s
#define IMPLEMENT_UNARY_OP_VEC(op) \\
  Tensor op(const Tensor& self) { return self; }

%s
}} // namespace at::native
"""
ROUND = """
Tensor round(const Tensor& self) {
  return at::round_out(self, self);
}
"""


def test_an_op_files_port_is_taken_back_by_definition_and_statement():
    """pr25041's shape: the port added round's functions and took its macro line away; the release
    then ported its neighbours too, so their macro lines are gone and a line merge conflicts."""
    path = "aten/src/ATen/native/UnaryOps.cpp"
    macros = "IMPLEMENT_UNARY_OP_VEC(acos)\nIMPLEMENT_UNARY_OP_VEC(round)\nIMPLEMENT_UNARY_OP_VEC(sin)\n"
    buggy = (UNARY % ("", macros)).encode()
    fixed = (UNARY % (ROUND, macros.replace("IMPLEMENT_UNARY_OP_VEC(round)\n", ""))).encode()
    release = (UNARY % (ROUND, "IMPLEMENT_UNARY_OP_VEC(cos)\n")).encode()  # acos and sin ported since
    with pytest.raises(NotPlaced, match="conflict"):
        merged(release, buggy, fixed, "new", path)
    taken_back = entries.merged(release, buggy, fixed, "new", path).decode()
    assert "Tensor round(const Tensor& self)" not in taken_back and "IMPLEMENT_UNARY_OP_VEC(round)" in taken_back
    assert taken_back.index("IMPLEMENT_UNARY_OP_VEC(round)") < taken_back.index("IMPLEMENT_UNARY_OP_VEC(cos)")
    assert taken_back.rstrip().endswith("}} // namespace at::native")
    # the release changed round's body since: its definition reads otherwise, a conflict
    edited = release.replace(b"at::round_out(self, self)", b"at::round_out(self.contiguous(), self)")
    with pytest.raises(NotPlaced, match=r"read otherwise on the release \(Tensor round\(const Tensor& self\)\)"):
        entries.merged(edited, buggy, fixed, "new", path)
