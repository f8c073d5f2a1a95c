"""How a step runs under Snakemake: its log file gets everything the step says, and it ends with
the Snakemake that started it (``lifetime``)."""
import logging

from ..lifetime import end_with_workflow
from ..redact import RedactingFilter

log = logging.getLogger("bugimpact")


def run_script(snakemake, func, **kwargs):
    """Run a step under Snakemake's ``script:`` with its log file receiving everything it says."""
    return run_logged_step(snakemake.log[0] if snakemake.log else None, func, **kwargs)


def run_logged_step(step_log, func, **kwargs):
    """Run a step with ``step_log`` (None: standard error) receiving everything it says."""
    handler = logging.FileHandler(step_log) if step_log else logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    handler.addFilter(RedactingFilter())  # no token reaches a log file, whoever logged it
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.INFO)
    end_with_workflow()
    try:
        return func(**kwargs)
    except Exception:
        log.exception("step failed")
        raise
