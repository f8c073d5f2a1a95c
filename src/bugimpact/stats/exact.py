"""Metrics as exact rationals, from the confusion counts a run record holds.

Accuracy on digits is k/450: as floats, 359/450 - 357/450 and 362/450 - 360/450 differ in the last
bit, so a rank test would see two differences where there is one (a broken tie changes an exact
p-value by up to 0.25). From the counts, every metric is a Fraction, and ties, signs and differences
are exact. Records without counts (made by an older harness) keep their float metrics, compared on
the 1e-12 grid of ``rank_tests.snap``.
"""
from fractions import Fraction


def _per_class(matrix):
    size = len(matrix)
    for c in range(size):
        tp = matrix[c][c]
        predicted = sum(matrix[r][c] for r in range(size))
        actual = sum(matrix[c])
        precision = Fraction(tp, predicted) if predicted else Fraction(0)
        recall = Fraction(tp, actual) if actual else Fraction(0)
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else Fraction(0)
        yield precision, recall, f1


def exact_metrics(counts):
    """accuracy, precision, recall and f1 (macro, as the harness computes them) as Fractions."""
    matrix = counts["matrix"]
    total = sum(map(sum, matrix))
    classes = list(_per_class(matrix))
    size = len(classes)
    return {"accuracy": Fraction(sum(matrix[c][c] for c in range(size)), total),
            "precision": sum(p for p, _, _ in classes) / size,
            "recall": sum(r for _, r, _ in classes) / size,
            "f1": sum(f for _, _, f in classes) / size}


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
