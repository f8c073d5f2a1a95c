"""Metrics as exact rationals, from the confusion counts a run record holds.

Accuracy on digits is k/450: as floats, 359/450 - 357/450 and 362/450 - 360/450 differ in the last
bit, so a rank test would see two differences where there is one (a broken tie changes an exact
p-value by up to 0.25). From the counts, every metric is a Fraction, and ties, signs and differences
are exact. Records without counts (made by an older harness) keep their float metrics, compared on
the 1e-12 grid of ``rank_tests.snap``.
"""
from ..harness.metrics import METRICS as _HARNESS_METRICS
from ..plugins import Registry
from ..records import read_record

# metric -> its exact value from the confusion matrix: the harness's own (each defined once, in
# ``harness.metrics``), and any a plugin registers here
METRICS = Registry("metric", "stats.metrics", _HARNESS_METRICS)
# a plugin's metric (``bugimpact.plugins``): (name, of_matrix), its exact value (a Fraction) from a
# run's confusion matrix, which every record of this harness holds
register_metric = METRICS.add
metrics = METRICS.every  # name -> its function, the plugins' included


def exact_metrics(counts):
    """Every metric as a Fraction, from a record's confusion counts."""
    return {name: of_matrix(counts["matrix"]) for name, of_matrix in metrics().items()}


def metric_values(records, metric):
    """The metric of each record: exact Fractions when every record holds its counts and the
    metric is one of them, else the recorded floats."""
    exact = []
    for record in records:
        counts = record.get("counts")
        if not counts:
            return [record["metrics"][metric] for record in records]
        value = exact_metrics(counts).get(metric)
        if value is None:
            return [record["metrics"][metric] for record in records]
        exact.append(value)
    return exact


def counted_record(path):
    """The run record at ``path`` (``records.read_record``), with every metric the statistics know."""
    return with_counted_metrics(read_record(path))


def with_counted_metrics(record):
    """The record with every metric the statistics know: the harness's own floats, and those
    only its confusion counts give (a plugin's metric, ``stats.exact.register_metric``) as the
    floats of their exact values. The record on disk is not changed."""
    counts = record.get("counts")
    if record.get("status") != "ok" or not counts:
        return record
    missing = {name: of_matrix for name, of_matrix in metrics().items() if name not in record["metrics"]}
    if not missing:
        return record
    counted = {name: float(of_matrix(counts["matrix"])) for name, of_matrix in missing.items()}
    return dict(record, metrics={**record["metrics"], **counted})
