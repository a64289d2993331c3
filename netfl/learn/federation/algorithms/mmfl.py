"""Multi-model FL (MMFL) with variance-reduced optimal client sampling.

N clients train S models at once (the scenario's ``tasks:``); a client
sends at most one model's update per round and the server takes about m
updates per round (``round.participants``). With d_{i,s} = n_{i,s} / sum_j
n_{j,s} client i's share of model s's data and delta = y - x:

- ``sampling: optimal`` -- the server asks every eligible client for its
  update norms (a *probe*: ``norms: update`` trains every model and reports
  ||delta_{i,s}|| / gamma_s, as the reference code does; ``norms: loss``
  reports the global models' local losses instead -- forward passes only,
  the reference's ``approx_optimal``), forms U~_{i,s} = d_{i,s} x value and
  M_i = sum_s U~_{i,s}, and sends each client its row of the closed-form
  probabilities (:func:`optimal_probabilities`); client i then uploads model
  s's update with probability p_{s|i}, or nothing.
- ``sampling: random`` -- m of the eligible clients uniformly, each on a
  uniformly drawn model: p_{s|i} = m / (N_eligible S).
- ``sampling: round_robin`` -- m of the eligible clients uniformly; client
  blocks (the S contiguous thirds, fifths, ... of the client indices) take
  the models in turn, block b training model (b + t) mod S in round t.

Aggregation per model s over the clients A_s whose update of s arrived:
``optimal`` and ``random``: w_s <- w_s + eta sum_{i in A_s} (d_{i,s} / p_{s|i})
delta_{i,s} (unbiased for sum_i d_{i,s} delta_{i,s} over the eligible
clients); ``round_robin``: w_s <- w_s + eta mean_{i in A_s} delta_{i,s}
(the reference code's plain average). eta = ``server_lr`` (1 in the paper).

Metrics of each model's aggregation (one row per task): ``updates``
(|A_s|), ``weight_sum`` (the sum of the weights the updates took: sum
d_{i,s} / p_{s|i}, 1 in expectation over the sampling, or 1 for
round_robin's mean; 0 without an update) and ``p_min`` (the smallest
p_{s|i} among the arrived updates, the one that weighs most; NaN for
round_robin or without an update).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from netfl.algorithms import (
    Aggregate,
    ClientInfo,
    ClientUpdate,
    DeviceStates,
    LocalLoss,
    RoundContext,
    Strategy,
    UpdateNorm,
    sample_uniform,
    weighted_sum,
)
from netfl.algorithms.params import MMFLParams


def optimal_probabilities(u: np.ndarray, m: float) -> np.ndarray:
    """The closed-form p_{s|i} minimising sum_s Var[sum_{i in A_s} (d/p) U] given U~ = ``u`` (clients x models).

    Minimises sum_{i,s} u_{i,s}^2 / p_{i,s} subject to p >= 0, sum_s p_{i,s} <= 1 and
    sum_{i,s} p_{i,s} = m. With M_i = sum_s u_{i,s} sorted ascending, k is the largest l in
    [N-m+2, N] with 0 < m-N+l <= (sum_{j<=l} M_j) / M_l, else N-m+1; the k smallest clients get
    p_{i,s} = (m-N+k) u_{i,s} / sum_{j<=k} M_j, the others p_{i,s} = u_{i,s} / M_i (they always send).

    Clients with M_i = 0 have nothing to send and get p = 0; the rule applies to the others with
    m capped at their number (each client sends at most one update). All zero: all p = 0.
    """
    u = np.asarray(u, dtype=np.float64)
    if u.ndim != 2 or (u < 0).any() or not np.isfinite(u).all():
        raise ValueError("u must be a finite, non-negative clients x models array")
    p = np.zeros_like(u)
    total = u.sum(axis=1)
    live = np.flatnonzero(total > 0)
    n = len(live)
    m = min(float(m), float(n))
    if n == 0 or m <= 0:
        return p
    order = live[np.argsort(total[live], kind="stable")]
    sorted_m = total[order]
    cumulative = np.cumsum(sorted_m)
    k = int(np.floor(n - m + 1))
    for ell in range(max(k + 1, 1), n + 1):  # the largest l satisfying the condition wins
        lead = m - n + ell
        if 0 < lead <= cumulative[ell - 1] / sorted_m[ell - 1] * (1 + 1e-12):  # ties: rounding must not decide
            k = ell
    k = max(k, 1)
    small, large = order[:k], order[k:]
    p[small] = (m - n + k) * u[small] / cumulative[k - 1]
    p[large] = u[large] / total[large, None]
    return p


class MMFL(Strategy):
    """MMFL: several models at once, each client sending at most one update per round.

    Rule: see the module docstring. ``sampling`` picks optimal (the paper's
    variance-reduced closed form, which needs a probe of every eligible
    client's update norms or losses, carried over the simulated network), or
    the baselines random and round_robin; m = ``round.participants`` (all
    eligible clients if omitted). Learning rates: gamma_s = each task's
    ``local.lr`` on the clients, eta = ``server_lr`` on the server.
    """

    name = "mmfl"
    Params = MMFLParams

    def __init__(self, params: MMFLParams, clients: ClientInfo):
        super().__init__(params, clients)
        if self.params.sampling == "optimal":
            self.probe = UpdateNorm() if self.params.norms == "update" else LocalLoss()
        sizes = np.asarray(clients.sizes_by_task, dtype=np.float64)  # S x N
        self.shares = sizes / sizes.sum(axis=1, keepdims=True)  # d_{i,s}, indexed [s, i]
        self.num_tasks = sizes.shape[0]
        self.last_probabilities: np.ndarray | None = None  # N x S of the latest round (optimal)
        self._p: dict[tuple[int, int], float] = {}  # (client, task) -> p_{s|i} of this round's assignments

    def select(
        self,
        round_index: int,
        available: Sequence[int],
        participants: int | None,
        rng: np.random.Generator,
        devices: DeviceStates | None = None,
    ) -> list[tuple[int, int]]:
        chosen = sample_uniform(available, participants, rng)
        tasks = self.num_tasks
        if self.params.sampling == "random":
            picks = rng.integers(tasks, size=len(chosen))
            p = len(chosen) / (len(available) * tasks) if chosen else 0.0
            pairs = [(client, int(s)) for client, s in zip(chosen, picks)]
            self._p = {pair: p for pair in pairs}
            return pairs
        n = self.num_clients
        pairs = [(client, int((client * tasks // n + round_index) % tasks)) for client in chosen]
        self._p = {}
        return pairs

    def assign(
        self, round_index: int, reports: dict[int, np.ndarray], participants: int | None, rng: np.random.Generator
    ) -> list[tuple[int, int]]:
        clients = sorted(reports)
        if not clients:
            self._p = {}
            return []
        u = np.stack([self.shares[:, i] * np.asarray(reports[i], dtype=np.float64) for i in clients])
        m = len(clients) if participants is None else participants
        p = optimal_probabilities(u, m)
        self.last_probabilities = np.zeros((self.num_clients, self.num_tasks))
        self.last_probabilities[clients] = p
        pairs, self._p = [], {}
        for row, client in enumerate(clients):
            stay = max(0.0, 1.0 - p[row].sum())
            pick = int(rng.choice(self.num_tasks + 1, p=np.append(p[row], stay) / (p[row].sum() + stay)))
            if pick < self.num_tasks:
                pairs.append((client, pick))
                self._p[(client, pick)] = float(p[row, pick])
        return pairs

    def aggregate(self, x: torch.Tensor, updates: list[ClientUpdate], context: RoundContext) -> Aggregate:
        if not updates:
            return Aggregate(x, {"updates": 0, "weight_sum": 0.0, "p_min": math.nan})
        if self.params.sampling == "round_robin":
            weights = [1.0 / len(updates)] * len(updates)
            p_min = math.nan
        else:
            weights = [self.shares[u.task, u.client] / self._p[(u.client, u.task)] for u in updates]
            p_min = min(self._p[(u.client, u.task)] for u in updates)
        metrics = {"updates": len(updates), "weight_sum": float(sum(weights)), "p_min": float(p_min)}
        return Aggregate(x + self.params.server_lr * weighted_sum(updates, weights, x), metrics)
