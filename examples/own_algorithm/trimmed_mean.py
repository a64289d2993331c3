"""Coordinate-wise trimmed mean, written against netfl's public strategy API only.

Yin, Chen, Ramchandran & Bartlett, "Byzantine-Robust Distributed Learning: Towards Optimal Statistical Rates",
ICML 2018. Of the n updates that arrived, each coordinate drops its k = floor(trim * n) largest and k smallest
values and averages the rest: a few corrupted updates (a faulty or malicious device) cannot drag the model
further than the honest ones reach. The rule keeps no state, so edge servers may run it too (``edge_rule``).

Metrics: ``updates`` (n) and ``trimmed`` (2k, the values dropped per coordinate).
"""

from __future__ import annotations

import math

import torch
from pydantic import Field

from netfl.algorithms import Aggregate, ClientUpdate, RoundContext, Strategy, StrategyParams


class TrimmedMeanParams(StrategyParams):
    trim: float = Field(0.1, ge=0, lt=0.5, description="fraction of the updates trimmed at each end, per coordinate")


class TrimmedMean(Strategy):
    """Coordinate-wise trimmed mean of the updates: ``x <- x + mean of delta_k[k:n-k]`` per coordinate."""

    Params = TrimmedMeanParams
    paper = "Yin et al., Byzantine-Robust Distributed Learning, ICML 2018"
    edge_rule = True

    def aggregate(self, x: torch.Tensor, updates: list[ClientUpdate], context: RoundContext) -> Aggregate:
        n = len(updates)
        if not n:
            return Aggregate(x, {"updates": 0, "trimmed": 0})
        k = math.floor(self.params.trim * n)
        deltas = torch.stack([u.delta.to(dtype=x.dtype, device=x.device).view_as(x) for u in updates])
        kept = deltas.sort(dim=0).values[k : n - k]
        return Aggregate(x + kept.mean(dim=0), {"updates": n, "trimmed": 2 * k})
