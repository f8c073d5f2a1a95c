"""Each pipeline step as one function over explicit files and settings: called with a rule's
params by its shim in ``scripts/`` (a Snakemake ``script:``; the train rules' a command, the one
job that runs thousands of times), and by the tests. One module per step family; every step is
also a name of this package (``steps.train_run``). A train job imports this package, so a step
module imports numpy, scipy, matplotlib, the Docker SDK or jsonschema only in the step that uses
them."""
from ..artifacts.runtimes import made_with  # noqa: F401
from ..artifacts.sources import artifact_sources  # noqa: F401
from .builds import arms, artifact, build_status, build_summary, docker_build, toolchain  # noqa: F401
from .checks import failures_at_end, preflight, unmade_targets  # noqa: F401
from .notes import funnel, merge_sheet, mine, resolve, resolvers_from_config  # noqa: F401
from .override import check as override_check  # noqa: F401
from .runtime import RUNTIME_SETTINGS, runtime  # noqa: F401
from .script import run_script  # noqa: F401
from .statistics import (  # noqa: F401
    bug_done,
    bug_figure,
    bug_stats,
    report,
    sequential_options,
    stage,
    std_figure,
    study_design,
    study_setup,
    study_stats,
)
from .traces import trace  # noqa: F401
from .training import early, experiment, prepare_data, seeds, train_run  # noqa: F401
