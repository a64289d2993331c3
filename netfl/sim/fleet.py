"""The server's view of all devices: who is eligible now, and the actor of a device it asks to work.

The two forms of the engine behind one interface (netfl/config/engine_form.py chooses):

* :class:`EagerFleet` -- the actor form: every device is a
  :class:`~netfl.sim.device.Device` from the start, with its own SimPy
  processes; every online/offline change, battery mark, charger plug and
  session of use is an event in the log, at a few kilobytes and some Python
  work per device and change. Needed for per-device policy classes and edge
  servers.
* :class:`~netfl.sim.lazy_fleet.LazyFleet` (netfl/sim/lazy_fleet.py) --
  the array form: idle devices are rows
  (:class:`~netfl.sim.idle_rows.IdleRows`: availability, chargers and the
  owner's use as population models, batteries in closed form), advanced only
  when the server asks; a device becomes a ``Device`` only while it works,
  with views of its rows, and is folded back when its work ends. A million
  devices cost a few hundred bytes each; the event log holds the work (and,
  if asked, the idle devices' events, which the rows log:
  netfl/sim/idle_events.py), and online time, energy and battery levels are
  exact per device.

Both draw the same world from one seed (tests/engine/test_one_world.py) and
report it alike (netfl/sim/fleet_readings.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from netfl.sim.device import Device
from netfl.sim.fleet_readings import (
    DeviceStats,
    FleetState,
    battery_fraction,
    energy_by_activity,
    fleet_energy_j,
    group_indices,
)


class Fleet(Protocol):
    def __len__(self) -> int: ...

    def eligible(self, round_index: int) -> np.ndarray:
        """Indices (ascending) of the devices that can be asked to train at the start of ``round_index``."""

    def __getitem__(self, index: int) -> Device:
        """The device's actor (the lazy fleet brings it to life)."""

    def activate(self, indices: Sequence[int]) -> None:
        """These devices are about to work (the lazy fleet brings them to life together)."""

    def release(self, indices: Sequence[int]) -> None:
        """The round is over for these devices (the lazy fleet folds idle ones back into its arrays)."""

    def stats(self) -> DeviceStats:
        """Per-device totals up to now."""

    def energy_spent_at(self, now: float) -> tuple[float, float]:
        """The fleet's energy drawn up to ``now`` (the present), all of it and FL's work alone (as
        :func:`~netfl.sim.fleet_readings.fleet_energy_j` sums ``stats()``'s at that instant, to the bit), settling
        nothing: metrics.csv's cumulative energy, read at every evaluation."""

    def state_at(self, now: float) -> FleetState:
        """Every device at ``now`` (the present), settling and drawing nothing."""

    def halt(self) -> None:
        """The run was interrupted (perhaps inside a policy): ``stats()`` asks no policy anything more."""


class EagerFleet:
    """Every device a live actor, as built."""

    def __init__(self, devices: Sequence[Device]):
        self.devices = list(devices)

    def __len__(self) -> int:
        return len(self.devices)

    def __getitem__(self, index: int) -> Device:
        return self.devices[index]

    def __iter__(self):
        return iter(self.devices)

    def eligible(self, round_index: int) -> np.ndarray:
        return np.fromiter((d.index for d in self.devices if d.eligible(round_index)), dtype=np.int64)

    def activate(self, indices: Sequence[int]) -> None:
        pass

    def release(self, indices: Sequence[int]) -> None:
        pass

    def halt(self) -> None:
        pass  # every device is settled as it stands: no policy is asked

    def stats(self) -> DeviceStats:
        for d in self.devices:
            d.settle()
        energy = energy_by_activity([d.battery.energy_j for d in self.devices])
        return DeviceStats(
            **group_indices([d.profile.group for d in self.devices]),
            tasks_started=np.array([d.tasks_started for d in self.devices]),
            updates_delivered=np.array([d.updates_delivered for d in self.devices]),
            online_time_s=np.array([d.online_time_s for d in self.devices]),
            energy_by_activity_j=energy,
            charged_j=np.array([d.battery.charged_j for d in self.devices]),
            battery_fraction=np.array(
                [math.nan if d.battery.mains else d.battery.level_j / d.battery.capacity_j for d in self.devices]
            ),
            battery_empty=np.array([d.dead for d in self.devices]),
        )

    def energy_spent_at(self, now: float) -> tuple[float, float]:
        energy = energy_by_activity([d.battery.energy_at(now) for d in self.devices])
        return fleet_energy_j(energy), fleet_energy_j(energy, work_only=True)

    def state_at(self, now: float) -> FleetState:
        devices = self.devices
        online = np.array([d.online and not d.dead for d in devices], dtype=bool)
        below = np.array([d.below_min for d in devices], dtype=bool)
        return FleetState(
            online=online,
            available=online & ~below,
            working=np.array([d.task is not None for d in devices], dtype=bool),
            charging=np.array([d.battery.charging for d in devices], dtype=bool),
            dead=np.array([d.dead for d in devices], dtype=bool),
            below_min=below,
            battery=np.array([battery_fraction(d.battery.level_at(now), d.battery.capacity_j) for d in devices]),
            tasks_started=np.array([d.tasks_started for d in devices], dtype=np.int64),
            updates_delivered=np.array([d.updates_delivered for d in devices], dtype=np.int64),
        )


__all__ = ["Fleet", "EagerFleet"]
