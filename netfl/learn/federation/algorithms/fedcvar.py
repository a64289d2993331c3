"""Fed-CVaR-Avg: risk-aware FedAvg under a Random Access Model relay.

The server minimises ``(1 - gamma) CVaR_alpha[f_I(theta)] + gamma E[f_I(theta)]``
over the (unknown) distribution rho with which the RAM relays user I. With
the CVaR's variational form this is FedAvg on the joint variable
``(theta, t)`` with each user's local objective, on a minibatch b,

    G_i(theta, t) = (1 - gamma) t + ((1 - gamma) / alpha) relu(f_b(theta) - t) + gamma f_b(theta)

where f_b is the minibatch-mean cross-entropy (the relu acts on the batch
mean, as in the reference code). Its gradients:

    d/dtheta = ((1 - gamma)/alpha * 1{f_b > t} + gamma) grad f_b
    d/dt     = (1 - gamma) (1 - 1{f_b > t} / alpha)

theta takes plain SGD steps at the task lr (``task.local.lr``), t at its own
``t_lr``; t starts at 0 and travels with the model (the learner appends it
to the flat parameter vector as one extra scalar; the model's evaluation
ignores it): the strategy's ``extras`` is a :class:`Threshold`.

alpha = 1 is FedAvg: t's gradient is (1 - gamma)(1 - 1{f > t}), zero while
f > t; starting from t = 0 and with a cross-entropy f > 0, t never moves and
theta's gradient is ((1 - gamma) + gamma) grad f = grad f: plain
cross-entropy SGD. (Started above the losses, t would first fall at
(1 - gamma) t_lr per step while theta took only gamma-scaled steps.)
gamma = 1 is FedAvg for theta whatever t does.

Metrics of each aggregation: ``updates`` (those that arrived) and ``t``, the
global threshold after it (the last value of the global vector): the
estimated alpha-quantile of the users' losses, which the CVaR's variational
form makes t.
"""

from __future__ import annotations

import torch

from netfl.algorithms import Aggregate, ClientInfo, ClientUpdate, ExtraScalars, RoundContext, Strategy
from netfl.algorithms.params import FedCVaRParams


class FedCVaR(Strategy):
    """Fed-CVaR-Avg: each user minimises the CVaR objective over (theta, t); the server adopts what arrived.

    Rule, client: H local epochs (``task.local``) of minibatch SGD on
    G_i(theta, t) = (1-gamma) t + ((1-gamma)/alpha) relu(f_b(theta) - t)
    + gamma f_b(theta), theta at ``task.local.lr``, t at ``t_lr`` (following
    the task's lr schedule), t_0 = 0. Server: ``(theta, t) <- (theta, t) +
    mean_k delta_k`` over the updates that arrived (no update: unchanged).
    Behind a RAM relay exactly one update arrives per round and every job
    started from the current model, so the global (theta, t) *becomes* that
    user's result (the paper's rule); with several fresh updates it is their
    plain (uniform) mean; with stale ones (``mode: async``) their mean change
    applied to the current model. alpha = 1 (or gamma = 1) reduces to FedAvg
    with uniform weights (see the module docstring). The evaluated model is
    theta; t is ignored by it.
    """

    name = "fed_cvar"
    Params = FedCVaRParams

    def __init__(self, params: FedCVaRParams, clients: ClientInfo):
        super().__init__(params, clients)
        self.extras = Threshold(params, clients.local_lr)

    def aggregate(self, x: torch.Tensor, updates: list[ClientUpdate], context: RoundContext) -> Aggregate:
        if not updates:
            new = x
        elif len(updates) == 1:
            new = x + updates[0].delta.to(dtype=x.dtype, device=x.device).view_as(x)
        else:
            deltas = torch.stack([u.delta.to(dtype=x.dtype, device=x.device).reshape(-1) for u in updates])
            new = x + deltas.mean(dim=0).view_as(x)
        return Aggregate(new, {"updates": len(updates), "t": float(new.reshape(-1)[-1])})


class Threshold(ExtraScalars):
    """The CVaR threshold t, trained by each client beside theta: t_0 = 0, step ``t_lr`` (following the
    task's lr schedule: ``t_lr * lr / task.local.lr``), loss G_i(theta, t)."""

    def __init__(self, params: FedCVaRParams, local_lr: float):
        super().__init__([0.0])
        self.params = params
        self.local_lr = local_lr

    def lr(self, model_lr: float) -> float:
        if self.params.t_lr is None:
            return model_lr
        return self.params.t_lr * (model_lr / self.local_lr)

    def objective(self, loss: torch.Tensor, extra: torch.Tensor) -> torch.Tensor:
        return cvar_objective(loss, extra[0], self.params.alpha, self.params.gamma)


def cvar_objective(f: torch.Tensor, t: torch.Tensor, alpha: float, gamma: float) -> torch.Tensor:
    """(1 - gamma) t + ((1 - gamma)/alpha) relu(f - t) + gamma f, for a (minibatch-mean) loss f."""
    return (1.0 - gamma) * t + ((1.0 - gamma) / alpha) * torch.relu(f - t) + gamma * f
