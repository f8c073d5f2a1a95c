"""How a step runs under Snakemake: its log file gets everything the step says."""
import logging

from ..redact import RedactingFilter

log = logging.getLogger("bugimpact")


def run_script(snakemake, func, **kwargs):
    """Run a step under Snakemake with its log file receiving everything the step says."""
    handler = logging.FileHandler(snakemake.log[0]) if snakemake.log else logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    handler.addFilter(RedactingFilter())  # no token reaches a log file, whoever logged it
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.INFO)
    try:
        func(**kwargs)
    except Exception:
        log.exception("step failed")
        raise
