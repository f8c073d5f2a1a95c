"""The names the harness knows, without importing torch, so the host can check a config against
them before any run starts (the harness modules use the same names)."""
import hashlib
import json

from .metrics import METRICS as _METRIC_DEFINITIONS

MODELS = ("vggx", "alexnet", "smallcnn")
ARMS = ("buggy", "corrected")  # every bug's two arms, in this order
RECORD_SCHEMA = 1  # bump when a run record's fields change meaning
FAULTS = ("relu_leak", "momentum_ignored", "dropout_shift", "grad_scale", "label_noise")
# the metrics every run record holds (metrics.py), and stats.metrics' default; the statistics
# compute these and any a plugin adds exactly from the counts (stats.exact.METRICS)
METRICS = tuple(_METRIC_DEFINITIONS)


def model_error(name):
    """Why a model name cannot be built, or None: a built-in name, or a dotted path
    ``module:Class`` (or ``module.Class``) to a model importable inside the runtime."""
    if name in MODELS:
        return None
    module, _, attr = str(name).replace(":", ".").rpartition(".")
    if module and attr and all(part.isidentifier() for part in module.split(".") + [attr]):
        return None
    return "unknown model %r: use one of %s, or a dotted path module:Class to your own" % (
        name, ", ".join(MODELS))


def record_digest(record):
    """The digest a record is sealed with: sha256 of its canonical JSON, the digest left out. A
    value edited by hand no longer matches (JSON floats read back to the same text)."""
    body = dict((k, v) for k, v in record.items() if k != "digest")
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sealed(record):
    record = dict(record)
    record["digest"] = record_digest(record)
    return record
