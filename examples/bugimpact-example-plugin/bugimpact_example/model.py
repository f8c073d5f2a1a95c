"""A model for ``train.model: bugimpact_example.model:TinyNet``: built inside the runtime, so it
imports torch alone (Python 3.6+, torch 1.1+)."""
import torch.nn as nn


class TinyNet(nn.Module):
    """One convolution and a linear layer, ending in LogSoftmax as the harness's models do."""

    def __init__(self, in_channels=1, num_classes=10, size=8):
        super(TinyNet, self).__init__()
        self.features = nn.Sequential(nn.Conv2d(in_channels, 8, 3, padding=1), nn.ReLU())
        self.classifier = nn.Sequential(nn.Flatten() if hasattr(nn, "Flatten") else _Flatten(),
                                        nn.Linear(8 * size * size, num_classes), nn.LogSoftmax(dim=1))

    def forward(self, x):
        return self.classifier(self.features(x))


class _Flatten(nn.Module):  # nn.Flatten is torch 1.2+
    def forward(self, x):
        return x.view(x.size(0), -1)
