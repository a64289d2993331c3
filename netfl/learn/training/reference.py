"""Local training of one client, by the book: the reference every faster path is checked against.

A job is minibatch SGD from a starting vector on the client's samples. Here it is written as plainly as it
can be -- autograd through ``functional_call`` with the job's own state, one job at a time -- so that the
stacked, fused and replicated paths (:mod:`netfl.learn.training.trainer`) can be tested against it, and so that the
rules of a step are stated once:

``w <- w - lr (grad + weight_decay w + correction(w, w0))`` for the model's parameters (``correction``: the
strategy's term, :class:`~netfl.learn.training.objective.Correction`), and ``e <- e - extras.lr(lr) grad_e`` for a
strategy's trainable extra scalars (no decay, no correction). The loss is the task's cross-entropy
(:func:`~netfl.learn.models.flat_model.task_loss`), or the strategy's objective of it when it has extras. Buffers
(BatchNorm's running statistics) move as the module moves them in training mode.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from netfl.learn.models.flat_model import Network, task_loss
from netfl.learn.training.objective import Correction, ExtraScalars
from netfl.registry.choices import LrSchedule, values

#: ``task.local.lr_schedule``, declared in the registry.
LR_SCHEDULES = values(LrSchedule)


@dataclass
class TrainJob:
    """One job to train, whichever path trains it: its minibatches (steps x b indices into the task's training
    set), its seed (dropout masks, or torch's generator for a module that draws from it), the strategy's
    correction and its starting buffers (None: those of the model it starts from)."""

    minibatches: torch.Tensor
    seed: int
    correction: Correction | None = None
    buffers: torch.Tensor | None = None


def scheduled_lr(lr: float, schedule: str, round_index: int) -> float:
    """The client learning rate of a job started in round ``round_index`` (rounds count from 0).

    ``constant``: ``lr``. ``inverse_round``: ``lr / (t + 1)``, the MIFA reference code's decay
    (its ``inverse_prop_decay_learning_rate``).
    """
    if schedule == "constant":
        return lr
    if schedule == "inverse_round":
        return lr / (round_index + 1)
    raise ValueError(f"unknown lr_schedule {schedule!r}; accepted: {', '.join(LR_SCHEDULES)}")


def num_local_steps(num_samples: int, batch_size: int, steps: int | None, epochs: float | None) -> int:
    """Steps of one job: given directly, or ``ceil(epochs * n / b)``."""
    if steps is not None:
        return steps
    return max(1, math.ceil(epochs * num_samples / batch_size))


def minibatch_indices(num_samples: int, batch_size: int, steps: int, generator: torch.Generator) -> torch.Tensor:
    """Each step's minibatch (steps x min(batch_size, n) indices), without replacement within an epoch.

    The batches are cut from a stream of independent permutations, so each
    epoch (n consecutive draws) sees every sample exactly once and every batch
    has ``min(batch_size, n)`` samples; a batch may straddle two epochs.
    """
    b = min(batch_size, num_samples)
    needed = steps * b
    perms = [torch.randperm(num_samples, generator=generator) for _ in range(-(-needed // num_samples))]
    return torch.cat(perms)[:needed].view(steps, b) if needed else torch.empty(0, b, dtype=torch.long)


def train_one(
    network: Network,
    start: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    minibatches: Sequence[torch.Tensor] | torch.Tensor,
    *,
    lr: float,
    weight_decay: float = 0.0,
    buffers: torch.Tensor | None = None,
    extras: ExtraScalars | None = None,
    correction: Correction | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One job from ``start`` (the parameters, then any extras) and ``buffers`` over ``minibatches`` (rows of
    indices into x, y); return its final vector and buffers. The module runs in training mode; this is not
    thread-safe (the faster paths are)."""
    n = network.params.size
    theta = start[:n].detach().clone()
    extra = start[n:].detach().clone() if extras is not None else None
    own = network.buffer_tensors(buffers)
    network.module.train()
    for idx in minibatches:
        theta.requires_grad_(True)
        wrt = (theta,) if extra is None else (theta, extra.requires_grad_(True))
        loss = task_loss(network.forward(theta, own, x[idx]), y[idx])
        if extras is not None:
            loss = extras.objective(loss, extra)
        grads = torch.autograd.grad(loss, wrt, allow_unused=True)
        with torch.no_grad():
            grad = grads[0] if grads[0] is not None else torch.zeros_like(theta)
            step = grad + weight_decay * theta
            if correction is not None:
                step += correction.term(theta, start[:n])
            theta = theta - lr * step
            if extra is not None:
                extra = extra - extras.lr(lr) * (grads[1] if grads[1] is not None else 0.0)
    end = theta.detach() if extra is None else torch.cat([theta.detach(), extra.detach()])
    return end, network.buffers.pack(own) if own else None
