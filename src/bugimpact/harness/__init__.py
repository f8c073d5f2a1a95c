"""The training harness: trains one run inside the framework build under study.

Runs inside old runtimes (Python 3.6, PyTorch 1.1): standard library, numpy and torch only, Python
3.6 syntax, and every torch API newer than 1.1 feature-detected. Bump HARNESS_VERSION whenever a
change could alter what a run computes: it is part of the experiment key, so old records never mix
with new ones, while edits that change nothing computed retrain nothing.
"""
HARNESS_VERSION = "2"
# What a reach trace records (``trace.traced``). The reach_trace rule's params hold it: bump it when
# a trace records something new, and traces made before are made again (their verdicts would say
# ``unknown`` for what they lack).
TRACE_VERSION = 5  # 2: the binding classes' methods; 3: and their binding types' properties; 4: without the
# recorder's own probe; 5: the release's own C++ functions the run called (``loader``)
