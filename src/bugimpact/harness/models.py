"""Models: the paper's VGG-X, AlexNet adapted to 32x32, a small CNN for small inputs, and an LSTM and
a Transformer encoder that read an image's rows as a sequence.

Every model ends in LogSoftmax (trained with NLL loss, as in the paper). A user model is given as a
dotted path ``package.module:Class`` (or ``package.module.Class``) whose constructor takes
``in_channels, num_classes, size`` and the study's ``train.model_options``; a torchvision model as
``torchvision.<name>`` (``Torchvision``).
"""
import importlib

import torch
import torch.nn as nn

from .registry import TORCHVISION, model_error, model_protocol


def _flat_size(features, in_channels, size):
    with torch.no_grad():  # a shape probe: consumes no random numbers
        return int(features(torch.zeros(1, in_channels, size, size)).numel())


def pooling_matrix(size, out):
    """(out x size) matrix whose row i averages the window AdaptiveAvgPool uses for output i:
    [floor(i * size / out), ceil((i + 1) * size / out))."""
    matrix = torch.zeros(out, size, dtype=torch.float64)  # cast to the input's type when used
    for i in range(out):
        start, stop = (i * size) // out, -((-(i + 1) * size) // out)
        matrix[i, start:stop] = 1.0 / (stop - start)
    return matrix


class MatrixAvgPool2d(nn.Module):
    """AdaptiveAvgPool2d as two constant matrix products, P_h x P_w^T.

    Where windows overlap (16 -> 5), AdaptiveAvgPool2d's CUDA backward accumulates with atomic
    adds, so it is not deterministic on any PyTorch version (and 1.8+ refuses it under
    deterministic algorithms); a matmul's backward is a GEMM, deterministic under the cuBLAS
    workspace setting. The matrices are not parameters or buffers, so the state_dict (and its
    fingerprint) is the same as the original's. Uses only what torch 1.1 has (broadcasting matmul)."""

    def __init__(self, output_size):
        super(MatrixAvgPool2d, self).__init__()
        self.output_size = output_size
        self._matrices = {}

    def forward(self, x):
        h, w = x.shape[-2], x.shape[-1]
        key = (h, w, x.device, x.dtype)
        if key not in self._matrices:
            self._matrices[key] = (pooling_matrix(h, self.output_size[0]).to(x.device, x.dtype),
                                   pooling_matrix(w, self.output_size[1]).t().to(x.device, x.dtype))
        rows, cols = self._matrices[key]
        return torch.matmul(torch.matmul(rows, x), cols)


class VGGX(nn.Module):
    """VGG-11 adapted to 32x32 inputs, no batch norm, ~15M parameters (ReproduceML's VGG-X):
    conv 64, conv 256, maxpool, conv 512 (3x3, ReLU), average pool to 5x5, then
    12800-1024-1024-classes with ReLU and dropout 0.5 after each hidden layer.

    ``pooling="deterministic"`` (the default) pools with ``MatrixAvgPool2d``; ``"adaptive"`` keeps
    the paper's ``nn.AdaptiveAvgPool2d``, whose CUDA backward is not deterministic."""

    def __init__(self, in_channels=3, num_classes=10, size=32, pooling="deterministic"):
        super(VGGX, self).__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 64, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(64, 256, 3, padding=1), nn.ReLU(inplace=True),
            nn.MaxPool2d(2, 2),
            nn.Conv2d(256, 512, 3, padding=1), nn.ReLU(inplace=True),
        )
        if pooling not in ("deterministic", "adaptive"):
            raise ValueError("pooling %r: use deterministic or adaptive" % (pooling,))
        self.avgpool = (MatrixAvgPool2d((5, 5)) if pooling == "deterministic"
                        else nn.AdaptiveAvgPool2d((5, 5)))
        self.classifier = nn.Sequential(
            nn.Linear(512 * 5 * 5, 1024), nn.ReLU(inplace=True), nn.Dropout(0.5),
            nn.Linear(1024, 1024), nn.ReLU(inplace=True), nn.Dropout(0.5),
            nn.Linear(1024, num_classes), nn.LogSoftmax(dim=1),
        )

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(x.view(x.size(0), -1))


class AlexNet32(nn.Module):
    """AlexNet's layer plan (5 convolutions, 3 fully connected) resized for 32x32 inputs."""

    def __init__(self, in_channels=3, num_classes=10, size=32):
        super(AlexNet32, self).__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 64, 3, stride=2, padding=1), nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(64, 192, 3, padding=1), nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
        )
        flat = _flat_size(self.features, in_channels, size)
        self.classifier = nn.Sequential(
            nn.Dropout(0.5), nn.Linear(flat, 1024), nn.ReLU(inplace=True),
            nn.Dropout(0.5), nn.Linear(1024, 1024), nn.ReLU(inplace=True),
            nn.Linear(1024, num_classes), nn.LogSoftmax(dim=1),
        )

    def forward(self, x):
        x = self.features(x)
        return self.classifier(x.view(x.size(0), -1))


class SmallCNN(nn.Module):
    """Two convolutions and two dense layers: seconds per run on 8x8 digits on one CPU thread."""

    def __init__(self, in_channels=1, num_classes=10, size=8):
        super(SmallCNN, self).__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 16, 3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2),
        )
        flat = _flat_size(self.features, in_channels, size)
        self.classifier = nn.Sequential(
            nn.Linear(flat, 64), nn.ReLU(), nn.Dropout(0.25),
            nn.Linear(64, num_classes), nn.LogSoftmax(dim=1),
        )

    def forward(self, x):
        x = self.features(x)
        return self.classifier(x.view(x.size(0), -1))


