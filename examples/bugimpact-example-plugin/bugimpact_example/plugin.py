"""What this plugin adds to bugimpact (an artifact source, a runtime kind, a challenge, a metric), registered when bugimpact imports it (entry point group
``bugimpact.plugins``). Host side only: the runtime imports ``bugimpact_example.model`` alone."""
from bugimpact.artifacts import kinds, source_kinds
from bugimpact.artifacts.sources import installed_manifest
from fractions import Fraction

from bugimpact.challenges import Challenge, register_challenge
from bugimpact.datasets import load_digits
from bugimpact.stats.exact import register_metric


@source_kinds.register
class SiteTorch(source_kinds.Source):
    """The torch a site provides on the host (a cluster's module system): what the study's own
    interpreter imports, recorded like the installed one, under the site's name."""
    name, on_host = "site-torch", True

    def identity(self, arm, recipe_sha, target):
        return "site-torch"

    def make(self, sources, spec, folder, toolchain_json=None):
        return dict(installed_manifest(), source=self.name)


@kinds.register
class Niced(kinds.Local):
    """The host's interpreter, with the runs at a lower CPU priority (a shared workstation)."""
    name = "niced"

    def command(self, runtime, out, env, data):
        command, env = super().command(runtime, out, env, data)
        return ["nice", "-n", "5", *command], env


def _digits_600(files):
    """The first 600 of scikit-learn's digits: a challenge small enough for a smoke study."""
    arrays = load_digits()
    return {name: values[:600] for name, values in arrays.items()}, "sklearn digits, first 600"


register_challenge("digits-600", Challenge(_digits_600, official_split=False, shape=(1, 8, 8), top=16,
                                           sizes=(450, 150)))


def _kappa(matrix):
    """Cohen's kappa: agreement with the true labels beyond what the marginals give by chance,
    exact from the confusion matrix."""
    total = sum(map(sum, matrix))
    observed = Fraction(sum(matrix[c][c] for c in range(len(matrix))), total)
    chance = Fraction(sum(sum(matrix[c]) * sum(row[c] for row in matrix) for c in range(len(matrix))),
                      total * total)
    return (observed - chance) / (1 - chance) if chance != 1 else Fraction(0)


register_metric("kappa", _kappa)
