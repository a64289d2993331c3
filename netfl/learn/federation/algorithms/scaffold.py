"""SCAFFOLD: stochastic controlled averaging, with option II control variates.

Karimireddy, Kale, Mohri, Reddi, Stich & Suresh, "SCAFFOLD: Stochastic
Controlled Averaging for Federated Learning", ICML 2020 (Algorithm 1). The
server keeps a control variate c, every client i its own c_i, all zero at
first. A sampled client receives (x, c) and runs K local steps corrected for
its drift,

    y_i <- y_i - eta_l (g_i(y_i) - c_i + c)

then forms (option II) ``c_i+ = c_i - c + (x - y_i) / (K eta_l)`` and sends
``(Delta y_i, Delta c_i) = (y_i - x, c_i+ - c_i)``. Over the set S of updates
that arrived, of N clients:

    x <- x + eta_g mean_S Delta y_i,      c <- c + (|S| / N) mean_S Delta c_i

In netfl, c - c_i is the job's gradient :class:`~netfl.learn.training.objective.Correction`,
fixed when the job starts (what the client downloaded; a stale job keeps its
own). The strategy holds the client-side state: every c_i, stored only for
clients that have delivered an update (the others are zero). Delta c_i is
formed at aggregation from the job's Delta y_i, K and eta_l and the c and c_i
it trained with -- the numbers the client would send -- and both directions
carry two model-sized vectors (x and c down, Delta y_i and Delta c_i up),
which the simulated network times. A client's c_i changes when its update
arrives: a lost upload leaves it as it was (the client commits c_i+ on the
server's acknowledgement), so c stays the mean of all the c_i. With
c = c_i = 0 (the first round) the local steps are plain SGD and the round is
FedAvg's with uniform weights.

Metrics of each aggregation: ``updates`` (|S|), ``control_norm`` (||c||
after it: how far the server's estimate of the mean gradient is from zero)
and ``control_change_norm`` (||(|S|/N) mean_S Delta c_i||, how far c moved;
0 without an update).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from netfl.algorithms import Aggregate, ClientInfo, ClientUpdate, Correction, RoundContext, Strategy, norm, weighted_sum
from netfl.algorithms.params import ScaffoldParams


@dataclass(frozen=True)
class Control(Correction):
    """SCAFFOLD's correction, shift = c - c_i, with the c and c_i the client received (to form Delta c_i)."""

    server: torch.Tensor | None = None  # c
    own: torch.Tensor | None = None  # c_i


class Scaffold(Strategy):
    """SCAFFOLD: local gradients corrected by c - c_i; model and control variates averaged on the server.

    Rule, client: K local SGD steps ``y <- y - lr (g(y) + c - c_i)`` from x (plus the task's weight decay;
    K and lr the job's own), then ``c_i+ = c_i - c + (x - y) / (K lr)`` (option II). Server, over the
    updates S that arrived: ``x <- x + eta * mean_S (y_i - x)`` (eta = ``server_lr``) and
    ``c <- c + (|S| / N) mean_S (c_i+ - c_i)``. Twice the model's bytes travel each way.
    """

    name = "scaffold"
    Params = ScaffoldParams

    def __init__(self, params: ScaffoldParams, clients: ClientInfo):
        super().__init__(params, clients)
        self.c: torch.Tensor | None = None  # the server's control variate (None: zero)
        self.c_local: dict[int, torch.Tensor] = {}  # c_i of the clients that delivered an update (others: zero)

    def correction(self, client: int, task: int) -> Control | None:
        own = self.c_local.get(client)
        if self.c is None and own is None:
            return None  # c = c_i = 0: plain local SGD
        server = self.c if self.c is not None else torch.zeros_like(own)
        own = own if own is not None else torch.zeros_like(server)
        return Control(shift=server - own, server=server, own=own)

    def download_bytes(self, model_bytes: float) -> float:
        return 2 * model_bytes  # x and c

    def upload_bytes(self, model_bytes: float) -> float:
        return 2 * model_bytes  # Delta y_i and Delta c_i

    def aggregate(self, x: torch.Tensor, updates: list[ClientUpdate], context: RoundContext) -> Aggregate:
        if not updates:
            return Aggregate(x, {"updates": 0, "control_norm": norm(self.c), "control_change_norm": 0.0})
        change = torch.zeros_like(x)  # sum over S of Delta c_i
        for u in updates:
            sent = u.correction if isinstance(u.correction, Control) else None  # None: c = c_i = 0 were sent
            server = sent.server.to(x) if sent is not None else torch.zeros_like(x)
            own = sent.own.to(x) if sent is not None else torch.zeros_like(x)
            delta = u.delta.to(dtype=x.dtype, device=x.device).view_as(x)
            step = -(server + delta / (self.update_steps(u) * self.update_lr(u)))  # c_i+ - c_i
            self.c_local[u.client] = own + step
            change += step
        self.c = change / self.num_clients if self.c is None else self.c + change / self.num_clients
        n = len(updates)
        metrics = {
            "updates": n,
            "control_norm": norm(self.c),
            "control_change_norm": norm(change / self.num_clients),
        }
        return Aggregate(x + self.params.server_lr * weighted_sum(updates, [1 / n] * n, x), metrics)
