"""The FedAvg family: plain FedAvg, FedProx (FedAvg with a proximal term on the clients) and the fixed-weight
baselines of FedAU and MIFA.

All of them combine only the updates that arrived this round and keep no
state. With ``delta_k = y_k - x`` (client end vector minus start vector),
``gamma`` the client learning rate (``task.local.lr``, or the job's
scheduled lr) and ``eta`` the server learning rate (``server_lr``):

- ``fedavg``:          x += eta * sum_k w_k delta_k, w_k = n_k / sum_j n_j or 1 / |arrived|
- ``fedprox``:         fedavg's server, clients minimising F_k(w) + mu/2 ||w - w^t||^2 (w^t: the model received)
- ``fedavg_all``:      x += eta * (1/N) * sum_k delta_k             (N = all clients)
- ``fedavg_known``:    x += eta * (1/N) * sum_k delta_k / p_k
- ``fedavg_unbiased``: G = (1/N) * sum_k Delta_k / p_k with Delta_k = -delta_k / gamma_k; x -= eta * G

``fedavg_known`` (FedAU's "known participation statistics") and
``fedavg_unbiased`` (the MIFA notes' "FedAvg unbiased / importance
sampling") are the same rule written in two learning-rate conventions:
``fedavg_unbiased`` with server lr ``eta`` equals ``fedavg_known`` with server
lr ``eta / gamma``. They are kept as two names so that each paper's
hyper-parameters can be typed in as published (FedAU: eta = 1 means "add the
weighted mean delta"; MIFA: eta is a step size on gradient-like updates, by
default the client lr itself, which again means "add the weighted mean delta").

Metrics of each aggregation: ``updates`` (how many were combined); ``fedavg``
``samples`` (their sum_k n_k); the others ``weight_sum``, the total weight of
the arrived updates on the mean over all N clients: |arrived| / N, or
sum_k 1 / (N p_k) for the inverse-probability rules (1 in expectation when
p_k is the probability of arriving; its spread is the estimator's).
"""

from __future__ import annotations

from abc import abstractmethod

import torch

from netfl.algorithms import (
    Aggregate,
    ClientInfo,
    ClientUpdate,
    Correction,
    RoundContext,
    Strategy,
    data_weights,
    weighted_sum,
)
from netfl.algorithms.params import (
    FedAvgAllParams,
    FedAvgKnownParams,
    FedAvgParams,
    FedAvgUnbiasedParams,
    FedProxParams,
)


class _ServerStep(Strategy):
    """``x <- x + eta * sum_k w_k delta_k`` over the updates that arrived (none: x stays), eta = ``server_lr``;
    the rule is its weights ``w_k``, its metrics ``updates`` and those of :meth:`measures`."""

    def aggregate(self, x: torch.Tensor, updates: list[ClientUpdate], context: RoundContext) -> Aggregate:
        metrics = {"updates": len(updates), **self.measures(updates)}
        if not updates:
            return Aggregate(x, metrics)
        return Aggregate(x + self.params.server_lr * weighted_sum(updates, self.weights(updates), x), metrics)

    @abstractmethod
    def weights(self, updates: list[ClientUpdate]) -> list[float]:
        """``w_k`` of each update that arrived (there is at least one)."""

    @abstractmethod
    def measures(self, updates: list[ClientUpdate]) -> dict[str, float]:
        """The rule's metrics beside ``updates`` (module docstring), also with no update."""


class FedAvg(_ServerStep):
    """FedAvg over the updates that arrived.

    Rule: ``x <- x + eta * sum_k w_k delta_k`` with ``w_k = n_k / sum_j n_j``
    (``weighting: samples``, the original) or ``w_k = 1 / |arrived|``
    (``uniform``, FedAU's "average participating" baseline). With no update
    the model stays as it is. Learning rates: gamma = ``task.local.lr`` on the
    clients, eta = ``server_lr`` on the server (eta = 1: plain averaging).
    """

    name = "fedavg"
    Params = FedAvgParams

    def weights(self, updates: list[ClientUpdate]) -> list[float]:
        return data_weights(updates, self.params.weighting)

    def measures(self, updates: list[ClientUpdate]) -> dict[str, float]:
        return {"samples": sum(u.num_samples for u in updates)}


