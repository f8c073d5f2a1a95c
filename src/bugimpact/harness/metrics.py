"""Test-set metrics, each defined once, as an exact function of the confusion matrix (rows: true
label, columns: predicted): accuracy and the unweighted (macro) mean over classes of precision,
recall and F1, where a class never predicted has precision 0 (scikit-learn's zero_division=0).

A run record holds the counts and each metric as a float (the correctly rounded value of the
exact one); the statistics compare the exact values (``stats.exact``). Standard library only."""
from fractions import Fraction


def confusion_counts(y_true, y_pred):
    """The labels seen and the confusion matrix (rows: true label, columns: predicted), as ints."""
    y_true, y_pred = [int(v) for v in y_true], [int(v) for v in y_pred]
    labels = sorted(set(y_true) | set(y_pred))
    index = {label: i for i, label in enumerate(labels)}
    matrix = [[0] * len(labels) for _ in labels]
    for t, p in zip(y_true, y_pred):
        matrix[index[t]][index[p]] += 1
    return {"labels": labels, "matrix": matrix}


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


def _macro(index):
    def metric(matrix):
        classes = list(_per_class(matrix))
        return sum(values[index] for values in classes) / len(classes)
    return metric


def _accuracy(matrix):
    return Fraction(sum(matrix[c][c] for c in range(len(matrix))), sum(map(sum, matrix)))


# metric -> its exact value (a Fraction) from the confusion matrix, in the order records list them
METRICS = {"accuracy": _accuracy, "precision": _macro(0), "recall": _macro(1), "f1": _macro(2)}


def recorded_metrics(counts):
    """What a record holds as ``metrics``: each metric's float, from ``confusion_counts``."""
    return {name: float(of_matrix(counts["matrix"])) for name, of_matrix in METRICS.items()}
