"""Energy bookkeeping for one device: a battery (or mains, capacity = inf)
drained by the loads that are on (idle, compute, transmit, receive).

Pure arithmetic on piecewise-constant power, no SimPy: the device process
tells it when loads switch on and off, and asks how long until empty under
the present loads, so the empty instant is exact rather than polled.
"""

from __future__ import annotations

import math


class Battery:
    def __init__(self, capacity_j: float = math.inf, level_j: float | None = None, min_level: float = 0.0):
        self.capacity_j = capacity_j
        self.level_j = capacity_j if level_j is None else level_j
        self.min_level = min_level
        self.loads: dict[str, float] = {}
        self.energy_j: dict[str, float] = {}  # consumed so far, by load name
        self._t = 0.0

    @property
    def mains(self) -> bool:
        return math.isinf(self.capacity_j)

    @property
    def power_w(self) -> float:
        return sum(self.loads.values())

    def settle(self, now: float) -> None:
        """Account for the energy drawn since the last call."""
        dt = now - self._t
        if dt < 0:
            raise ValueError(f"battery time went backwards: {self._t} -> {now}")
        if dt > 0:
            for name, watts in self.loads.items():
                self.energy_j[name] = self.energy_j.get(name, 0.0) + watts * dt
            if not self.mains:
                self.level_j = max(0.0, self.level_j - self.power_w * dt)
        self._t = now

    def set_load(self, now: float, name: str, watts: float) -> None:
        self.settle(now)
        if watts:
            self.loads[name] = watts
        else:
            self.loads.pop(name, None)

    def time_to_empty(self, now: float) -> float:
        """Seconds from ``now`` until the level reaches zero under the present loads."""
        self.settle(now)
        power = self.power_w
        if self.mains or power <= 0:
            return math.inf
        return self.level_j / power

    def fraction(self, now: float) -> float:
        self.settle(now)
        return 1.0 if self.mains else self.level_j / self.capacity_j

    def can_participate(self, now: float) -> bool:
        return self.fraction(now) > self.min_level if not self.mains else True

    @property
    def total_energy_j(self) -> float:
        return sum(self.energy_j.values())
