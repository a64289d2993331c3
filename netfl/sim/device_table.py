"""Every device's fixed parameters, as one array per quantity.

Drawn once per group from the scenario seed (one stream per group and
quantity), so a device's values depend only on the seed, its group and its
position in the group. Arrays rather than one object per device: the lazy
engine keeps a million devices here for a few dozen bytes each and builds
a :class:`~netfl.sim.device.DeviceProfile` and a
:class:`~netfl.sim.battery.Battery` only for a device that works.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from netfl.rng import RandomStreams
from netfl.scenario import Scenario
from netfl.sim.battery import Battery

# Radio receive power when the scenario gives none: about half the uplink
# transmit power (receive chains draw less than the power amplifier).
RECEIVE_TO_TRANSMIT_POWER = 0.5


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
        return DeviceProfile(index=i, group=self.group_names[self.group[i]], flops_per_s=float(self.flops_per_s[i]),
                             compute_w=float(self.compute_w[i]), transmit_w=float(self.transmit_w[i]),
                             receive_w=float(self.receive_w[i]), idle_w=float(self.idle_w[i]))

    def battery(self, i: int, level_j: float | None = None, now: float = 0.0) -> Battery:
        """Device i's battery at ``now`` holding ``level_j`` (its initial charge if None)."""
        capacity = float(self.capacity_j[i])
        if math.isinf(capacity):
            return Battery(now=now)
        level = float(self.initial_j[i]) if level_j is None else level_j
        return Battery(capacity, level, float(self.min_level[i]), float(self.charge_w[i]), now=now)


def device_table(scenario: Scenario, streams: RandomStreams) -> DeviceTable:
    """Draw every device's parameters: one seeded stream per group and quantity."""
    cols: dict[str, list[np.ndarray]] = {k: [] for k in (
        "group", "flops_per_s", "compute_w", "transmit_w", "receive_w", "idle_w", "capacity_j", "initial_j",
        "min_level", "charge_w", "uplink_bps", "downlink_bps", "distance_m")}
    for g, group in enumerate(scenario.devices):
        n = group.count

        def draw(name, dist):
            return np.asarray(dist.sample(streams.numpy("devices", group.group, name), n), dtype=float)

        cols["group"].append(np.full(n, g, dtype=np.int32))
        cols["flops_per_s"].append(draw("flops_per_s", group.compute.flops_per_s))
        power = group.power
        for name, watts in (("compute_w", power.compute), ("transmit_w", power.transmit),
                            ("receive_w", power.transmit * RECEIVE_TO_TRANSMIT_POWER), ("idle_w", power.idle)):
            cols[name].append(np.full(n, watts, dtype=float))
        spec = group.battery
        if spec is None:
            cols["capacity_j"].append(np.full(n, math.inf))
            cols["initial_j"].append(np.full(n, math.inf))
            cols["min_level"].append(np.zeros(n))
            cols["charge_w"].append(np.zeros(n))
        else:
            cols["capacity_j"].append(np.full(n, spec.capacity))
            cols["initial_j"].append(spec.capacity * draw("battery_initial", spec.initial))
            cols["min_level"].append(np.full(n, spec.min_level))
            cols["charge_w"].append(np.full(n, spec.charge_power))
        link = group.link
        up = draw("uplink", link.uplink) if link.uplink is not None else np.full(n, math.nan)
        if link.downlink is not None:
            down = draw("downlink", link.downlink)
        else:
            down = up if link.to is None else np.full(n, math.nan)
        cols["uplink_bps"].append(up)
        cols["downlink_bps"].append(down)
        cols["distance_m"].append(draw("distance", link.channel.distance_m) if link.channel is not None
                                  else np.full(n, math.nan))
    arrays = {k: np.concatenate(v) for k, v in cols.items()}
    return DeviceTable(group_names=[g.group for g in scenario.devices], **arrays)
