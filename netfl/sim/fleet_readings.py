"""What the fleet reports of its devices, in either form: each device's totals at the end of a run
(:class:`DeviceStats`), every device at one instant (:class:`FleetState`), and the energy sums both forms add up
the same way (so that the actor form and the array form agree to the bit)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

ACTIVITIES = ("idle", "compute", "transmit", "receive")


@dataclass
class DeviceStats:
    """One value per device, at the end of a run (devices.parquet and the summary); ``group``: each device's
    index into ``group_names`` (a million devices' names would be a million strings)."""

    group: np.ndarray
    group_names: list[str]
    tasks_started: np.ndarray
    updates_delivered: np.ndarray
    online_time_s: np.ndarray
    energy_by_activity_j: dict[str, np.ndarray]
    charged_j: np.ndarray
    battery_fraction: np.ndarray  # nan on mains power
    battery_empty: np.ndarray

    @property
    def energy_j(self) -> np.ndarray:
        return summed(self.energy_by_activity_j.values(), len(self.group))

    @property
    def work_energy_j(self) -> np.ndarray:
        """What federated learning cost each device: all but standing by and its owner's use."""
        work = [e for activity, e in self.energy_by_activity_j.items() if activity not in NOT_FL]
        return summed(work, len(self.group))


@dataclass
class FleetState:
    """Every device at one instant, as the timeline reads it (netfl/sim/timeline.py); reading it changes nothing.

    ``online``: its availability says so and its battery is not empty; ``available``: online and above its
    battery's ``min_level`` (it could be asked, busy or not); ``working``: a task under way; ``battery``: the
    charge as a fraction (NaN on mains power); ``tasks_started`` and ``updates_delivered``: totals so far."""

    online: np.ndarray
    available: np.ndarray
    working: np.ndarray
    charging: np.ndarray
    dead: np.ndarray
    below_min: np.ndarray
    battery: np.ndarray
    tasks_started: np.ndarray
    updates_delivered: np.ndarray


def group_indices(names: list[str]) -> dict:
    """Per-device group names as DeviceStats keeps them: indices into the distinct names."""
    distinct = list(dict.fromkeys(names))
    index = {name: i for i, name in enumerate(distinct)}
    return {"group": np.fromiter((index[n] for n in names), dtype=np.int32, count=len(names)), "group_names": distinct}


def battery_fraction(level_j: float, capacity_j: float) -> float:
    return math.nan if math.isinf(capacity_j) else level_j / capacity_j


def battery_fractions(level_j: np.ndarray, capacity_j: np.ndarray) -> np.ndarray:
    """:func:`battery_fraction` of every device, computed in ``level_j`` (an array the caller gives up)."""
    with np.errstate(invalid="ignore"):
        level_j /= capacity_j
    level_j[np.isinf(capacity_j)] = math.nan
    return level_j


def energy_by_activity(energy: list[dict[str, float]]) -> dict[str, np.ndarray]:
    """Per-device energy dicts as one array per activity (the standard activities first, in their order)."""
    activities = dict.fromkeys(ACTIVITIES) | {a: None for e in energy for a in e}
    return {a: np.array([e.get(a, 0.0) for e in energy]) for a in activities}


#: What a device draws whether or not it takes part in FL: standing by, and its owner's use.
NOT_FL = ("idle", "use")


def fleet_energy_j(by_activity: dict[str, np.ndarray], *, work_only: bool = False) -> float:
    """The fleet's total, summed as ``DeviceStats.energy_j.sum()`` sums it (so the two agree to the bit);
    ``work_only``: without the idle draw and the owner's use, i.e. what training and the radio cost (the energy
    FL spends)."""
    n = len(next(iter(by_activity.values()))) if by_activity else 0
    arrays = [e for activity, e in by_activity.items() if not (work_only and activity in NOT_FL)]
    return float(summed(arrays, n).sum())


def summed(arrays: Iterable[np.ndarray], n: int) -> np.ndarray:
    """``sum(arrays, np.zeros(n))`` -- the same additions in the same order, so the same bits -- in one array, not
    one per addition (at ten million devices each is 80 MB)."""
    total = np.zeros(n)
    for values in arrays:
        total += values
    return total
