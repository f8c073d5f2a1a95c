"""The static side: what a fix's diff can affect, from the diff and the operator tables alone.
Each file of the diff goes by the first rule of ``rules`` that applies to it, which adds its typed
claims (``claims``: operators with their ways, Python lines, binding members, CUDA-only code,
what is entered through one package or compiled under one build setting, not shipped, unknown
with its reason) to the fix's ``claims.Mapping``.
"""
from ..framework import patch
from ..framework.paths import CUDA, kind_of
from .claims import Mapping, Operator
from .rules import RULES, Change


def needs_tables(diff_text):
    """Whether mapping this diff needs the operator tables (it changes C++ or ATen's YAML)."""
    return any(kind_of(fd.name) == "cpp" and not (fd.binary or CUDA.search(fd.name))
               for fd in patch.parse(diff_text))


def map_diff(diff_text, tables, old_tree=None, new_tree=None):
    """A fix's diff mapped through ``tables`` (built at the corrected commit; None when
    ``needs_tables`` says no), each file by the first of ``RULES`` that applies to it.
    ``new_tree`` and ``old_tree``: copies of the changed files at the corrected and buggy commits
    (default: the tables' own tree, where hunks are found by text)."""
    mapping = Mapping(tables=tables.label if tables else "not needed (no C++ change)")
    for fd in patch.parse(diff_text):
        change = Change(fd, tables, old_tree, new_tree, mapping)
        next(r for r in RULES if r.applies(change)).claim(change)
    if tables is not None:
        for claim in mapping.of(Operator):
            if not claim.backward:
                claim.carriers = frozenset(tables.calling_ops({claim.op, *claim.way.functions[-1:]}) - {claim.op})
    return mapping
