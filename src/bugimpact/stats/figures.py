"""Figures: per-bug metric distributions, buggy against corrected (the paper's Fig. 2), and the
distribution of per-experiment standard deviations (Fig. 3)."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ..io import atomic_open  # noqa: E402

COLORS = {"buggy": "#c0392b", "corrected": "#2471a3"}


def _save(fig, path):
    with atomic_open(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)


def bug_figure(bug, verdict, values, path):
    metrics = list(values)
    # constrained layout keeps the figure's title clear of the subplots' titles
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.2 * len(metrics), 3.6), squeeze=False,
                             constrained_layout=True)
    rng = np.random.RandomState(0)
    for ax, metric in zip(axes[0], metrics):
        data = [values[metric][arm] for arm in ("buggy", "corrected")]
        if all(len(d) for d in data):
            ax.boxplot(data, widths=0.5, showfliers=False)
        for pos, (arm, d) in enumerate(zip(("buggy", "corrected"), data), start=1):
            ax.scatter(pos + rng.uniform(-0.12, 0.12, len(d)), d, s=12, alpha=0.7,
                       color=COLORS[arm], label=arm)
        ax.set_xticks([1, 2])
        ax.set_xticklabels(["buggy", "corrected"])
        ax.set_title(metric)
    fig.suptitle(f"{bug}: {verdict}")
    _save(fig, path)


def std_figure(std_by_metric, path):
    fig, ax = plt.subplots(figsize=(6, 3.6), constrained_layout=True)
    metrics = sorted(std_by_metric)
    data = [np.asarray(std_by_metric[m]) * 100 for m in metrics]
    if any(len(d) for d in data):
        ax.boxplot([d if len(d) else [np.nan] for d in data], showfliers=True)
        ax.set_xticks(range(1, len(metrics) + 1))
        ax.set_xticklabels(metrics)
    ax.set_ylabel("std across runs (percentage points)")
    ax.set_title("Per-experiment standard deviation (each point: one bug x arm)")
    _save(fig, path)
