"""Energy bookkeeping for one device: a battery (or mains, capacity = inf)
drained by the loads that are on (idle, compute, transmit, receive) and
refilled by a charger while plugged in.

Pure arithmetic on piecewise-constant power, no SimPy: the device process
tells it when loads switch and the charger is plugged or unplugged, and
asks when the level will next reach a mark (empty, full, a threshold), so
those instants are exact rather than polled. While charging, the charger
feeds the loads first; a full battery stays full.
"""

from __future__ import annotations

import math


class Battery:
    def __init__(
        self,
        capacity_j: float,
        level_j: float | None = None,
        min_level: float = 0.0,
        charge_w: float = 0.0,
        now: float = 0.0,
    ):
        self.capacity_j = capacity_j
        self.level_j = capacity_j if level_j is None else level_j
        self.min_level = min_level
        self.charge_w = charge_w
        self.charging = False
        self.loads: dict[str, float] = {}
        self.energy_j: dict[str, float] = {}  # consumed so far, by load name
        self.charged_j = 0.0  # energy that went into the battery from the charger
        self.logged_w = 0.0  # the logged levels' power (netfl/sim/logged_levels.py): > 0 falling, < 0 rising
        self._t = now  # energy is accounted from here on

    @classmethod
    def on_mains(cls, now: float = 0.0) -> Battery:
        """A mains-powered device's: infinite capacity, never empties (the topology's group without a battery;
        a battery's own default capacity is the topology's, not this)."""
        return cls(math.inf, now=now)

    @property
    def mains(self) -> bool:
        return math.isinf(self.capacity_j)

    @property
    def power_w(self) -> float:
        """Total power drawn by the loads."""
        return sum(self.loads.values())

    @property
    def net_drain_w(self) -> float:
        """Rate at which the level falls (negative while the charger, or a logged rise, out-supplies the loads)."""
        drain = self.power_w - (self.charge_w if self.charging else 0.0)
        return drain + self.logged_w if self.logged_w else drain

    def settle(self, now: float) -> None:
        """Account for the energy drawn and charged since the last call."""
        dt = now - self._t
        if dt < 0:
            raise ValueError(f"battery time went backwards: {self._t} -> {now}")
        if dt > 0:
            for name, watts in self.loads.items():
                self.energy_j[name] = self.energy_j.get(name, 0.0) + watts * dt
            if not self.mains:
                before = self.level_j
                self.level_j = min(self.capacity_j, max(0.0, self.level_j - self.net_drain_w * dt))
                self.charged_j += max(0.0, self.level_j - before)
        self._t = now

    def energy_at(self, now: float) -> dict[str, float]:
        """Energy consumed by each load up to ``now``, as :meth:`settle` would account it (the same float sums),
        without settling: a settle mid-run would split the later sums and move the results."""
        energy = dict(self.energy_j)
        dt = now - self._t
        if dt > 0:
            for name, watts in self.loads.items():
                energy[name] = energy.get(name, 0.0) + watts * dt
        return energy

    def set_load(self, now: float, name: str, watts: float) -> None:
        self.settle(now)
        if watts:
            self.loads[name] = watts
        else:
            self.loads.pop(name, None)

    def set_logged(self, now: float, watts: float) -> None:
        """The logged levels' power from ``now`` on (not a load: no energy is accounted to it)."""
        self.settle(now)
        self.logged_w = watts

    def set_charging(self, now: float, charging: bool) -> None:
        self.settle(now)
        self.charging = charging

    def time_to_level(self, now: float, level_j: float) -> float:
        """Seconds from ``now`` until the level reaches ``level_j`` at the present rates (inf if never)."""
        self.settle(now)
        if self.mains:
            return math.inf
        drain = self.net_drain_w
        gap = self.level_j - level_j
        if gap == 0:  # already at the mark: the next crossing is computed once the level moves
            return math.inf
        if drain == 0 or (gap > 0) != (drain > 0):
            return math.inf
        return gap / drain

    def time_to_empty(self, now: float) -> float:
        return self.time_to_level(now, 0.0)

    def time_to_full(self, now: float) -> float:
        return math.inf if self.mains or self.level_j >= self.capacity_j else self.time_to_level(now, self.capacity_j)

    def level_at(self, now: float) -> float:
        """The charge at ``now`` (J), as :meth:`settle` would leave it, without settling (a look from outside,
        such as the timeline's, must not split the float sums the run accounts)."""
        if self.mains:
            return math.inf
        dt = max(now - self._t, 0.0)
        return min(self.capacity_j, max(0.0, self.level_j - self.net_drain_w * dt))

    def fraction(self, now: float) -> float:
        self.settle(now)
        return 1.0 if self.mains else self.level_j / self.capacity_j

    @property
    def total_energy_j(self) -> float:
        return sum(self.energy_j.values())
