"""A task's model as the training paths see it: the module used as a recipe, its state as flat vectors
(parameters, buffers), and the loss it trains on.

The module a user hands over can be any ``torch.nn.Module``. It is called with state that netfl owns
(``functional_call`` with a job's parameters and buffers), or copied into per-thread replicas
(:mod:`netfl.learn.replicas`); the module itself is never trained, so a task's initial model is whatever
the module held when it was built.

Outputs are class scores, one row per sample ``(B, C)`` against labels ``(B,)``, or one per token
``(B, T, C)`` against labels ``(B, T)`` (next-character prediction): the loss is the mean cross-entropy
over the labelled positions (a label of -100 counts nowhere).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call

from netfl.learn.params import BufferLayout, ParamLayout

__all__ = ["IGNORE_LABEL", "Network", "task_loss"]

#: A label no loss or accuracy counts (PyTorch's ``ignore_index``): padding in token sequences.
IGNORE_LABEL = -100


def task_loss(logits: torch.Tensor, y: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Cross-entropy of class scores ``(B, C)`` or per-token scores ``(B, T, C)`` against ``y`` ``(B,)`` or
    ``(B, T)``; the mean is over labelled positions."""
    if y.dim() == 2:
        logits, y = logits.reshape(-1, logits.shape[-1]), y.reshape(-1)
    return nn.functional.cross_entropy(logits, y, reduction=reduction)


class Network:
    """The task's module, its trainable parameters and its buffers."""

    def __init__(self, module: nn.Module):
        self.module = module
        self.params = ParamLayout.of(module)
        self.buffers = BufferLayout.of(module)

    def initial_params(self) -> torch.Tensor:
        return self.params.flatten(self.module)

    def initial_buffers(self) -> torch.Tensor:
        return self.buffers.flatten(self.module)

    def buffer_tensors(self, b: torch.Tensor | None) -> dict[str, torch.Tensor]:
        """The buffers of the flat vector ``b`` as tensors of their own (each its own dtype), for a job to move;
        :meth:`~netfl.learn.params.BufferLayout.pack` makes a vector of them again."""
        if b is None or not self.buffers:
            return {}
        return {name: t.clone() for name, t in self.buffers.unflatten(b).items()}

    def forward(self, w: torch.Tensor, buffers: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """The module's output on ``x`` with parameters ``w`` (a flat vector) and ``buffers`` (named tensors:
        a module that updates its buffers in training mode, as BatchNorm does, updates these), in the module's
        current mode."""
        return functional_call(self.module, {**self.params.unflatten(w), **buffers}, (x,))
