"""PeriodicCNN: circular padding with a wider kernel than it is tall.

The padding is (1, 2): one row above and below, two columns left and right. torch 1.5.0 applied
non-zero padding modes across the wrong dimensions (PyTorch issue #37844, fixed in 1.5.1 by #37881),
so there this model pads rows by 2 and columns by 1, and sees 10x6 maps instead of 8x8.
"""
import torch
import torch.nn as nn


class PeriodicCNN(nn.Module):
    def __init__(self, in_channels=1, num_classes=10, size=8):
        super(PeriodicCNN, self).__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 16, (3, 5), padding=(1, 2), padding_mode="circular"), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2),
        )
        with torch.no_grad():  # the flattened size as this torch computes it
            flat = self.features(torch.zeros(1, in_channels, size, size)).numel()
        self.classifier = nn.Sequential(
            nn.Linear(flat, 64), nn.ReLU(), nn.Dropout(0.25),
            nn.Linear(64, num_classes), nn.LogSoftmax(dim=1),
        )

    def forward(self, x):
        x = self.features(x)
        return self.classifier(x.view(x.size(0), -1))
