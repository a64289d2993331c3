"""Server optimisers: the server's step on the aggregated pseudo-gradient (``server.optimizer``).

Reddi, Charles, Zaheer, Garrett, Rush, Konecny, Kumar & McMahan, "Adaptive
Federated Optimization", ICLR 2021, Algorithm 2. An algorithm whose server
step is ``x <- x + Delta_t`` (FedAvg: Delta_t the weighted mean of the
arrived client updates y_i - x) hands Delta_t to the optimiser, which takes
the step instead. In netfl, Delta_t is the algorithm's next model minus the
current one, so any averaging rule (FedAvg, FedAU, FedProx, FedNova,
FedBuff, ...) feeds it, its own weights included; the algorithm's
``server_lr`` stays at 1 and ``lr`` here is the paper's eta. With
``m_{-1} = 0`` and ``v_{-1} = tau^2`` (the paper's ``v_{-1} >= tau^2``, at its
least):

    m_t = beta1 m_{t-1} + (1 - beta1) Delta_t
    FedAdagrad: v_t = v_{t-1} + Delta_t^2
    FedYogi:    v_t = v_{t-1} - (1 - beta2) Delta_t^2 sign(v_{t-1} - Delta_t^2)
    FedAdam:    v_t = beta2 v_{t-1} + (1 - beta2) Delta_t^2
    x_{t+1} = x_t + eta m_t / (sqrt(v_t) + tau)

element-wise. The paper has no bias correction; ``bias_correction: true``
(Adam only) adds Kingma & Ba's: m and v start at 0 and the step uses
``m_t / (1 - beta1^t)`` and ``v_t / (1 - beta2^t)``. ``bias_correction:
flower`` is Flower's FedAdam's variant: v from 0 and the step size
``eta sqrt(1 - beta2^(t+1)) / (1 - beta1^(t+1))``, tau outside the
correction (t the steps taken: Flower's round where every round applies
updates; tests/end_to_end/test_flower.py runs the two side by side).
FedAvgM (Hsu, Qi & Brown 2019): ``v_t = beta v_{t-1} + Delta_t``,
``x_{t+1} = x_t + eta v_t`` (v starts at 0, no (1 - beta) factor). ``sgd``:
``x_{t+1} = x_t + eta Delta_t``.

A step counts only when some update was applied: a round in which nothing
arrived leaves the model, the moments and t as they are (the paper's rounds
always have clients). The state (t, m, v) is kept in checkpoints with the
learner's. One optimiser per model (several with ``tasks:``).
"""

from __future__ import annotations

import math
import sys
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

from netfl.registry import implementations
from netfl.registry.algorithm_params import StrategyParams
from netfl.registry.server_optimizers import SERVER_OPTIMIZERS


@dataclass(frozen=True)
class ServerOptimizerChoice:
    """A ``server.optimizer`` as plain values (the assemble layer copies it): the optimiser's name and its
    parameters, validated against the registry's when the optimiser is built."""

    name: str
    params: Mapping[str, object] = field(default_factory=dict)


class ServerOptimizer:
    """The step ``x_{t+1}`` from ``x_t`` and the pseudo-gradient ``Delta_t`` (a plain server learning rate)."""

    def __init__(self, params: StrategyParams):
        self.params = params  # the registry's validated parameters of this optimiser (lr, beta1, ...)
        self.t = 0  # steps taken

    def step(self, x: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
        self.t += 1
        return x + self.params.lr * delta


class ServerSGD(ServerOptimizer):
    """x_{t+1} = x_t + eta Delta_t."""

    name = "sgd"


class ServerMomentum(ServerOptimizer):
    """FedAvgM: v_t = beta v_{t-1} + Delta_t (v_{-1} = 0), x_{t+1} = x_t + eta v_t."""

    name = "momentum"

    def __init__(self, params: StrategyParams):
        super().__init__(params)
        self.velocity: torch.Tensor | None = None

    def step(self, x: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
        self.t += 1
        self.velocity = delta.clone() if self.velocity is None else self.params.beta1 * self.velocity + delta
        return x + self.params.lr * self.velocity


class _Adaptive(ServerOptimizer, ABC):
    """Reddi et al.'s Algorithm 2; subclasses say how v_t follows from v_{t-1} and Delta_t^2."""

    def __init__(self, params: StrategyParams):
        super().__init__(params)
        self.bias_correction = getattr(params, "bias_correction", False)  # False, True or "flower"
        self.m: torch.Tensor | None = None
        self.v: torch.Tensor | None = None

    @abstractmethod
    def second_moment(self, v: torch.Tensor, squared: torch.Tensor) -> torch.Tensor:
        """v_t from v_{t-1} and Delta_t^2 (element-wise)."""

    def step(self, x: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
        p = self.params
        self.t += 1
        if self.m is None:
            self.m = torch.zeros_like(x)
            self.v = torch.zeros_like(x) if self.bias_correction else torch.full_like(x, p.tau**2)
        self.m = p.beta1 * self.m + (1 - p.beta1) * delta
        self.v = self.second_moment(self.v, delta * delta)
        m, v = self.m, self.v
        if self.bias_correction == "flower":  # Flower's FedAdam: the correction on the step size, tau outside it
            eta = p.lr * math.sqrt(1 - p.beta2 ** (self.t + 1)) / (1 - p.beta1 ** (self.t + 1))
            return x + eta * m / (v.sqrt() + p.tau)
        if self.bias_correction:
            m = m / (1 - p.beta1**self.t)
            v = v / (1 - p.beta2**self.t)
        return x + p.lr * m / (v.sqrt() + p.tau)


class ServerAdagrad(_Adaptive):
    """FedAdagrad: v_t = v_{t-1} + Delta_t^2."""

    name = "adagrad"

    def second_moment(self, v: torch.Tensor, squared: torch.Tensor) -> torch.Tensor:
        return v + squared


class ServerAdam(_Adaptive):
    """FedAdam: v_t = beta2 v_{t-1} + (1 - beta2) Delta_t^2."""

    name = "adam"

    def second_moment(self, v: torch.Tensor, squared: torch.Tensor) -> torch.Tensor:
        return self.params.beta2 * v + (1 - self.params.beta2) * squared


class ServerYogi(_Adaptive):
    """FedYogi: v_t = v_{t-1} - (1 - beta2) Delta_t^2 sign(v_{t-1} - Delta_t^2)."""

    name = "yogi"

    def second_moment(self, v: torch.Tensor, squared: torch.Tensor) -> torch.Tensor:
        return v - (1 - self.params.beta2) * squared * torch.sign(v - squared)


def build_server_optimizer(choice: ServerOptimizerChoice) -> ServerOptimizer:
    """The optimiser ``choice`` names, with its validated parameters (a fresh state)."""
    entry = SERVER_OPTIMIZERS.get(choice.name)
    if entry is None:
        raise ValueError(f"unknown server optimizer {choice.name!r}; accepted: {', '.join(SERVER_OPTIMIZERS)}")
    return SERVER_OPTIMIZER_CLASSES[choice.name](entry.params.model_validate(dict(choice.params)))


#: Each optimiser of the registry (:data:`netfl.registry.server_optimizers.SERVER_OPTIMIZERS`), in its order: the
#: class of this module that names it.
SERVER_OPTIMIZER_CLASSES: dict[str, type[ServerOptimizer]] = implementations(
    ServerOptimizer, SERVER_OPTIMIZERS, [sys.modules[__name__]]
)
