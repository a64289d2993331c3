"""Local training of one client: minibatch SGD from a starting vector.

Functional on purpose: the model module is only a recipe
(``functional_call``), the state is the flat parameter vector, so the
learner can snapshot, stack and batch clients freely.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn
from torch.func import functional_call

from netfl.learn.objective import Correction, ExtraScalars
from netfl.learn.params import ParamLayout

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


LR_SCHEDULES = ("constant", "inverse_round")


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


def local_sgd(
    model: nn.Module,
    layout: ParamLayout,
    start: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    steps: int,
    batch_size: int,
    lr: float,
    weight_decay: float,
    generator: torch.Generator,
    loss_fn: LossFn = nn.functional.cross_entropy,
    correction: Correction | None = None,
) -> torch.Tensor:
    """Run ``steps`` SGD steps on (x, y) from ``start``; return the final parameter vector.

    Each step: ``w <- w - lr (grad + weight_decay w + correction.term(w, start))`` (no correction: none).
    """
    w = start.detach().clone()
    for idx in minibatch_indices(len(x), batch_size, steps, generator):
        w.requires_grad_(True)
        loss = loss_fn(functional_call(model, layout.unflatten(w), (x[idx],)), y[idx])
        (grad,) = torch.autograd.grad(loss, w)
        with torch.no_grad():
            w = _descend(w, grad, lr, weight_decay, correction, start)
    return w.detach()


def local_sgd_extended(
    model: nn.Module,
    layout: ParamLayout,
    start: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    steps: int,
    batch_size: int,
    lr: float,
    weight_decay: float,
    generator: torch.Generator,
    extras: ExtraScalars,
    correction: Correction | None = None,
) -> torch.Tensor:
    """``local_sgd`` on a vector ``[theta, extra]``: the model's parameters followed by ``extras``.

    Each minibatch: ``loss = extras.loss(model(theta)(x_b), y_b, extra)``; theta steps at ``lr`` (with
    ``weight_decay`` and any ``correction`` on theta), the extras at ``extras.lr(lr)`` (no decay).
    Minibatches are drawn exactly as in :func:`local_sgd`, so a job sees the same batches whichever
    function trains it.
    """
    n = layout.size
    theta = start[:n].detach().clone()
    extra = start[n:].detach().clone()
    extra_lr = extras.lr(lr)
    for idx in minibatch_indices(len(x), batch_size, steps, generator):
        theta.requires_grad_(True)
        extra.requires_grad_(True)
        logits = functional_call(model, layout.unflatten(theta), (x[idx],))
        grad_theta, grad_extra = torch.autograd.grad(
            extras.loss(logits, y[idx], extra), (theta, extra), allow_unused=True
        )
        with torch.no_grad():
            if grad_theta is not None:
                theta = _descend(theta, grad_theta, lr, weight_decay, correction, start[:n])
            elif weight_decay or correction is not None:  # the loss ignores theta: only decay and correction move it
                theta = _descend(theta, torch.zeros_like(theta), lr, weight_decay, correction, start[:n])
            if grad_extra is not None:
                extra = extra - extra_lr * grad_extra
    return torch.cat([theta.detach(), extra.detach()])


def _descend(
    w: torch.Tensor,
    grad: torch.Tensor,
    lr: float,
    weight_decay: float,
    correction: Correction | None,
    start: torch.Tensor,
) -> torch.Tensor:
    """One SGD step: ``w - lr (grad + weight_decay w + correction.term(w, start))``."""
    step = grad + weight_decay * w
    if correction is not None:
        step += correction.term(w, start)
    return w - lr * step


@torch.no_grad()
def evaluate(
    model: nn.Module,
    layout: ParamLayout,
    w: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    num_classes: int,
    batch_size: int = 2048,
) -> tuple[float, float, list[float]]:
    """Accuracy, mean cross-entropy and per-class accuracy of ``w`` on (x, y)."""
    params = layout.unflatten(w)
    correct = torch.zeros(num_classes, device=w.device)
    total = torch.zeros(num_classes, device=w.device)
    loss_sum = 0.0
    for start in range(0, len(x), batch_size):
        xb, yb = x[start : start + batch_size], y[start : start + batch_size]
        logits = functional_call(model, params, (xb,))
        loss_sum += float(nn.functional.cross_entropy(logits, yb, reduction="sum"))
        hit = (logits.argmax(1) == yb).float()
        correct.index_add_(0, yb, hit)
        total.index_add_(0, yb, torch.ones_like(hit))
    per_class = [float(c / t) if t > 0 else float("nan") for c, t in zip(correct, total)]
    return float(correct.sum() / total.sum()), loss_sum / len(x), per_class
