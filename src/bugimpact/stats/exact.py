"""Metrics as exact rationals, from the confusion counts a run record holds.

Accuracy on digits is k/450: as floats, 359/450 - 357/450 and 362/450 - 360/450 differ in the last
bit, so a rank test would see two differences where there is one (a broken tie changes an exact
p-value by up to 0.25). From the counts, every metric is a Fraction, and ties, signs and differences
are exact. Records without counts (made by an older harness) keep their float metrics, compared on
the 1e-12 grid of ``rank_tests.snap``.
"""
from ..harness.metrics import METRICS as _HARNESS_METRICS

# metric -> its exact value from the confusion matrix: the harness's own (each defined once, in
# ``harness.metrics``), and any a plugin registers here
METRICS = dict(_HARNESS_METRICS)


def register_metric(name, of_matrix):
    """Add a metric (a plugin's: ``bugimpact.plugins``): ``of_matrix(matrix)``, its exact value
    (a Fraction) from a run's confusion matrix, which every record of this harness holds."""
    from ..plugins import register
    return register(METRICS, name, of_matrix, "metric")


def metrics():
    """Every metric the statistics can test, the plugins' included: name -> its function."""
    from ..plugins import every
    return every(METRICS)


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
