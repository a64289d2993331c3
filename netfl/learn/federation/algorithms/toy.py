"""The MIFA notes' quadratic toy, run through any strategy without the engine.

Client i minimises ``f_i(w) = 1/2 ||w - b_i||^2``; the global optimum is
``w* = mean_i b_i``. A participating client runs ``local_steps`` full
gradient steps of size gamma from the server's x, in closed form:

    y_i = b_i + (1 - gamma)^K (x - b_i),   delta_i = y_i - x = (1 - (1 - gamma)^K) (b_i - x)

(with K = 1 the gradient-like ``Delta_i = -delta_i / gamma = x - b_i`` is
exactly grad f_i(x)). Participation: client i's update arrives in round t
with probability p_i, independently (Bernoulli). The participation draws
come from one seeded generator, so every strategy run with the same seed
sees the same arrivals (common random numbers).

Used by ``tests/test_algorithms.py`` and ``examples/mifa_quadratic.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from netfl.algorithms import ClientInfo, ClientUpdate, RoundContext, Strategy, as_aggregate


@dataclass(frozen=True)
class QuadraticToy:
    b: torch.Tensor  # N x dim, float64: the clients' optima
    p: tuple[float, ...]  # participation probabilities
    lr: float = 0.02  # gamma, the clients' step size
    local_steps: int = 1

    @classmethod
    def spread(
        cls,
        num_clients: int = 10,
        dim: int = 5,
        *,
        scale: float = 3.0,
        p: float = 0.1,
        lr: float = 0.02,
        local_steps: int = 1,
        seed: int = 0,
    ) -> QuadraticToy:
        """Spread-out optima: ``b_i ~ N(0, scale^2 I)`` from ``seed``."""
        g = torch.Generator().manual_seed(seed)
        b = scale * torch.randn(num_clients, dim, generator=g, dtype=torch.float64)
        return cls(b, (p,) * num_clients, lr, local_steps)

    @property
    def num_clients(self) -> int:
        return self.b.shape[0]

    @property
    def optimum(self) -> torch.Tensor:
        return self.b.mean(dim=0)

    def client_info(self) -> ClientInfo:
        return ClientInfo(sizes=(1,) * self.num_clients, local_lr=self.lr, participation=self.p)

    def delta(self, client: int, x: torch.Tensor) -> torch.Tensor:
        shrink = 1.0 - (1.0 - self.lr) ** self.local_steps
        return shrink * (self.b[client] - x)

    def arrivals(self, rounds: int, seed: int) -> np.ndarray:
        """rounds x N boolean: whose update arrives in which round."""
        rng = np.random.default_rng(seed)
        return rng.random((rounds, self.num_clients)) < np.asarray(self.p)

    def run(self, strategy: Strategy, arrivals: np.ndarray, x0: torch.Tensor | None = None) -> np.ndarray:
        """Squared distance ||x_t - w*||^2 after each round (length = rounds)."""
        x = torch.zeros(self.b.shape[1], dtype=torch.float64) if x0 is None else x0.clone()
        w_star = self.optimum
        errors = np.empty(len(arrivals))
        for t, mask in enumerate(arrivals):
            active = np.flatnonzero(mask)
            updates = [ClientUpdate(int(i), 1, self.delta(int(i), x), t, self.lr) for i in active]
            context = RoundContext(
                round_index=t,
                sim_time_s=float(t),
                available=tuple(int(i) for i in active),
                selected=tuple(int(i) for i in active),
                delivered=tuple(range(len(active))),
            )
            x = as_aggregate(strategy.aggregate(x, updates, context), strategy).vector
            errors[t] = float(((x - w_star) ** 2).sum())
        return errors
