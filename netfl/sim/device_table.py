"""Every device's fixed parameters, as one array per quantity.

:func:`netfl.assemble.world.device_table` draws them once per group from the
scenario seed (one stream per group and quantity), so a device's values
depend only on the seed, its group and its position in the group. Arrays
rather than one object per device: the array form keeps a million devices
here for a few dozen bytes each and builds a :class:`DeviceProfile` and a
:class:`~netfl.sim.battery.Battery` only for a device that works.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from netfl.sim.battery import Battery


@dataclass(frozen=True)
class DeviceProfile:
    """The fixed physical parameters of one device."""

    index: int
    group: str
    flops_per_s: float
    compute_w: float
    transmit_w: float
    receive_w: float
    idle_w: float


@dataclass
class DeviceTable:
    group: np.ndarray  # index into group_names
    group_names: list[str]
    flops_per_s: np.ndarray
    compute_w: np.ndarray
    transmit_w: np.ndarray
    receive_w: np.ndarray
    idle_w: np.ndarray
    capacity_j: np.ndarray  # inf: mains powered
    initial_j: np.ndarray
    min_level: np.ndarray
    charge_w: np.ndarray
    uplink_bps: np.ndarray  # nan: a wireless channel decides
    downlink_bps: np.ndarray  # nan: the node's broadcast, the uplink or the default decides
    distance_m: np.ndarray  # to the access point over a wireless channel; nan for a fixed-rate link

    def __len__(self) -> int:
        return len(self.group)

    def group_slices(self) -> list[slice]:
        """The devices of each group (groups are contiguous, in scenario order)."""
        counts = np.bincount(self.group, minlength=len(self.group_names))
        ends = np.cumsum(counts)
        return [slice(int(e - c), int(e)) for c, e in zip(counts, ends)]

    def profile(self, i: int) -> DeviceProfile:
        return DeviceProfile(
            index=i,
            group=self.group_names[self.group[i]],
            flops_per_s=float(self.flops_per_s[i]),
            compute_w=float(self.compute_w[i]),
            transmit_w=float(self.transmit_w[i]),
            receive_w=float(self.receive_w[i]),
            idle_w=float(self.idle_w[i]),
        )

    def battery(self, i: int, level_j: float | None = None, now: float = 0.0) -> Battery:
        """Device i's battery at ``now`` holding ``level_j`` (its initial charge if None)."""
        capacity = float(self.capacity_j[i])
        if math.isinf(capacity):
            return Battery.on_mains(now)
        level = float(self.initial_j[i]) if level_j is None else level_j
        return Battery(capacity, level, float(self.min_level[i]), float(self.charge_w[i]), now=now)
