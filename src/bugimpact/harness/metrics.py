"""Test-set metrics in numpy: accuracy and the unweighted (macro) mean over classes of precision,
recall and F1. A class never predicted has precision 0 (scikit-learn's zero_division=0). The
confusion counts they come from are recorded too, so the statistics compare exact rationals."""
import numpy as np


def classification_metrics(y_true, y_pred):
    y_true = np.asarray(y_true, dtype=np.int64)
    y_pred = np.asarray(y_pred, dtype=np.int64)
    labels = np.union1d(np.unique(y_true), np.unique(y_pred))
    precision, recall, f1 = [], [], []
    for label in labels:
        tp = float(np.sum((y_pred == label) & (y_true == label)))
        predicted = float(np.sum(y_pred == label))
        actual = float(np.sum(y_true == label))
        p = tp / predicted if predicted else 0.0
        r = tp / actual if actual else 0.0
        precision.append(p)
        recall.append(r)
        f1.append(2 * p * r / (p + r) if (p + r) else 0.0)
    return {"accuracy": float(np.mean(y_true == y_pred)), "precision": float(np.mean(precision)),
            "recall": float(np.mean(recall)), "f1": float(np.mean(f1))}


def confusion_counts(y_true, y_pred):
    """The labels seen and the confusion matrix (rows: true label, columns: predicted), as ints."""
    y_true = np.asarray(y_true, dtype=np.int64)
    y_pred = np.asarray(y_pred, dtype=np.int64)
    labels = np.union1d(np.unique(y_true), np.unique(y_pred))
    index = {int(label): i for i, label in enumerate(labels)}
    matrix = np.zeros((len(labels), len(labels)), dtype=np.int64)
    for t, p in zip(y_true.tolist(), y_pred.tolist()):
        matrix[index[t], index[p]] += 1
    return {"labels": [int(v) for v in labels], "matrix": matrix.tolist()}