class FedAvgAll(_ServerStep):
    """FedAU's "average all" baseline: the arrived updates summed and divided by all N clients.

    Rule: ``x <- x + eta * (1/N) * sum_{k arrived} delta_k`` (a client that
    did not take part counts as a zero update). Learning rates: gamma =
    ``task.local.lr``, eta = ``server_lr`` (FedAU's CIFAR-10 setting: gamma 0.1,
    eta 10).
    """

    name = "fedavg_all"
    Params = FedAvgAllParams

    def weights(self, updates: list[ClientUpdate]) -> list[float]:
        return [1.0 / self.num_clients] * len(updates)

    def measures(self, updates: list[ClientUpdate]) -> dict[str, float]:
        return {"weight_sum": len(updates) / self.num_clients}


class FedAvgKnown(_ServerStep):
    """FedAU's "known participation statistics" baseline: inverse-probability weights.

    Rule: ``x <- x + eta * (1/N) * sum_{k arrived} delta_k / p_k`` with p_k the
    long-run participation probability of client k's availability policy
    (``ClientInfo.participation``: the ``p`` of bernoulli, markov and cyclic).
    Building it fails (ValueError) when a client's policy has no ``p``.
    Learning rates: gamma = ``task.local.lr``, eta = ``server_lr``. The same
    rule as ``fedavg_unbiased`` with eta_known = eta_unbiased / gamma.

    p_k is the policy's probability of being *available*; when the server
    selects only some of the available clients, or deadlines drop updates,
    the probability of an update arriving is smaller and the weights no
    longer cancel the participation bias exactly.
    """

    name = "fedavg_known"
    Params = FedAvgKnownParams

    def weights(self, updates: list[ClientUpdate]) -> list[float]:
        n = self.num_clients
        return [1.0 / (n * self.probabilities[u.client]) for u in updates]

    def measures(self, updates: list[ClientUpdate]) -> dict[str, float]:
        """``weight_sum`` = sum_k 1 / (N p_k) over the arrived updates (``fedavg_unbiased``'s too)."""
        return {"weight_sum": sum(FedAvgKnown.weights(self, updates))}


class FedAvgUnbiased(FedAvgKnown):
    """The MIFA notes' "FedAvg (unbiased)", in their learning-rate convention.

    Rule: ``Delta_k = (x - y_k) / gamma_k = -delta_k / gamma_k`` (gamma_k the
    client lr the job trained with), ``G = (1/N) * sum_{k arrived} Delta_k / p_k``,
    ``x <- x - eta * G`` with eta = ``server_lr``, or the round's client lr
    gamma_t when ``server_lr`` is omitted (then, with a constant client lr,
    ``x <- x + (1/N) sum delta_k / p_k``). Equal to ``fedavg_known`` with
    eta_known = eta / gamma. Needs every client's ``p`` like ``fedavg_known``.
    """

    name = "fedavg_unbiased"
    Params = FedAvgUnbiasedParams

    def aggregate(self, x: torch.Tensor, updates: list[ClientUpdate], context: RoundContext) -> Aggregate:
        metrics = {"updates": len(updates), **self.measures(updates)}
        if not updates:
            return Aggregate(x, metrics)
        n = self.num_clients
        eta = (
            self.params.server_lr if self.params.server_lr is not None else self.clients.client_lr(context.round_index)
        )
        # x - eta * (1/N) sum (-delta/gamma)/p  =  x + sum (eta / (N gamma p)) delta
        weights = [eta / (n * self.update_lr(u) * self.probabilities[u.client]) for u in updates]
        return Aggregate(x + weighted_sum(updates, weights, x), metrics)


class FedProx(FedAvg):
    """FedProx (Li, Sahu, Zaheer, Sanjabi, Talwalkar & Smith, "Federated Optimization in Heterogeneous Networks",
    MLSys 2020): clients minimise F_k(w) + mu/2 ||w - w_global||^2; the server averages as FedAvg.

    Rule, client: each local SGD step is ``w <- w - lr (grad F_k(w) + mu (w - w_global))`` (plus the task's
    weight decay), w_global the model the job started from. Server: FedAvg's
    ``x <- x + eta * sum_k w_k delta_k`` (``weighting``: samples or uniform; eta = ``server_lr``).
    mu = 0 is FedAvg exactly.
    """

    name = "fedprox"
    Params = FedProxParams

    def __init__(self, params: FedProxParams, clients: ClientInfo):
        super().__init__(params, clients)
        self._proximal = Correction(pull=params.mu) if params.mu else None

    def correction(self, client: int, task: int) -> Correction | None:
        return self._proximal
