"""FedAsync: every arriving update mixed into the model, less the staler it is.

Xie, Koyejo & Gupta, "Asynchronous Federated Optimization", 2019. A worker
trains from the model of version tau and sends its model x_new; the server,
at version t, mixes it in at once:

    s = t - tau,    alpha_t = alpha * S(s),    x_t = (1 - alpha_t) x_{t-1} + alpha_t x_new

with the staleness function S: ``constant`` 1; ``polynomial`` (s + 1)^-a;
``hinge`` 1 if s <= b, else 1 / (a (s - b) + 1). In netfl x_new is the start
model the worker received plus its update (``ClientUpdate.start + delta``),
each arrival is its own model version (``server.async.buffer: 1``), and an
update more than ``max_staleness`` versions stale is dropped (received, not
applied: the ``aggregate`` event's ``applied=0``, its ``staleness`` the
dropped update's), the paper's bound on staleness made a rule. A dropped
update still takes its model version, the model unchanged: the version is
the paper's server iteration t, which advances with every update received.

Metrics of each aggregation: ``updates`` (those mixed in: one per version,
none when the update was dropped), ``staleness_mean`` and ``staleness_max``
(s) and ``alpha_mean`` (the mean alpha_t they were mixed in with; NaN
without an update).
"""

from __future__ import annotations

import math

import torch

from netfl.algorithms import Aggregate, ClientUpdate, RoundContext, Strategy, staleness_metrics
from netfl.algorithms.params import FedAsyncParams


def staleness_factor(staleness: int, kind: str, a: float = 0.5, b: int = 4) -> float:
    """S(s): ``constant`` 1, ``polynomial`` (s + 1)^-a, ``hinge`` 1 if s <= b else 1 / (a (s - b) + 1)."""
    if staleness < 0:
        raise ValueError(f"staleness must be >= 0, got {staleness}")
    if kind == "constant":
        return 1.0
    if kind == "polynomial":
        return float((staleness + 1) ** -a)
    if kind == "hinge":
        return 1.0 if staleness <= b else 1.0 / (a * (staleness - b) + 1.0)
    raise ValueError(f"unknown staleness function {kind!r}")


class FedAsync(Strategy):
    """FedAsync's mixing, one update at a time (in arrival order if several arrive together).

    Rule: for an update from version tau while the server is at version t (``context.round_index``),
    ``alpha_t = alpha S(t - tau)`` and ``x <- (1 - alpha_t) x + alpha_t (x_tau + delta)``.
    """

    name = "fedasync"
    Params = FedAsyncParams

    def mixing_weight(self, staleness: int) -> float:
        """alpha_t = alpha * S(s)."""
        p = self.params
        return p.alpha * staleness_factor(staleness, p.staleness, p.decay, p.flat)

    def admit(self, update: ClientUpdate, context: RoundContext) -> bool:
        bound = self.params.max_staleness
        return bound is None or context.round_index - update.start_version <= bound

    def aggregate(self, x: torch.Tensor, updates: list[ClientUpdate], context: RoundContext) -> Aggregate:
        alphas = []
        for u in updates:
            if u.start is None:
                raise ValueError("fedasync needs the model each update started from (ClientUpdate.start)")
            alpha_t = self.mixing_weight(context.round_index - u.start_version)
            x_new = u.start.to(x) + u.delta.to(dtype=x.dtype, device=x.device).view_as(x)
            x = (1 - alpha_t) * x + alpha_t * x_new
            alphas.append(alpha_t)
        return Aggregate(
            x,
            {
                "updates": len(updates),
                **staleness_metrics(updates, context),
                "alpha_mean": sum(alphas) / len(alphas) if alphas else math.nan,
            },
        )
