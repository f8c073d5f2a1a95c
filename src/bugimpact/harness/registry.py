"""The names the harness knows, without importing torch, so the host can check a config against
them before any run starts (the harness modules use the same names)."""
import hashlib
import json

from .metrics import METRICS as _METRIC_DEFINITIONS

MODELS = ("vggx", "alexnet", "smallcnn", "lstm", "transformer", "prototypes")
ARMS = ("buggy", "corrected")  # every bug's two arms, in this order
RECORD_SCHEMA = 1  # bump when a run record's fields change meaning
FAULTS = ("relu_leak", "momentum_ignored", "dropout_shift", "grad_scale", "label_noise")
# the metrics every run record holds (metrics.py), and stats.metrics' default; the statistics
# compute these and any a plugin adds exactly from the counts (stats.exact.METRICS)
METRICS = tuple(_METRIC_DEFINITIONS)


TORCHVISION = "torchvision."  # train.model: torchvision.resnet18, a model torchvision builds


def model_protocol(name):
    """How a model named ``name`` is built, and who says what its code is (``models``, host side):
    ``builtin`` (this harness's), ``torchvision`` (``torchvision.<function>``: the runtime's
    torchvision builds it, no pretrained weights) or ``dotted`` (``module:Class``, importable
    inside the runtime); None when the name is none of these."""
    name = str(name)
    if name in MODELS:
        return "builtin"
    if name.startswith(TORCHVISION):
        return "torchvision" if name[len(TORCHVISION):].isidentifier() else None
    module, _, attr = name.replace(":", ".").rpartition(".")
    if module and attr and all(part.isidentifier() for part in module.split(".") + [attr]):
        return "dotted"
    return None


def model_error(name):
    """Why a model name cannot be built, or None."""
    if model_protocol(name):
        return None
    return ("unknown model %r: use one of %s, torchvision.<model> (torchvision.resnet18), or a "
            "dotted path module:Class to your own" % (name, ", ".join(MODELS)))


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
