"""MaxoutCNN: maxout units, the elementwise maximum of two convolutions (``torch.max(a, b)``,
whose CPU kernel pr32541 changed for NaN inputs). SpatialTransformerCNN: a learnt affine warp of
its input (``affine_grid``, ``grid_sample`` with border padding, whose gradients at the image
borders pr32829 changed), before a small CNN. SegmentPoolCNN: convolution features summed over
the image's four quadrants by ``scatter_add_``, as graph networks sum node features per graph
(the kernel whose dispatch entry pr38262 changed); its gradient is a ``gather``. GeMCNN:
generalized-mean pooling with a learned power per channel, ``mean(x ** p) ** (1 / p)``, over ReLU
features, as first proposed (no floor under ``x``, one under the mean): zeros raised to a learned tensor power, whose
exponent gradient pr32062 fixed (``0 * log(0)``, NaN before it). All take ``(in_channels,
num_classes, size)`` and return log-probabilities."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MaxoutCNN(nn.Module):
    def __init__(self, in_channels=1, num_classes=10, size=8):
        super(MaxoutCNN, self).__init__()
        self.a = nn.Conv2d(in_channels, 16, 3, padding=1)
        self.b = nn.Conv2d(in_channels, 16, 3, padding=1)
        self.c = nn.Conv2d(16, 32, 3, padding=1)
        self.d = nn.Conv2d(16, 32, 3, padding=1)
        self.classifier = nn.Sequential(nn.Linear(32 * (size // 2) ** 2, num_classes), nn.LogSoftmax(dim=1))

    def forward(self, x):
        x = torch.max(self.a(x), self.b(x))
        x = F.max_pool2d(torch.max(self.c(x), self.d(x)), 2)
        return self.classifier(x.view(x.size(0), -1))


class SpatialTransformerCNN(nn.Module):
    def __init__(self, in_channels=1, num_classes=10, size=8):
        super(SpatialTransformerCNN, self).__init__()
        self.locate = nn.Sequential(nn.Linear(in_channels * size * size, 16), nn.Tanh(), nn.Linear(16, 6))
        with torch.no_grad():  # starts as the identity warp
            self.locate[2].weight.zero_()
            self.locate[2].bias.copy_(torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 0.0]))
        self.features = nn.Sequential(nn.Conv2d(in_channels, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Sequential(nn.Linear(16 * (size // 2) ** 2, num_classes), nn.LogSoftmax(dim=1))

    def forward(self, x):
        theta = self.locate(x.view(x.size(0), -1)).view(-1, 2, 3)
        grid = _affine_grid(theta, x.size())
        x = _grid_sample(x, grid)
        x = self.features(x)
        return self.classifier(x.view(x.size(0), -1))


class SegmentPoolCNN(nn.Module):
    def __init__(self, in_channels=1, num_classes=10, size=8):
        super(SegmentPoolCNN, self).__init__()
        self.features = nn.Sequential(nn.Conv2d(in_channels, 16, 3, padding=1), nn.ReLU(),
                                      nn.Conv2d(16, 32, 3, padding=1), nn.ReLU())
        rows = torch.arange(size).view(size, 1).expand(size, size)
        cols = torch.arange(size).view(1, size).expand(size, size)
        # each pixel's quadrant, 0 to 3
        self.register_buffer("segment", ((rows >= size // 2).long() * 2 + (cols >= size // 2).long()).view(-1))
        self.classifier = nn.Sequential(nn.Linear(32 * 4, num_classes), nn.LogSoftmax(dim=1))

    def forward(self, x):
        x = self.features(x)
        x = x.view(x.size(0), x.size(1), -1)
        index = self.segment.view(1, 1, -1).expand_as(x)
        pooled = torch.zeros(x.size(0), x.size(1), 4, dtype=x.dtype).scatter_add_(2, index, x)
        return self.classifier(pooled.view(x.size(0), -1))


class GeMCNN(nn.Module):
    def __init__(self, in_channels=1, num_classes=10, size=8):
        super(GeMCNN, self).__init__()
        self.features = nn.Sequential(nn.Conv2d(in_channels, 16, 3, padding=1), nn.ReLU(),
                                      nn.Conv2d(16, 32, 3, padding=1), nn.ReLU())
        self.power = nn.Parameter(torch.full((1, 32, 1), 3.0))
        self.classifier = nn.Sequential(nn.Linear(32, num_classes), nn.LogSoftmax(dim=1))

    def forward(self, x):
        x = self.features(x)
        x = x.view(x.size(0), x.size(1), -1)
        # the floor under the mean keeps the root's own gradient finite where a channel is all zeros
        pooled = (x.pow(self.power.expand_as(x)).mean(2) + 1e-6).pow(1.0 / self.power.view(1, -1))
        return self.classifier(pooled)


def _affine_grid(theta, size):
    try:  # align_corners is torch 1.3+
        return F.affine_grid(theta, size, align_corners=True)
    except TypeError:
        return F.affine_grid(theta, size)


def _grid_sample(x, grid):
    try:
        return F.grid_sample(x, grid, padding_mode="border", align_corners=True)
    except TypeError:
        return F.grid_sample(x, grid, padding_mode="border")
