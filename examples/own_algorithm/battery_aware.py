"""A battery-aware selection rule over FedAvg, written against netfl's public strategy API only.

Each round the server asks the ``participants`` eligible devices with the most energy: those charging first
(or on mains power), then by battery level, highest first, ties broken at random by the run's selection
stream (so the seed decides). A device below ``min_battery`` is skipped unless it is charging: training would
drain it. Aggregation is FedAvg's, ``x <- x + sum_k (n_k / sum_j n_j) delta_k``. Outside a simulation (no
device states) the choice is uniform.

Metrics: ``updates`` and ``samples`` (their sum of n_k), as FedAvg's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from pydantic import Field

from netfl.algorithms import (
    Aggregate,
    ClientUpdate,
    DeviceStates,
    RoundContext,
    Strategy,
    StrategyParams,
    data_weights,
    sample_uniform,
    weighted_sum,
)


class BatteryAwareParams(StrategyParams):
    min_battery: float = Field(
        0.3, ge=0, le=1, description="battery fraction below which a device not charging is not asked"
    )


class BatteryAware(Strategy):
    """FedAvg over the fullest batteries: charging devices first, then by charge; none below ``min_battery``."""

    Params = BatteryAwareParams

    def select(
        self,
        round_index: int,
        available: Sequence[int],
        participants: int | None,
        rng: np.random.Generator,
        devices: DeviceStates | None = None,
    ) -> list[tuple[int, int]]:
        if devices is None:
            return [(client, 0) for client in sample_uniform(available, participants, rng)]
        battery = np.asarray(devices.battery, dtype=float)
        mains = np.isnan(battery)  # no battery: as good as charging
        charging = np.asarray(devices.charging, dtype=bool) | mains
        level = np.where(mains, 1.0, battery)
        eligible = np.flatnonzero(charging | (level >= self.params.min_battery))
        tiebreak = rng.random(len(available))  # one draw per round, whoever is eligible
        order = eligible[np.lexsort((tiebreak[eligible], -level[eligible], ~charging[eligible]))]
        chosen = order if participants is None else order[:participants]
        return [(int(available[i]), 0) for i in np.sort(chosen)]

    def aggregate(self, x: torch.Tensor, updates: list[ClientUpdate], context: RoundContext) -> Aggregate:
        metrics = {"updates": len(updates), "samples": sum(u.num_samples for u in updates)}
        if not updates:
            return Aggregate(x, metrics)
        return Aggregate(x + weighted_sum(updates, data_weights(updates, "samples"), x), metrics)
