"""FedAvg (McMahan et al., 2017) with a separate server learning rate.

x <- x + eta * sum_k w_k delta_k over the updates that arrived, with
w_k = n_k / sum_j n_j ("samples", the original) or 1 / |arrived|
("uniform", FedAU's "average participating" baseline). With no update the
model stays as it is.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field

from netfl.backend import RoundContext
from netfl.learn.algorithms.base import ClientUpdate, Strategy, StrategyParams


class FedAvg(Strategy):
    name = "fedavg"
    paper = "McMahan et al., Communication-Efficient Learning of Deep Networks from Decentralized Data, AISTATS 2017"

    class Params(StrategyParams):
        server_lr: float = Field(1.0, gt=0, description="eta: scales the averaged update")
        weighting: Literal["samples", "uniform"] = Field("samples", description="weight by local data size or equally")

    def aggregate(self, x: torch.Tensor, updates: list[ClientUpdate], context: RoundContext) -> torch.Tensor:
        if not updates:
            return x
        if self.params.weighting == "samples":
            weights = torch.tensor([u.num_samples for u in updates], dtype=x.dtype)
        else:
            weights = torch.ones(len(updates), dtype=x.dtype)
        weights = weights / weights.sum()
        deltas = torch.stack([u.delta for u in updates])
        return x + self.params.server_lr * (weights @ deltas)
