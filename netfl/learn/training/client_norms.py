"""``LayerNorm``, ``BatchNorm`` and dropout for K clients (:mod:`netfl.learn.training.client_layers`): each
client's affine weights, running statistics and dropout masks."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from netfl.learn.training.client_batch import Clients, Unbatchable

__all__ = ["batch_norm", "dropout", "layer_norm"]


def layer_norm(m: nn.LayerNorm, c: Clients, names: dict, dim: int, x: torch.Tensor) -> torch.Tensor:
    if dim >= x.dim() - len(m.normalized_shape):
        raise Unbatchable("LayerNorm normalising over the batch dimension")
    out = F.layer_norm(x, m.normalized_shape, None, None, m.eps)
    weight = c.param(names.get("weight"))
    if weight is None:
        bias = c.param(names.get("bias"))
        if bias is None:
            return out
        weight = torch.ones_like(bias)
    size = math.prod(m.normalized_shape)
    moved = out.movedim(dim, 0)
    rows = moved.reshape(c.k, -1, size)
    bias = c.param(names.get("bias"))
    scaled = (
        rows * weight.reshape(c.k, 1, size)
        if bias is None
        else torch.addcmul(bias.reshape(c.k, 1, size), rows, weight.reshape(c.k, 1, size))
    )
    return scaled.reshape(moved.shape).movedim(0, dim)


def batch_norm(
    m: nn.BatchNorm1d | nn.BatchNorm2d | nn.BatchNorm3d, c: Clients, names: dict, dim: int, x: torch.Tensor
) -> torch.Tensor:
    """Each client's minibatch statistics: (K x B, C, ...) laid out as (B, K x C, ...), one channel per client's
    channel, and each client's running statistics updated in place (rows of its stacked buffers)."""
    if not m.training:
        raise Unbatchable("BatchNorm in evaluation mode inside training")
    k, channels = c.k, x.shape[1]
    b = x.shape[0] // k
    spread = x.reshape(k, b, *x.shape[1:]).transpose(0, 1).reshape(b, k * channels, *x.shape[2:])
    mean = var = None
    factor = 0.0 if m.momentum is None else m.momentum
    if m.track_running_stats:
        mean, var = c.buffers[names["running_mean"]], c.buffers[names["running_var"]]
        tracked = c.buffers[names["num_batches_tracked"]]
        tracked.add_(1)
        if m.momentum is None:  # a cumulative average: one factor for all clients only when their counts agree
            if bool((tracked != tracked[0]).any()):
                raise Unbatchable("BatchNorm with momentum=None and clients of different batch counts")
            factor = 1.0 / float(tracked[0])
        mean, var = mean.view(-1), var.view(-1)
    weight, bias = c.param(names.get("weight")), c.param(names.get("bias"))
    out = F.batch_norm(
        spread,
        mean,
        var,
        None if weight is None else weight.reshape(-1),
        None if bias is None else bias.reshape(-1),
        True,
        factor,
        m.eps,
    )
    return out.reshape(b, k, *x.shape[1:]).transpose(0, 1).reshape(x.shape)


def dropout(m: nn.Module, c: Clients, names: dict, dim: int, x: torch.Tensor, *, channels: int | None) -> torch.Tensor:
    """The replicas' seeded dropout (:class:`netfl.learn.training.replicas._SeededDropout`) per client."""
    if not m.training or m.p == 0.0:
        return x
    if m.p == 1.0:
        return x * 0.0
    per_client = list(x.shape)
    per_client[dim] //= c.k
    if channels is not None:
        if dim >= x.dim() - channels:
            raise Unbatchable(f"{type(m).__name__} over the batch dimension")
        per_client[x.dim() - channels :] = [1] * channels
    keep = c.masks(c.dropout, tuple(per_client), dim, 1.0 - m.p, x)
    return x * keep / (1.0 - m.p)