class Prototypes(nn.Module):
    """A nearest-prototype classifier: SmallCNN's convolutions embed an image, and its class scores
    are the negative distances to one learned prototype per class (``torch.cdist``, torch 1.1+),
    so that training runs cdist forwards and its backward node, as metric-learning models do."""

    def __init__(self, in_channels=1, num_classes=10, size=8, dim=16):
        super(Prototypes, self).__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 16, 3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.embed = nn.Linear(_flat_size(self.features, in_channels, size), dim)
        self.prototypes = nn.Parameter(torch.randn(num_classes, dim))

    def forward(self, x):
        x = self.embed(self.features(x).view(x.size(0), -1))
        return nn.functional.log_softmax(-torch.cdist(x, self.prototypes), dim=1)


def _rows(x):
    """An image batch (batch, channels, rows, width) read as sequences of its rows: (rows, batch,
    channels * width), the sequence-first layout torch 1.x's recurrent and attention layers take."""
    return x.permute(2, 0, 1, 3).reshape(x.size(2), x.size(0), -1)


class RowLSTM(nn.Module):
    """An LSTM reading an image's rows in turn, classified from its last hidden state: a
    recurrent workload on the same data as the convolutional ones."""

    def __init__(self, in_channels=1, num_classes=10, size=8, hidden=64):
        super(RowLSTM, self).__init__()
        self.lstm = nn.LSTM(in_channels * size, hidden)
        self.classifier = nn.Sequential(nn.Linear(hidden, num_classes), nn.LogSoftmax(dim=1))

    def forward(self, x):
        _, (hidden, _) = self.lstm(_rows(x))
        return self.classifier(hidden[-1])


class RowTransformer(nn.Module):
    """A Transformer encoder over an image's rows as tokens (a learned position each), mean-pooled
    and classified. nn.TransformerEncoder is torch 1.2's: an older torch is refused by name."""

    def __init__(self, in_channels=1, num_classes=10, size=8, width=32, heads=4, layers=2):
        super(RowTransformer, self).__init__()
        if not hasattr(nn, "TransformerEncoder"):
            raise ValueError("the transformer model needs nn.TransformerEncoder (torch 1.2 or later); "
                             "this torch is %s" % torch.__version__)
        self.embed = nn.Linear(in_channels * size, width)
        self.position = nn.Parameter(torch.zeros(size, 1, width))
        layer = nn.TransformerEncoderLayer(width, heads, dim_feedforward=2 * width)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.classifier = nn.Sequential(nn.Linear(width, num_classes), nn.LogSoftmax(dim=1))

    def forward(self, x):
        tokens = self.encoder(self.embed(_rows(x)) + self.position)
        return self.classifier(tokens.mean(0))


BUILTIN = {"vggx": VGGX, "alexnet": AlexNet32, "smallcnn": SmallCNN, "lstm": RowLSTM,
           "transformer": RowTransformer, "prototypes": Prototypes}  # registry.MODELS


class Torchvision(nn.Module):
    """A torchvision model under this harness's contract: one-channel images repeated to the three
    channels torchvision's models take, and LogSoftmax on the logits (NLL loss, as every model
    here). Its state_dict is the torchvision model's, under ``net.``."""

    def __init__(self, net, in_channels):
        super(Torchvision, self).__init__()
        if in_channels not in (1, 3):
            raise ValueError("torchvision models take 3 channels (1 is repeated): not %d" % in_channels)
        self.net, self.repeat = net, 3 if in_channels == 1 else 1

    def forward(self, x):
        if self.repeat > 1:
            x = x.repeat(1, self.repeat, 1, 1)
        out = self.net(x)
        if isinstance(out, tuple):  # GoogLeNet and Inception v3 add auxiliary logits in training
            out = out[0]
        return torch.nn.functional.log_softmax(out, dim=1)


def build(name, in_channels, num_classes, size, pooling="deterministic", options=None):
    """The model ``name`` (``registry.model_protocol``), with ``options`` (train.model_options) as
    keyword arguments: ``num_classes`` comes from the data unless an option sets it."""
    error = model_error(name)
    if error:
        raise ValueError(error)
    options = dict(options or {})
    protocol = model_protocol(name)
    if protocol == "torchvision":
        # by name, as a user's model: the harness itself imports only numpy and torch, and a
        # study that trains no torchvision model needs none installed
        library = importlib.import_module("torchvision.models")
        options.setdefault("num_classes", num_classes)
        # no weights: nothing is downloaded at run time (pretrained defaults to False, and
        # weights, torchvision 0.13+, to None)
        return Torchvision(getattr(library, name[len(TORCHVISION):])(**options), in_channels)
    options.setdefault("num_classes", num_classes)
    if name == "vggx":
        return VGGX(in_channels=in_channels, size=size, pooling=pooling, **options)
    if protocol == "builtin":
        return BUILTIN[name](in_channels=in_channels, size=size, **options)
    module, _, attr = name.replace(":", ".").rpartition(".")
    cls = getattr(importlib.import_module(module), attr)
    return cls(in_channels=in_channels, size=size, **options)


def of_spec(spec, x_train, num_classes):
    """The model a run's ``spec`` trains, for its training images ``x_train`` (N x C x H x W)."""
    return build(spec["model"], x_train.shape[1], num_classes, x_train.shape[2],
                 spec.get("pooling") or "deterministic", spec.get("model_options"))
