"""Named, documented perturbations for positive controls, applied when the harness starts.

A control's arm is the same artifact plus one of these, so a study can show it detects a known
effect. Each is small and targeted; their strengths differ on purpose:

- ``relu_leak``: every ReLU becomes LeakyReLU with slope 1e-3.
- ``momentum_ignored``: the optimizer runs with momentum 0 whatever is configured (strong).
- ``dropout_shift``: every dropout probability is raised by 0.1.
- ``grad_scale``: every gradient is multiplied by 0.99 before the step (subtle).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from .registry import FAULTS
RELU_LEAK = 1e-3
DROPOUT_SHIFT = 0.1
GRAD_SCALE = 0.99


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
