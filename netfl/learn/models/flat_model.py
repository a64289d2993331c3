"""A task's model as the training paths see it: the module used as a recipe, its state as flat vectors
(parameters, buffers), and the loss it trains on.

The module a user hands over can be any ``torch.nn.Module``. It is called with state that netfl owns
(``functional_call`` with a job's parameters and buffers), or copied into per-thread replicas
(:mod:`netfl.learn.training.replicas`); the module itself is never trained, so a task's initial model is whatever
the module held when it was built.

Outputs are class scores, one row per sample ``(B, C)`` against labels ``(B,)``, or one per token
``(B, T, C)`` against labels ``(B, T)`` (next-character prediction): the loss is the mean cross-entropy
over the labelled positions (a label of -100 counts nowhere).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call

from netfl.learn.models.params import BufferLayout, ParamLayout

__all__ = ["IGNORE_LABEL", "Network", "task_loss"]

#: A label no loss or accuracy counts (PyTorch's ``ignore_index``): padding in token sequences.
IGNORE_LABEL = -100


def task_loss(logits: torch.Tensor, y: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Cross-entropy of class scores ``(B, C)`` or per-token scores ``(B, T, C)`` against ``y`` ``(B,)`` or
    ``(B, T)``; the mean is over labelled positions. A module whose output no longer fits the labels (its shape
    changed since it was checked) is said so, with both shapes (:class:`OutputMismatch`), rather than as torch's
    ``Target 9 is out of bounds``."""
    try:
        if y.dim() == 2:
            return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction=reduction)
        return nn.functional.cross_entropy(logits, y, reduction=reduction)
    except (IndexError, RuntimeError, ValueError) as exc:
        raise OutputMismatch(output_problem(logits, y) or f"{type(exc).__name__}: {exc}") from None


class OutputMismatch(ValueError):
    """The module's output does not fit the labels it is trained or tested on."""


def output_problem(logits: torch.Tensor, y: torch.Tensor, num_classes: int | None = None) -> str:
    """What is wrong with ``logits`` as class scores for ``y`` ('' when nothing is seen): the expected and the
    actual shape. ``num_classes``: the task's classes (else the labels' largest + 1, looked at only on failure)."""
    shape, expected_rows = tuple(logits.shape), tuple(y.shape)
    reach = "" if num_classes is None else f"the task has {num_classes} classes"
    if num_classes is None:
        try:
            num_classes = int(y.max()) + 1
        except (RuntimeError, ValueError):  # inside vmap, a value cannot be read out: the shapes still say a lot
            num_classes = None
    classes = "C" if num_classes is None else f"C >= {num_classes}"
    expected = f"({', '.join(map(str, expected_rows))}, {classes})"
    if logits.dim() != y.dim() + 1 or shape[:-1] != expected_rows:
        return f"the model's output has shape {shape}, where class scores {expected} are expected for these labels"
    if num_classes is not None and shape[-1] < num_classes:
        return (
            f"the model's output has shape {shape}: it scores {shape[-1]} classes, where {expected} are expected "
            f"({reach or f'the labels reach {num_classes - 1}'}); its output changed shape since it was checked"
        )
    return ""


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
        :meth:`~netfl.learn.models.params.BufferLayout.pack` makes a vector of them again."""
        if b is None or not self.buffers:
            return {}
        return {name: t.clone() for name, t in self.buffers.unflatten(b).items()}

    def forward(self, w: torch.Tensor, buffers: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """The module's output on ``x`` with parameters ``w`` (a flat vector) and ``buffers`` (named tensors:
        a module that updates its buffers in training mode, as BatchNorm does, updates these), in the module's
        current mode."""
        return functional_call(self.module, {**self.params.unflatten(w), **buffers}, (x,))
