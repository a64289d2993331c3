"""The world over time: per device group, who is online, available, working and charging, and the batteries.

A run's curves say how the model learned; the timeline says what the world
was doing meanwhile -- availability falling at midday, batteries draining,
devices dropping out. It is read at every evaluation (and once at the start,
after the first instant's events), so the rows fall on the same simulated
times as metrics.csv's: evaluate on a time grid (``eval.every: 10min``) for
a regular timeline. Reading changes nothing in the run (no draw, no
settling), so a run with its timeline is the run without it, bit for bit.

One row per reading and group: the counts at that instant (``online``,
``available``: online and above ``min_level``, ``working``, ``charging``,
``battery_empty``, ``below_min_level``), the counts since the previous row
(``participated``: devices that started work, ``dropped``: devices that
dropped out, ``delivered``: updates delivered) and the battery levels of the
group's battery-powered devices (mean, min, 10th, 50th, 90th percentile,
max; null on mains power).
"""

from __future__ import annotations

import math

import numpy as np

from netfl.sim.fleet_readings import FleetState
from netfl.sim.recorder import EventRecorder

#: The columns of timeline.parquet, in order, and their type.
TIMELINE_COLUMNS: dict[str, type] = {
    "sim_time_s": float,
    "group": str,
    "devices": int,
    "online": int,
    "available": int,
    "working": int,
    "charging": int,
    "battery_empty": int,
    "below_min_level": int,
    "participated": int,
    "dropped": int,
    "delivered": int,
    "battery_mean": float,
    "battery_min": float,
    "battery_p10": float,
    "battery_p50": float,
    "battery_p90": float,
    "battery_max": float,
}
BATTERY_STATS = ("mean", "min", "p10", "p50", "p90", "max")


class Timeline:
    """Readings of the fleet, one row per reading and group (:meth:`columns` gives them by column)."""

    def __init__(self, group: np.ndarray, group_names: list[str], recorder: EventRecorder):
        self.names = list(group_names)
        self.members = _members(np.asarray(group), len(self.names))
        self.recorder = recorder
        #: One tuple per reading and group, in TIMELINE_COLUMNS' order: a row is added by one append, so a
        #: Ctrl-C during a reading leaves whole rows only (the partial results are written from them).
        self._rows: list[tuple] = []
        self._started = np.zeros(len(group), dtype=np.int32)  # 32 bits: a device's tasks, at ten million devices
        self._delivered = np.zeros(len(group), dtype=np.int32)
        self._seen_events = 0  # the event log's rows already looked at for dropouts

    def read(self, now: float, state: FleetState, start: bool = False) -> None:
        """Add the rows of ``now``; the counts since the previous reading come from the fleet's totals and the
        event log's dropouts since then. ``start``: the first reading, which counts nothing since (what started at
        time 0 is the next reading's, as what starts at any reading's instant is: readings at evaluations come
        before a round that starts at the same instant)."""
        participated = state.tasks_started > self._started
        delivered = state.updates_delivered - self._delivered
        dropped = np.zeros(len(self._started), dtype=bool)
        if start:
            participated[:], delivered[:] = False, 0
        else:
            self._started[:], self._delivered[:] = state.tasks_started, state.updates_delivered
            kinds, devices = self.recorder.kinds, self.recorder.devices
            for row in range(self._seen_events, len(kinds)):
                if kinds[row] == "dropout":
                    dropped[devices[row]] = True
            self._seen_events = len(kinds)
        for name, members in zip(self.names, self.members):
            counts = {
                "online": state.online,
                "available": state.available,
                "working": state.working,
                "charging": state.charging,
                "battery_empty": state.dead,
                "below_min_level": state.below_min,
                "participated": participated,
                "dropped": dropped,
            }
            self._rows.append(
                (
                    float(now),
                    name,
                    _size(members),
                    *(int(np.count_nonzero(flags[members])) for flags in counts.values()),
                    int(delivered[members].sum()),
                    *battery_stats(state.battery[members]),
                )
            )

    def columns(self) -> dict[str, list]:
        """The readings as columns (name -> list), for timeline.parquet."""
        return {name: [row[i] for row in self._rows] for i, name in enumerate(TIMELINE_COLUMNS)}


def _members(group: np.ndarray, count: int) -> list[slice | np.ndarray]:
    """Each group's devices: a range where they are contiguous, as a scenario's groups are (a reading then selects
    them without copying ten million values), else a mask."""
    members: list[slice | np.ndarray] = []
    for g in range(count):
        where = np.flatnonzero(group == g)
        contiguous = where.size == 0 or where[-1] - where[0] + 1 == where.size
        members.append(slice(int(where[0]), int(where[-1]) + 1) if where.size and contiguous else group == g)
    return members


def _size(members: slice | np.ndarray) -> int:
    return members.stop - members.start if isinstance(members, slice) else int(np.count_nonzero(members))


def battery_stats(levels: np.ndarray) -> tuple[float, ...]:
    """Mean, min, 10th, 50th and 90th percentile and max of the battery-powered devices' levels (NaN for none)."""
    absent = np.isnan(levels)
    if absent.any():  # a group's devices are all on mains power or none: no copy at scale
        levels = levels[~absent]
    if not levels.size:
        return (math.nan,) * len(BATTERY_STATS)
    p10, p50, p90 = np.percentile(levels, [10, 50, 90])
    return float(levels.mean()), float(levels.min()), float(p10), float(p50), float(p90), float(levels.max())
