"""FedAU: FedAvg with adaptive weights estimated online from participation intervals.

Wang & Ji (ICLR 2024), Algorithm 2, as the reference code IBM/fedau
computes it (``weighting_method == 'adaptive'``).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch

from netfl.algorithms import Aggregate, ClientUpdate, RoundContext, Strategy, weighted_sum
from netfl.algorithms.params import FedAUParams


class IntervalWeights:
    """FedAU's per-client weights: the running mean of participation intervals, with cutoff ``K``.

    Per client: a counter of rounds missed since the last recorded interval,
    and the sum and number of recorded intervals. ``weights`` is the mean
    recorded interval (1 before any is recorded). ``step(participated)``
    closes one round, after its weights were read:

    - participated: record ``counter + 1``, reset the counter;
    - missed: ``counter += 1``; when it reaches ``K``, record ``K`` and reset
      (the cutoff; ``K = None`` means never).

    For Bernoulli(p) participation and large K the mean interval tends to
    1/p, the inverse-probability weight FedAU estimates.
    """

    def __init__(self, num_clients: int, K: int | None = None):
        if K is not None and K < 1:
            raise ValueError(f"K must be >= 1 or None (got {K})")
        self.K = K
        self.missed = np.zeros(num_clients, dtype=np.int64)
        self.interval_sum = np.zeros(num_clients, dtype=np.int64)
        self.interval_count = np.zeros(num_clients, dtype=np.int64)

    @property
    def weights(self) -> np.ndarray:
        """w_n for the round about to be aggregated (float64, one per client)."""
        out = np.ones(len(self.missed))
        seen = self.interval_count > 0
        out[seen] = self.interval_sum[seen] / self.interval_count[seen]
        return out

    def step(self, participated: np.ndarray | Iterable[int]) -> None:
        """Close one round: ``participated`` is a boolean mask over clients or the participants' indices."""
        mask = np.zeros(len(self.missed), dtype=bool)
        arr = np.asarray(list(participated) if not isinstance(participated, np.ndarray) else participated)
        if arr.dtype == bool:
            if arr.shape != mask.shape:
                raise ValueError(f"participation mask has shape {arr.shape}, expected {mask.shape}")
            mask = arr
        elif arr.size:
            mask[arr.astype(np.int64)] = True
        # participants: interval = missed + 1
        self.interval_sum[mask] += self.missed[mask] + 1
        self.interval_count[mask] += 1
        self.missed[mask] = 0
        # the others: one more missed round, cut off at K
        miss = ~mask
        self.missed[miss] += 1
        if self.K is not None:
            cut = miss & (self.missed >= self.K)
            self.interval_sum[cut] += self.K
            self.interval_count[cut] += 1
            self.missed[cut] = 0


class FedAU(Strategy):
    """FedAU: each arrived update weighted by its client's online interval-average weight.

    Rule, each round (every ``aggregate`` call is one round; a round without
    updates counts as missed by every client):

        w_n = IntervalWeights.weights[n]   (read before this round is recorded)
        x  <- x + eta * (1/N) * sum_{n arrived} w_n * delta_n

    then every client's interval counter advances: a client "participated"
    when an update of its own reached the server this round (the delivered
    jobs, i.e. ``updates``); see :class:`IntervalWeights` for the counter and
    the cutoff ``K``. Learning rates: gamma = ``task.local.lr`` (clients), eta
    = ``server_lr``; ``delta = y - x``. FedAU's CIFAR-10 setting: gamma 0.1,
    eta 1, K = 50 or infinite. The reference code's default K = 100000 is
    ``K: null`` here.

    Metrics: ``updates`` (arrived), and ``interval_mean`` and ``interval_max``, the mean and largest w_n over
    all N clients as this round used them: the estimated participation intervals (1/p_n for Bernoulli(p_n)
    participation; 1 for a client with no interval recorded yet).
    """

    name = "fedau"
    Params = FedAUParams

    def __init__(self, params: FedAUParams, clients):
        super().__init__(params, clients)
        self.interval_weights = IntervalWeights(self.num_clients, self.params.K)

    def aggregate(self, x: torch.Tensor, updates: list[ClientUpdate], context: RoundContext) -> Aggregate:
        weights = self.interval_weights.weights
        participants = sorted({u.client for u in updates})
        self.interval_weights.step(np.asarray(participants, dtype=np.int64))
        metrics = {
            "updates": len(updates),
            "interval_mean": float(weights.mean()),
            "interval_max": float(weights.max()),
        }
        if not updates:
            return Aggregate(x, metrics)
        n = self.num_clients
        return Aggregate(
            x + self.params.server_lr * weighted_sum(updates, [weights[u.client] / n for u in updates], x), metrics
        )
