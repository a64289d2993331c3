"""Anarchic Federated Averaging: AFA-CD (cross-device) and AFA-CS (cross-silo).

Workers decide by themselves when to pull the model and how many local
steps K to run; the server combines whatever arrived, each update as stale
as it happens to be (in netfl the staleness comes out of the simulated
devices, availability and network; ``mode: async`` makes every device such
a worker, ``async.local_steps`` draws each job's K).

Worker update (the slides' step 3): a worker that pulled x and ran K plain
SGD steps at the client lr eta_L returns the mean of its K stochastic
gradients,

    G_i = (1/K) sum_{k<K} g_k = (x - y_i) / (K eta_L) = -delta_i / (K eta_L)      (delta = y - x)

recovered here from the learner's ``delta`` with the job's own K
(``ClientUpdate.steps``) and eta_L (``ClientUpdate.lr``). With weight decay
the g_k are gradients of the regularised loss.

Server step, learning-rate convention: the slides print
``x_{t+1} = x_t - eta G_t``, but the convergence rate is stated in
``eta * eta_L`` (theory: eta_L = 1/sqrt(T), eta = sqrt(mK) for CD, sqrt(MK)
for CS), i.e. the step actually taken is

    x_{t+1} = x_t - eta * eta_L * G_t

and that is the rule here: eta = ``server_lr``, eta_L = the client lr of the
current round (``task.local.lr``, or its scheduled value). So eta = 1
moves the model by one averaged local step; eta = K (all K equal) makes
AFA-CD with fresh updates exactly FedAvg with uniform weights.

Modes: written for ``server.mode: async`` (arrivals of ``async.buffer`` = m
updates per round, each with its own staleness and K). ``mode: sync`` works
too and is the non-anarchic special case: every round's updates are fresh
and K is the task's (per client with ``epochs``); with a deadline or a RAM
relay only what arrived is used.

Metrics of each server iteration: ``updates`` (m, those that arrived),
``staleness_mean`` and ``staleness_max`` (tau_i: the server's model version
minus the one each update started from), ``steps_mean`` (the mean K_i; NaN
without an update) and ``gradient_norm`` (||G_t||, the step's direction:
the mean of the arrived G_i for CD, of every worker's latest for CS; NaN
without a step).
"""

from __future__ import annotations

import math

import torch

from netfl.algorithms import Aggregate, ClientInfo, ClientUpdate, RoundContext, Strategy, norm, staleness_metrics
from netfl.algorithms.params import AFAParams


class _AFABase(Strategy):
    Params = AFAParams

    def gradients(self, x: torch.Tensor, updates: list[ClientUpdate]) -> torch.Tensor:
        """G_i = -delta_i / (K_i eta_L,i) of each update, stacked (|updates| x dim)."""
        scale = torch.tensor(
            [-1.0 / (self.update_steps(u) * self.update_lr(u)) for u in updates], dtype=x.dtype, device=x.device
        )
        deltas = torch.stack([u.delta.to(dtype=x.dtype, device=x.device).reshape(-1) for u in updates])
        return scale[:, None] * deltas

    def step(self, x: torch.Tensor, g: torch.Tensor, context: RoundContext) -> torch.Tensor:
        eta_l = self.clients.client_lr(context.round_index)
        return x - (self.params.server_lr * eta_l) * g.view_as(x)

    def metrics(self, updates: list[ClientUpdate], context: RoundContext, g: torch.Tensor | None) -> dict[str, float]:
        """The iteration's metrics (module docstring); ``g`` is G_t, None without a step."""
        steps = [self.update_steps(u) for u in updates]
        return {
            "updates": len(updates),
            **staleness_metrics(updates, context),
            "steps_mean": sum(steps) / len(steps) if steps else math.nan,
            "gradient_norm": norm(g) if g is not None else math.nan,
        }


class AFACD(_AFABase):
    """AFA-CD: step on the mean of the (stale) updates that arrived.

    Rule: for the m updates that arrived this round (each started from some
    older model x_{t - tau_i} and ran its own K_i steps at eta_L),
    G_i = -delta_i / (K_i eta_L), G_t = (1/m) sum_i G_i,
    x_{t+1} = x_t - eta * eta_L * G_t (eta = ``server_lr``, eta_L = the
    round's client lr; the slides print only eta, see the module docstring).
    No update: the model stays. Works in ``mode: async`` (the anarchic
    setting) and ``mode: sync`` (fresh updates).
    """

    name = "afa_cd"

    def aggregate(self, x: torch.Tensor, updates: list[ClientUpdate], context: RoundContext) -> Aggregate:
        if not updates:
            return Aggregate(x, self.metrics(updates, context, None))
        g = self.gradients(x, updates).mean(dim=0)
        return Aggregate(self.step(x, g, context), self.metrics(updates, context, g))


class AFACS(_AFABase):
    """AFA-CS: step on the mean over all M workers of each one's latest update.

    Rule: G_i = -delta_i / (K_i eta_L) for each update that arrived; the
    server's memory keeps the latest G_i of every worker (zeros before a
    worker's first arrival; when one round holds several updates of the same
    worker, the later arrival wins); G_t = (1/M) sum_{i=1..M} G_i;
    x_{t+1} = x_t - eta * eta_L * G_t (eta = ``server_lr``, eta_L = the
    round's client lr). A round in which nothing arrived leaves the model
    as it is (a server iteration is triggered by arrivals). Works in
    ``mode: async`` and ``mode: sync``.
    """

    name = "afa_cs"

    def __init__(self, params: AFAParams, clients: ClientInfo):
        super().__init__(params, clients)
        self.memory: torch.Tensor | None = None  # M x dim, zeros until a worker's first update

    def aggregate(self, x: torch.Tensor, updates: list[ClientUpdate], context: RoundContext) -> Aggregate:
        if self.memory is None:
            self.memory = torch.zeros(self.num_clients, x.numel(), dtype=x.dtype, device=x.device)
        if not updates:
            return Aggregate(x, self.metrics(updates, context, None))
        g = self.gradients(x, updates)
        for row, u in enumerate(updates):  # in arrival order: a later update of the same worker replaces it
            self.memory[u.client] = g[row]
        mean = self.memory.mean(dim=0)
        return Aggregate(self.step(x, mean, context), self.metrics(updates, context, mean))
