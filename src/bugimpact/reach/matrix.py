"""Which fixes can touch which models, as tables: the reach matrix's rows (``COLUMNS``: one per
fix, workload and release), summed per workload, its fixes ordered so that those reached by the
most workloads come first, written as ``matrix.md`` and drawn as ``matrix.png``. The report shows
the same (``stats.report``); ``steps.matrix`` makes the traces it is judged on."""
from pathlib import Path

from ..io import read_csv, write_text

COLUMNS = ("fix", "workload", "release", "verdict", "why")
# the verdicts in the order a reader weighs them: what a workload can run first
ORDER = ("reached", "unknown", "not reached on cpu", "not reached")
SHORT = {"reached": "R", "unknown": "?", "not reached on cpu": "cpu", "not reached": "."}


class Matrix:
    def __init__(self, table, workloads=None, releases=None):
        """``table``: its rows; ``workloads`` and ``releases`` in the order to show them (default:
        as they first appear in the rows)."""
        self.cells = {(r["fix"], r["workload"], r["release"]): r["verdict"] for r in table}
        self.workloads = list(workloads or dict.fromkeys(r["workload"] for r in table))
        self.releases = list(releases or dict.fromkeys(r["release"] for r in table))
        self.columns = [(w, rel) for rel in self.releases for w in self.workloads]
        self.fixes = sorted({r["fix"] for r in table}, key=lambda f: (-self.reaching(f), f))

    @classmethod
    def read(cls, path):
        return cls(read_csv(path)[1])

    def reaching(self, fix):
        """How many (workload, release) cells ``fix`` is reached in."""
        return sum(self.cells.get((fix, w, rel)) == "reached" for w, rel in self.columns)

    def count_columns(self):
        return [f"{v} ({rel})" for rel in self.releases for v in ORDER]

    def counts(self):
        """Per workload, how many fixes have each verdict on each release (``count_columns``)."""
        return [(w, [sum(self.cells.get((f, w, rel)) == v for f in self.fixes) for rel in self.releases for v in ORDER])
                for w in self.workloads]

    def nowhere(self):
        """The fixes no workload reaches on any release, and none is unknown for."""
        return [f for f in self.fixes if not self.reaching(f) and not any(
            self.cells.get((f, w, rel)) == "unknown" for w, rel in self.columns)]

    def cell_columns(self):
        return [f"{w}@{rel}" for w, rel in self.columns]

    def fix_rows(self):
        """Per fix, most reached first: the cells it is reached in, and each cell's verdict, short."""
        return [(f, self.reaching(f), [SHORT.get(self.cells.get((f, w, rel), ""), "") for w, rel in self.columns])
                for f in self.fixes]

    def title(self):
        return (f"Which fixes can touch which models: {len(self.fixes)} fixes, {len(self.workloads)} workloads, "
                f"torch {', '.join(self.releases)}")

    def nowhere_line(self):
        nowhere = self.nowhere()
        return (f"Reached by no workload on any release, and unknown for none: {len(nowhere)} fixes"
                f"{': ' + ', '.join(nowhere) if nowhere else ''}.")

    def write_markdown(self, path, failed=None):
        """``matrix.md``: the counts per workload, the traces that failed, the fixes no workload
        reaches, then every fix, most reached first."""
        lines = [f"# {self.title()}", "", _row(["workload", *self.count_columns()]), "|---" * (1 + len(ORDER) * len(self.releases)) + "|"]
        lines += [_row([w, *map(str, counts)]) for w, counts in self.counts()]
        lines += [f"\nNo trace of {name}: {why}" for name, why in sorted((failed or {}).items())]
        lines += ["", self.nowhere_line(), "", _row(["fix", "workloads reaching it", *self.cell_columns()]),
                  "|---" * (2 + len(self.columns)) + "|"]
        lines += [_row([f, str(n), *cells]) for f, n, cells in self.fix_rows()]
        write_text(path, "\n".join(lines) + "\n")

    def draw(self, path):
        """``matrix.png``: fixes x (workload, release) cells, coloured by verdict (``ORDER``)."""
        # the figure alone needs matplotlib (imported where drawn: reach's judging needs none)
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # after use("Agg"): no display is asked for
        from matplotlib.colors import ListedColormap  # with pyplot, for the figure alone

        colours = ("#c0392b", "#95a5a6", "#5dade2", "#f4f6f7")  # ORDER's
        grid = [[ORDER.index(self.cells.get((f, w, rel), ORDER[-1])) for w, rel in self.columns] for f in self.fixes]
        fig, ax = plt.subplots(figsize=(max(7, 2 + 0.45 * len(self.columns)), 1.5 + 0.16 * len(self.fixes)))
        ax.imshow(grid, cmap=ListedColormap(colours), vmin=0, vmax=len(ORDER) - 1, aspect="auto",
                  interpolation="nearest")
        ax.set_xticks(range(len(self.columns)))
        ax.set_xticklabels(self.cell_columns(), rotation=90, fontsize=7)
        ax.set_yticks(range(len(self.fixes)))
        ax.set_yticklabels(self.fixes, fontsize=6)
        ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=c, label=v) for c, v in zip(colours, ORDER)],
                  loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7)
        ax.set_title("fixes x workloads: reach (fixes touching the most workloads first)", fontsize=9)
        fig.tight_layout()
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
        plt.close(fig)


def _row(cells):
    return "| " + " | ".join(cells) + " |"
