# bugimpact: does a bug fixed in an ML framework change the models trained with it?
#
# Paths (see docs/outputs.md, "Where results go"):
#   results/<study>/mined/, resolved/           steps 1-2: mined release-note entries, commits per PR
#   data/filter/<framework>.csv                 step 3: the sheet a person edits (merged, never replaced)
#   results/artifacts/<artifact>/manifest.json  step 4: framework builds, keyed by commit or version
#   results/experiments/<key>.json              step 5: the experiment every run of <key> reads
#   results/runs/<bug>/<key>/<arm>/<run>.json   step 5: one record per run, keyed by the experiment
#   results/<study>/stats/, figures/, bugs/, report.html   step 6 (each study its own)
import sys
from pathlib import Path

from snakemake.utils import min_version

min_version("8.0")


# One config file is one whole study: config.yaml (the default study) unless --configfile names
# another; --config key=value overrides either.
# Snakemake's own message for a YAML error names no file or line: check it first. (A file given
# with --configfile is read by Snakemake before this runs: `bugimpact validate-config FILE`.)
sys.path.insert(0, str(Path(workflow.basedir) / "src"))
from bugimpact.config import read_yaml

if not workflow.overwrite_configfiles:
    read_yaml(Path(workflow.basedir) / "config.yaml")

    configfile: "config.yaml"


report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/mine.smk"
include: "rules/resolve.smk"
include: "rules/sheet.smk"
include: "rules/data.smk"
include: "rules/reach.smk"
include: "rules/artifacts.smk"
include: "rules/train.smk"
include: "rules/stats.smk"


rule all:
    default_target: True
    input:
        PLAN.targets(),


# Runs on this machine (not a dry run, not a cluster's nodes): a CUDA study without a GPU is
# refused before any job, not by every run failing.
onstart:
    if config["train"]["device"] == "cuda" and workflow.local_exec:
        from bugimpact.preflight import require_gpu

        require_gpu()


# Failures are results, written into the tables: say at the end which there were, then where
# each bug stands and where the report is (``where_the_study_stands``, rules/common.smk). A run
# Snakemake calls done is checked against its targets: it can drop jobs after a checkpoint.
onsuccess:
    where_the_study_stands()
    end_if_targets_unmade()


onerror:
    where_the_study_stands()
