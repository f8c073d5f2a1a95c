"""Named, documented perturbations for positive controls, applied when the harness starts.

A control's arm is the same artifact plus one of these, so a study can show it detects a known
effect. Each is small and targeted; their strengths differ on purpose:

- ``relu_leak``: every ReLU becomes LeakyReLU with slope 1e-3.
- ``momentum_ignored``: the optimizer runs with momentum 0 whatever is configured (strong).
- ``dropout_shift``: every dropout probability is raised by 0.1.
- ``grad_scale``: every gradient is multiplied by 0.99 before the step (too small to matter once
  training converges: no measurable effect).
- ``label_noise``: 3% of the training labels (a fixed subset, the same in every run) are replaced
  by another class, as a data-pipeline bug would (subtle: about -0.5 accuracy points on the default
  study's digits, measured; see the README).
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .registry import FAULTS

RELU_LEAK = 1e-3
DROPOUT_SHIFT = 0.1
GRAD_SCALE = 0.99
LABEL_NOISE = 0.03
LABEL_NOISE_SEED = 12345  # the subset is a property of the fault, not of the run


def patch_framework(name):
    """Faults that alter framework code must be in place before the model is built."""
    if name == "relu_leak":
        def leaky_forward(self, x):
            return F.leaky_relu(x, RELU_LEAK, self.inplace)
        nn.ReLU.forward = leaky_forward
        def leaky_relu(x, inplace=False):
            return F.leaky_relu(x, RELU_LEAK, inplace)
        F.relu = leaky_relu
        torch.relu = leaky_relu


def adjust_model(name, model):
    if name == "dropout_shift":
        for module in model.modules():
            if isinstance(module, nn.Dropout):
                module.p = min(1.0, module.p + DROPOUT_SHIFT)


def adjust_labels(name, labels, num_classes):
    if name == "label_noise":
        rng = np.random.RandomState(LABEL_NOISE_SEED)
        wrong = rng.permutation(len(labels))[:int(round(LABEL_NOISE * len(labels)))]
        out = labels.copy()
        out[wrong] = (out[wrong] + 1 + rng.randint(0, num_classes - 1, size=len(wrong))) % num_classes
        return out
    return labels


def adjust_momentum(name, momentum):
    return 0.0 if name == "momentum_ignored" else momentum


def adjust_gradients(name, model):
    if name == "grad_scale":
        for param in model.parameters():
            if param.grad is not None:
                param.grad.mul_(GRAD_SCALE)


def check(name):
    if name and name not in FAULTS:
        raise ValueError("unknown fault %r; known: %s" % (name, ", ".join(FAULTS)))
