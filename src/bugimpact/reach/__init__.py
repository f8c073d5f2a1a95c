"""Reach: whether a workload can execute what a fix changed, said before any build or run.

A fix can change a workload's numbers only if the workload executes what the fix changed. The
static side (``static``) maps a fix's diff to what it can affect: Python lines of the package, ATen
operators (through ``native_functions.yaml``, ``derivatives.yaml`` and DispatchStub kernels), CUDA-only
sources, or ``unknown`` with the reason where the mapping cannot bound the change. The dynamic side
(``harness/trace.py``) records what a few training steps of the study's own workload dispatch and
execute on a release wheel. ``verdict`` puts the two together: ``not reached``, ``not reached on
cpu``, ``reached`` (which operators or lines) or ``unknown`` (why). It never guesses towards "not
reached": anything the tables cannot bound is ``unknown``.
"""
