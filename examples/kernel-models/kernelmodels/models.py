"""MaxoutCNN: maxout units, the elementwise maximum of two convolutions (``torch.max(a, b)``,
whose CPU kernel pr32541 changed for NaN inputs). SpatialTransformerCNN: a learnt affine warp of
its input (``affine_grid``, ``grid_sample`` with border padding, whose gradients at the image
borders pr32829 changed), before a small CNN. Both take ``(in_channels, num_classes, size)`` and
return log-probabilities."""
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
