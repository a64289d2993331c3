"""The MIFA family: the server remembers every client's latest update.

Convention (the MIFA notes'): a client that trained from x to y with
learning rate gamma sends the gradient-like

    Delta_i = (x - y) / gamma = -delta_i / gamma          (delta = y - x)

and the server steps ``x <- x - eta * G_t`` (or ``- eta * v_t`` with
momentum). gamma is the lr the job trained with (``task.local.lr``, or its
scheduled value with ``lr_schedule: inverse_round``); eta is ``server_lr``,
by default the round's client lr gamma_t as in the reference code, which
makes ``x <- x + mean_i (stored delta_i)`` for a constant client lr.

Memory ``G`` is one stacked ``N x dim`` tensor (zeros at the start), in the
model's dtype and device. Per round, with A the clients whose update arrived:

- ``mifa``:   G_i <- Delta_i for i in A; others keep theirs.
- ``umifa``:  the round uses, for i in A, the unbiased estimate
              Ghat_i = Delta_i / p_i - (1/p_i - 1) * G_i   (E[Ghat_i] = Delta_i under Bernoulli(p_i))
              and G_i for the others; see UMIFA for what the table keeps afterwards.
- both:       G_t = (1/N) sum_{i=1..N} (Ghat_i or G_i),  x <- x - eta * G_t.
- ``mifam`` / ``umifam``: the same tables, then v_t = beta v_{t-1} + G_t, x <- x - eta * v_t (v_0 = 0).

Every ``aggregate`` call is one round; a round with no update still applies
the remembered G_t (and momentum). With ``wait_for_all`` (the reference
code's default for MIFA) the model is left as it is until every client's
update has arrived at least once; while waiting, each arriving Delta_i is
stored as is (the reference's table initialisation) whatever the variant,
and the round in which the last client first arrives applies the first
step. The reference trains *all* clients once when the table fills and
starts its lr decay there; here jobs keep the engine's round index.

Metrics of each round: ``updates`` (the clients whose update arrived, the
latest of each), ``in_memory`` (the clients whose update the table holds:
every one that has arrived at least once), ``stepped`` (1 when the round
moved the model, 0 while ``wait_for_all`` waits) and ``direction_norm``
(||G_t||, or ||v_t|| with momentum: the direction the step took; NaN without
a step).

FedAU's "MIFA" baseline (``x += eta_FedAU * mean_i of the last delta_i``, zero
start, no wait) is ``mifa`` with ``eta_FedAU = eta / gamma`` (so eta_FedAU = 1
is the default ``server_lr`` with a constant client lr).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from netfl.algorithms import Aggregate, ClientInfo, ClientUpdate, RoundContext, Strategy, norm
from netfl.algorithms.params import MIFAmParams, MIFAParams, UMIFAmParams, UMIFAParams


class _MemoryStrategy(Strategy):
    unbiased = False  # U-MIFA's estimates for the arrived clients
    momentum = False

    def __init__(self, params: MIFAParams, clients: ClientInfo):
        super().__init__(params, clients)
        self.memory: torch.Tensor | None = None  # G, N x dim, allocated at the first round
        self.velocity: torch.Tensor | None = None  # v, momentum variants only
        self.seen = np.zeros(self.num_clients, dtype=bool)
        self.filled = not self.params.wait_for_all  # whether rounds apply a step
        if self.unbiased:
            self._p = torch.tensor(self.probabilities, dtype=torch.float64)

    def _latest_per_client(self, updates: list[ClientUpdate]) -> list[ClientUpdate]:
        latest: dict[int, ClientUpdate] = {}
        for u in updates:  # a later update of the same client replaces an earlier one
            latest[u.client] = u
        return [latest[c] for c in sorted(latest)]

    def aggregate(self, x: torch.Tensor, updates: list[ClientUpdate], context: RoundContext) -> Aggregate:
        updates = self._latest_per_client(updates)
        if self.memory is None:
            self.memory = torch.zeros(self.num_clients, x.numel(), dtype=x.dtype, device=x.device)
        correction = None
        if updates:
            idx = torch.tensor([u.client for u in updates], dtype=torch.long, device=x.device)
            scale = torch.tensor([-1.0 / self.update_lr(u) for u in updates], dtype=x.dtype, device=x.device)
            fresh = scale[:, None] * torch.stack(
                [u.delta.to(dtype=x.dtype, device=x.device).reshape(-1) for u in updates]
            )  # Delta_i, |A| x dim
            if self.unbiased and self.filled:
                inv_p = (1.0 / self._p[idx.cpu()]).to(dtype=x.dtype, device=x.device)[:, None]
                change = fresh - self.memory[idx]  # Delta_i - G_i
                if self.params.store == "estimate":  # G_i <- Ghat_i = G_i + (Delta_i - G_i) / p_i
                    fresh = self.memory[idx] + inv_p * change
                else:  # G_i <- Delta_i, and this round uses Ghat_i = Delta_i + (1/p_i - 1)(Delta_i - G_i)
                    correction = ((inv_p - 1.0) * change).sum(dim=0) / self.num_clients
            self.memory[idx] = fresh
            self.seen[idx.cpu().numpy()] = True
        metrics = {"updates": len(updates), "in_memory": int(self.seen.sum()), "stepped": 0, "direction_norm": math.nan}
        if not self.filled:
            if not self.seen.all():
                return Aggregate(x, metrics)
            self.filled = True
        g = self.memory.mean(dim=0)
        if correction is not None:
            g = g + correction
        if self.momentum:
            self.velocity = g if self.velocity is None else self.params.beta * self.velocity + g
            g = self.velocity
        eta = (
            self.params.server_lr if self.params.server_lr is not None else self.clients.client_lr(context.round_index)
        )
        metrics.update(stepped=1, direction_norm=norm(g))
        return Aggregate(x - eta * g.view_as(x), metrics)


class MIFA(_MemoryStrategy):
    """MIFA: the mean over all N clients of each one's latest update.

    Rule: Delta_i = -delta_i / gamma_i; G_i <- Delta_i if client i's update
    arrived this round, else G_i stays; G_t = (1/N) sum_i G_i;
    x <- x - eta * G_t. Memory starts at zero (``wait_for_all: false``) or the
    model waits until every client has been seen once (``true``, the
    reference's default). eta = ``server_lr`` or, omitted, gamma_t. Equal to
    FedAU's "MIFA" baseline with eta_FedAU = eta / gamma. See the module
    docstring for the conventions.
    """

    name = "mifa"
    Params = MIFAParams


class UMIFA(_MemoryStrategy):
    """U-MIFA: MIFA made unbiased under Bernoulli(p_i) participation.

    Rule: Delta_i = -delta_i / gamma_i. For each client i whose update
    arrived, the round uses the estimate

        Ghat_i = Delta_i / p_i - (1/p_i - 1) * G_i        (E[Ghat_i] = Delta_i whatever G_i)

    and the others their remembered G_i; G_t = (1/N) sum_i (Ghat_i or G_i);
    x <- x - eta * G_t. Needs every client's p (``ClientInfo.participation``).
    eta = ``server_lr`` or, omitted, gamma_t.

    What the table keeps (``store``): the notes write the recursion with the
    estimate stored, ``G_i <- Ghat_i`` (``store: estimate``). Then
    E||G_i - Delta_i||^2 grows by the factor (1 - p_i)/p_i each round (9 for
    p = 0.1) and the model diverges whenever some p_i < 1/2. The default
    ``store: update`` keeps ``G_i <- Delta_i`` (MIFA's table) and uses Ghat_i
    for the round only: SAGA with Bernoulli sampling, the method the notes'
    "SAGA/U-MIFA" analysis covers (it bounds the table by past gradients). Both
    have E[G_t] = (1/N) sum_i Delta_i; they differ in what later rounds remember.
    """

    name = "umifa"
    Params = UMIFAParams
    unbiased = True


class MIFAm(_MemoryStrategy):
    """MIFAm: MIFA with heavy-ball momentum on the server.

    Rule: MIFA's table and G_t, then v_t = beta * v_{t-1} + G_t (v = 0 before
    the first step), x <- x - eta * v_t. eta = ``server_lr`` or, omitted,
    gamma_t.
    """

    name = "mifam"
    Params = MIFAmParams
    momentum = True


class UMIFAm(_MemoryStrategy):
    """U-MIFAm: U-MIFA with heavy-ball momentum on the server.

    Rule: U-MIFA's G_t (and ``store`` option), then v_t = beta * v_{t-1} + G_t
    (v = 0 before the first step), x <- x - eta * v_t. Needs every client's p.
    eta = ``server_lr`` or, omitted, gamma_t.
    """

    name = "umifam"
    Params = UMIFAmParams
    unbiased = True
    momentum = True
