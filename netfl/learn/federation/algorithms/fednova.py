"""FedNova: normalised averaging of updates made with different amounts of local work.

Wang, Liu, Liang, Joshi & Poor, "Tackling the Objective Inconsistency
Problem in Heterogeneous Federated Optimization", NeurIPS 2020. With plain
local SGD, client i runs tau_i steps and sends ``Delta_i = y_i - x``. FedAvg
adds ``sum_i p_i Delta_i``, in which a client that ran more steps weighs
more: the model drifts towards the objective of the clients that work most
(the *objective inconsistency*). FedNova divides each update by its steps
and rescales by the effective number of steps:

    d_i = Delta_i / tau_i,    tau_eff = sum_i p_i tau_i,    x <- x + eta * tau_eff * sum_i p_i d_i

with p_i the data weights of the aggregated clients (sum p_i = 1;
``weighting: uniform`` makes them equal) and eta = ``server_lr`` (1 in the
paper). With equal tau_i it is FedAvg. tau_i is the job's own number of
steps: ``task.local``, ``async.local_steps`` or, with
``server.round.partial_work``, the steps a device finished before the
deadline.

Metrics of each aggregation: ``updates``, ``tau_eff`` and the fewest and
most local steps among the updates, ``steps_min`` and ``steps_max`` (NaN
without an update).
"""

from __future__ import annotations

import math

import torch

from netfl.algorithms import Aggregate, ClientUpdate, RoundContext, Strategy, data_weights, weighted_sum
from netfl.algorithms.params import FedNovaParams


class FedNova(Strategy):
    """FedNova with plain local SGD (the paper's a_i = tau_i).

    Rule: over the updates that arrived, ``p_i = n_i / sum n`` (or 1/|arrived|), ``tau_eff = sum p_i tau_i``,
    ``x <- x + eta * tau_eff * sum_i p_i Delta_i / tau_i``. No update: the model stays.
    """

    name = "fednova"
    Params = FedNovaParams

    def aggregate(self, x: torch.Tensor, updates: list[ClientUpdate], context: RoundContext) -> Aggregate:
        if not updates:
            return Aggregate(x, {"updates": 0, "tau_eff": math.nan, "steps_min": math.nan, "steps_max": math.nan})
        p = data_weights(updates, self.params.weighting)
        tau = [self.update_steps(u) for u in updates]
        tau_eff = sum(pi * ti for pi, ti in zip(p, tau))
        metrics = {"updates": len(updates), "tau_eff": tau_eff, "steps_min": min(tau), "steps_max": max(tau)}
        weights = [pi / ti for pi, ti in zip(p, tau)]
        return Aggregate(x + self.params.server_lr * tau_eff * weighted_sum(updates, weights, x), metrics)
