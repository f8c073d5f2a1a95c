"""Where the shared results live: one path pattern per identity, its fields the rules' wildcards.

A rule's output is its pattern, read from here; the objects of ``identities`` (a bug, an
artifact) fill the patterns in, so the plan, the CLI and the checks never spell a path again. A
study's own outputs (tables, figures, the report) live under ``results/<study>/`` (``Plan.study``, ``identities.Study``).
docs/outputs.md says what each file holds.
"""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout: its schemas, data, envs and report
DATA = "results/data/{challenge}.npz"  # a prepared challenge
DATA_META = "results/data/{challenge}.json"  # its checksum and shapes
EXPERIMENT = "results/experiments/{key}.json"  # what every run of the key computes with
SEEDS = "results/seeds/{bug}/{key}.json"
TOOLCHAIN = "results/toolchains/{toolchain}.json"  # the docker toolchain image's record
ARTIFACTS = "results/artifacts"
ARTIFACT = ARTIFACTS + "/{artifact}/manifest.json"
RUNTIMES = "results/runtimes"
RUNTIME = RUNTIMES + "/{runtime}/{artifact}/runtime.json"
TRACE = "results/reach/traces/{key}/{artifact}.json"
CHECKS = "results/checks"
CHECK = CHECKS + "/{key}/{artifact}.json"  # a compiled fix's override, checked on the workload
# a release's source reconstructed from a history without its tag: its branch point, once per wheel
RECONSTRUCTION = "results/release-sources/torch-{version}-{wheel}.json"
# ATen's headers as a tree's own generator writes them, by commit and the cherry-picks placed on it
GENERATED = "results/release-sources/generated/{tree}"
REACH = "results/reach/{bug}/{key}.json"  # a fix's reach verdict
REACH_TABLES = "results/reach/tables"  # the operator tables read from sources, cached
ARMS_GATES = "results/arms"
ARMS_GATE = ARMS_GATES + "/{bug}/{key}.json"
RUNS = "results/runs"
BUG_RUNS = RUNS + "/{bug}/{key}"  # a bug's records under one experiment, every arm
RUN = BUG_RUNS + "/{arm}/{run}.json"  # one sealed record per run
REPEATS = "results/repeats"
BUG_REPEATS = REPEATS + "/{bug}/{key}"
REPEAT = BUG_REPEATS + "/{arm}/{run}.json"  # the early decision's measured repeat
EARLY = "results/early/{bug}/{key}.json"
STAGE = "results/stages/{bug}/{key}/{pairs}.json"  # a group-sequential look
STUDY = "results/{study}"  # a study's own tables, figures and report
# a bug's statistics in a study, under the experiment its runs compute with: a changed experiment
# is a missing file, which Snakemake remakes, never a made one whose inputs it stops looking for
BUG_STATS = STUDY + "/stats/{bug}/{key}.json"
BUG_TABLE = STUDY + "/stats/{bug}/{key}.csv"
PREFLIGHT = STUDY + "/preflight.txt"
MINED_BUGS = STUDY + "/mined/bugs.csv"
MINED_RELEASES = STUDY + "/mined/releases.csv"
RESOLVED = STUDY + "/resolved/commits.csv"
SHEET_MERGE = STUDY + "/filter/{framework}.merge.json"  # what the last merge into the sheet did
FUNNEL = STUDY + "/filter/funnel.csv"
BUILD_STATUS = STUDY + "/builds/{bug}/{arm}.status"
BUILDS_SUMMARY = STUDY + "/builds/summary.csv"
PVALUES = STUDY + "/stats/pvalues.csv"  # the paper's Table IV
VERDICTS = STUDY + "/stats/verdicts.csv"
OVERRIDE_CHECKS = STUDY + "/stats/override_checks.csv"  # each compiled fix's arm, as its check found it
STATS_SUMMARY = STUDY + "/stats/summary.csv"
BUG_FIGURE = STUDY + "/figures/{bug}.png"
STD_FIGURE = STUDY + "/figures/std.png"
BUG_LINE = STUDY + "/bugs/{bug}.txt"  # a bug's verdict in one line
REPORT = STUDY + "/report.html"
# which fixes can touch which models (config workloads x reach.releases): its table, text, figure
REACH_MATRIX = STUDY + "/reach/matrix.csv"
REACH_MATRIX_TEXT = STUDY + "/reach/matrix.md"
REACH_MATRIX_FIGURE = STUDY + "/reach/matrix.png"
