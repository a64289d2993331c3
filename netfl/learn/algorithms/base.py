"""The strategy interface every FL algorithm implements.

In the spirit of Flower's ``Strategy``: a strategy decides how the server
combines the updates that reached it (and, as algorithms need it, what a
client optimises locally). The engine never sees a strategy: it talks to
the learner, which calls the strategy at each aggregation with flat
parameter vectors.

Conventions (as in the papers): ``delta = y - x`` is a client's end-of-
training vector minus the vector it started from; the client learning rate
(``task.local.lr``, gamma) and the server learning rate (``server_lr``,
eta) are kept apart.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import torch
from pydantic import BaseModel, ConfigDict

from netfl.backend import RoundContext


class StrategyParams(BaseModel):
    """Base of every strategy's ``Params``: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class ClientInfo:
    """What the server may know about the clients when the strategy is built."""

    sizes: tuple[int, ...]  # local data set sizes n_i
    local_lr: float  # the client learning rate gamma (task.local.lr)
    # p_i of each client's availability policy where it has one (FedAU's "known statistics", MIFA's
    # unbiased variants); None where the policy has no such parameter.
    participation: tuple[float | None, ...] | None = None


@dataclass(frozen=True)
class ClientUpdate:
    client: int
    num_samples: int
    delta: torch.Tensor  # y - x, flat
    start_version: int  # the global model version the client started from


class Strategy(ABC):
    name: ClassVar[str]
    paper: ClassVar[str]
    Params: ClassVar[type[StrategyParams]] = StrategyParams

    def __init__(self, params: StrategyParams, clients: ClientInfo):
        self.params = params
        self.clients = clients

    @property
    def client_sizes(self) -> tuple[int, ...]:
        return self.clients.sizes

    @property
    def num_clients(self) -> int:
        return len(self.clients.sizes)

    @abstractmethod
    def aggregate(self, x: torch.Tensor, updates: list[ClientUpdate], context: RoundContext) -> torch.Tensor:
        """The next global vector from the current one and the updates that arrived (possibly none)."""
