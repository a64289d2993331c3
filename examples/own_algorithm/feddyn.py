"""FedDyn: federated learning with dynamic regularisation, written against netfl's public strategy API only.

Acar, Zhao, Matas, Mattina, Whatmough & Saligrama, "Federated Learning Based on Dynamic Regularization",
ICLR 2021 (Algorithm 1). Client i keeps the linear term g_i (the gradient of its loss at its last local model,
zero at first) and minimises

    L_i(w) - <g_i, w> + alpha/2 ||w - x||^2        (x: the global model it received)

so each local gradient gets ``alpha (w - x) - g_i``: a :class:`~netfl.algorithms.Correction` with
``pull = alpha`` and ``shift = -g_i``. After training to y_i it sets ``g_i <- g_i - alpha (y_i - x)``. Over the
clients S whose updates arrived, of N, the server keeps h (zero at first):

    h <- h - alpha (1/N) sum_S (y_i - x),      x <- mean_S y_i - h / alpha

The strategy holds the client-side g_i (in a :class:`~netfl.algorithms.ClientStates`, only for clients that
delivered an update: the others are zero) and updates one when its client's update arrives, from the g_i the
job trained with (a lost upload leaves it as it was). With no update the model stays as it is.

Metrics: ``updates`` (|S|), ``clients_in_memory`` (how many g_i are stored) and ``h_norm`` (||h||).
Run it: ``netfl simulate examples/own_algorithm/world.yaml``.
"""

from __future__ import annotations

import torch
from pydantic import Field

from netfl.algorithms import (
    Aggregate,
    ClientInfo,
    ClientStates,
    ClientUpdate,
    Correction,
    RoundContext,
    Strategy,
    StrategyParams,
    norm,
)


class FedDynParams(StrategyParams):
    alpha: float = Field(0.01, gt=0, description="the dynamic regulariser's weight alpha")


class FedDyn(Strategy):
    """FedDyn: local objectives with a dynamic linear term and a proximal pull; server state h (module text)."""

    Params = FedDynParams
    paper = "Acar et al., Federated Learning Based on Dynamic Regularization, ICLR 2021"
    client_state = 1  # g_i
    mode = "sync"  # every update must start from the x it is combined with

    def __init__(self, params: FedDynParams, clients: ClientInfo):
        super().__init__(params, clients)
        self.g = ClientStates()  # g_i of the clients that delivered an update
        self.h: torch.Tensor | None = None  # the server's h (None: zero)

    def correction(self, client: int, task: int) -> Correction:
        g = self.g.get(client)
        return Correction(pull=self.params.alpha, shift=None if g is None else -g)

    def aggregate(self, x: torch.Tensor, updates: list[ClientUpdate], context: RoundContext) -> Aggregate:
        alpha = self.params.alpha
        if updates:
            total = torch.zeros_like(x)  # sum_S (y_i - x)
            for u in updates:
                delta = u.delta.to(dtype=x.dtype, device=x.device).view_as(x)
                sent = u.correction.shift if u.correction is not None else None  # -g_i the job trained with
                g = -sent.to(x) if sent is not None else torch.zeros_like(x)
                self.g[u.client] = g - alpha * delta
                total += delta
            self.h = (torch.zeros_like(x) if self.h is None else self.h) - alpha * total / self.num_clients
            x = x + total / len(updates) - self.h / alpha
        metrics = {"updates": len(updates), "clients_in_memory": len(self.g), "h_norm": norm(self.h)}
        return Aggregate(x, metrics)
