"""FedProx: FedAvg with a proximal term in every client's local objective.

Li, Sahu, Zaheer, Sanjabi, Talwalkar & Smith, "Federated Optimization in
Heterogeneous Networks", MLSys 2020. A client k that received the global
model w^t minimises, instead of its loss F_k(w),

    h_k(w; w^t) = F_k(w) + mu/2 ||w - w^t||^2

by local SGD, so each step is ``w <- w - lr (grad F_k(w) + mu (w - w^t))``:
the term keeps local models from drifting far from the global one when the
clients' data differ (mu = 0 is FedAvg). It is a gradient
:class:`~netfl.learn.training.objective.Correction` with pull mu, applied by every
training kernel; w^t is the model the job started from (a stale job's own).

The server aggregates as FedAvg does (``weighting``, ``server_lr``). The
paper's Algorithm 2 samples devices with probability p_k and averages their
models uniformly; its experiments instead sample uniformly and weight the
models by their numbers of local samples, as FedAvg does -- netfl's uniform
selection with ``weighting: samples`` (the default). Variable amounts of local
work per device (the paper's gamma-inexactness) come from the scenario:
``async.local_steps`` or epochs over unequal data sets.
"""

from __future__ import annotations

from netfl.learn.federation.algorithms.base import ClientInfo
from netfl.learn.federation.algorithms.fedavg import FedAvg
from netfl.learn.training.objective import Correction
from netfl.registry.algorithm_params import FedProxParams


class FedProx(FedAvg):
    """FedProx: clients minimise F_k(w) + mu/2 ||w - w_global||^2; the server averages as FedAvg.

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
