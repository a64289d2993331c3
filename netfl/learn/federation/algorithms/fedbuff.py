"""FedBuff: buffered asynchronous aggregation (Nguyen et al., "Federated Learning with Buffered
Asynchronous Aggregation", AISTATS 2022).

Clients train from whatever model version they pulled; the server keeps
the arriving updates in a buffer and, every K arrivals, takes one step on
their staleness-weighted mean:

    x <- x + eta_g * (1/K) * sum_{i in buffer} w(s_i) * delta_i,    w(s) = 1 / sqrt(1 + s)

with ``delta_i = y_i - x_{start}`` (written with x - y, the step subtracts:
the same step), s_i the number of server steps taken since the version
client i started from, and eta_g = ``server_lr``.

In netfl the buffer is the asynchronous server's: ``server.async.buffer``
is K (the engine aggregates, and the model version advances, every K
arrivals), so K is not a second parameter here, and staleness counts those
versions. How many clients train at once (the paper's concurrency) is not
set either: every device is a worker while its availability and battery
allow (``async.pause`` spaces its jobs), so concurrency comes out of the
simulated world. ``staleness_weight: none`` gives w = 1, i.e. the plain
buffered mean (``fedavg`` with ``weighting: uniform`` in ``mode: async``).

In ``mode: sync`` every update is fresh (s = 0) and 1/K is one over the
round's arrivals: uniform FedAvg with server lr eta_g.

Metrics of each server step: ``updates`` (K, the buffer's), ``staleness_mean``
and ``staleness_max`` (s_i) and ``weight_mean`` (the mean w(s_i): 1 for
fresh updates; NaN, as the staleness, for an empty buffer).
"""

from __future__ import annotations

import math

import torch

from netfl.algorithms import Aggregate, ClientUpdate, RoundContext, Strategy, staleness_metrics, weighted_sum
from netfl.algorithms.params import FedBuffParams


def staleness_weight(staleness: int, kind: str) -> float:
    """w(s): 1/sqrt(1+s) (``inverse_sqrt``, the paper's) or 1 (``none``)."""
    if staleness < 0:
        raise ValueError(f"staleness must be >= 0, got {staleness}")
    return 1.0 / math.sqrt(1.0 + staleness) if kind == "inverse_sqrt" else 1.0


class FedBuff(Strategy):
    """FedBuff's server step on one buffer of updates.

    Rule: for the K updates that arrived since the last step, each from
    version ``start_version`` while the server is at version t
    (``context.round_index``), s_i = t - start_version and
    ``x <- x + eta_g * (1/K) * sum_i w(s_i) delta_i``; K is the number of
    updates in the buffer (``async.buffer``). No update: the model stays.
    """

    name = "fedbuff"
    Params = FedBuffParams

    def aggregate(self, x: torch.Tensor, updates: list[ClientUpdate], context: RoundContext) -> Aggregate:
        metrics = {"updates": len(updates), **staleness_metrics(updates, context), "weight_mean": math.nan}
        if not updates:
            return Aggregate(x, metrics)
        k = len(updates)
        w = [staleness_weight(context.round_index - u.start_version, self.params.staleness_weight) for u in updates]
        metrics["weight_mean"] = sum(w) / k
        weights = [w_i / k for w_i in w]
        return Aggregate(x + self.params.server_lr * weighted_sum(updates, weights, x), metrics)
