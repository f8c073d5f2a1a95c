"""What this plugin adds to bugimpact, registered when bugimpact imports it (entry point group
``bugimpact.plugins``): an artifact source and a runtime kind, each with its own settings (its
schema, under ``artifacts.site-torch`` and ``runtime.niced``), a challenge with its own raw file
(``data.digits-subset``), and a metric. Host side only: the runtime imports
``bugimpact_example.model`` alone."""
from fractions import Fraction

from bugimpact.artifacts import kinds, source_kinds
from bugimpact.artifacts.sources import installed_manifest
from bugimpact.challenges import Challenge, register_challenge
from bugimpact.datasets import load_digits
from bugimpact.stats.exact import register_metric


@source_kinds.register
class SiteTorch(source_kinds.Source):
    """The torch a site provides on the host (a cluster's module system): what the study's own
    interpreter imports, recorded like the installed one, under the site's name and module."""
    name, on_host = "site-torch", True
    settings_schema = {
        "type": "object", "additionalProperties": False, "default": {},
        "description": "source site-torch: the site's own torch",
        "properties": {"module": {"type": "string", "default": "",
                                  "description": "the site's module that provides it (recorded)"}}}

    def identity(self, arm, recipe_sha, target):
        return "site-torch"

    def make(self, sources, spec, folder, toolchain_json=None):
        return dict(installed_manifest(), source=self.name, site_module=spec["settings"]["module"])


@kinds.register
class Niced(kinds.Local):
    """The host's interpreter, its harness processes (runs, and the fork server runs fork from) at
    a lower CPU priority: a shared workstation."""
    name = "niced"
    settings_schema = {
        "type": "object", "additionalProperties": False, "default": {},
        "description": "runtime kind niced: how far to lower the runs' priority",
        "properties": {"priority": {"type": "integer", "minimum": 0, "maximum": 19, "default": 5,
                                    "description": "nice's adjustment (0-19)"}}}

    def process(self, runtime, arguments, env):
        command, env = super().process(runtime, arguments, env)
        priority = (runtime.get("settings") or {}).get("priority", 5)
        return ["nice", "-n", str(priority), *command], env


def _digits_subset(raw):
    """scikit-learn's digits, those whose indices the raw file lists (one per line)."""
    with open(raw) as handle:
        indices = [int(line) for line in handle if line.strip()]
    arrays = load_digits()
    return {name: values[indices] for name, values in arrays.items()}, f"sklearn digits, {raw}"


def _check_subset(raw):
    """What is wrong with the raw file: lines that are no index of digits' 1797 images, or too
    few images to split."""
    lines = [line.strip() for line in raw.read_text().splitlines() if line.strip()]
    bad = [line for line in lines if not line.isdigit() or int(line) >= 1797]
    if bad:
        return [(f"{raw}: {len(bad)} line(s) are not an index of digits' 1797 images "
                 f"(first: {bad[0]!r})", "one index 0-1796 per line")]
    if len(lines) < 40:
        return [(f"{raw}: {len(lines)} images, fewer than 40", "list at least 40")]
    return []


register_challenge("digits-subset", Challenge(
    _digits_subset, official_split=False, shape=(1, 8, 8), top=16, sizes=(450, 150),
    raw="data/raw/digits-subset.txt", check=_check_subset,
    about="image indices into scikit-learn's digits, one per line"))


def _kappa(matrix):
    """Cohen's kappa: agreement with the true labels beyond what the marginals give by chance,
    exact from the confusion matrix."""
    total = sum(map(sum, matrix))
    observed = Fraction(sum(matrix[c][c] for c in range(len(matrix))), total)
    chance = Fraction(sum(sum(matrix[c]) * sum(row[c] for row in matrix) for c in range(len(matrix))),
                      total * total)
    return (observed - chance) / (1 - chance) if chance != 1 else Fraction(0)


register_metric("kappa", _kappa)
