"""A battery driven by its logged levels: between two logged levels the level moves linearly, so the log is one
more load of constant power between its points -- the engine's own assumption for every load -- and FL work's
energy is drawn on top of it.

A device's logged levels ``(t_i, f_i)`` (fractions of its capacity) become the power ``(f_i - f_{i+1}) x capacity
/ (t_{i+1} - t_i)`` from ``t_i`` to ``t_{i+1}`` (positive while the level falls, negative while it rises), none
before the first level (the battery starts at it) and none after the last (the level stays where it is). The idle
draw, the owner's use and the charger are in the log already: a device driven by its levels draws none of them
(netfl.assemble sets them to 0). A dead device draws nothing, but a logged rise still charges it and powers it on,
as a charger does. A logged level on the straight line of the ones around it changes no power, and is no change.

:class:`LevelLog` holds one device group's levels as the scenario gives them; :class:`LoggedPower` every device's
powers and, for the array form, each device's present power and its next logged level as columns of the compiled
step (:mod:`netfl.kernels.idle_step`), which moves them on at each logged level; the actor form reads a device's
points (:meth:`LoggedPower.row`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["LevelLog", "LoggedPower"]


@dataclass(frozen=True)
class LevelLog:
    """One group's devices' logged levels (CSR): device ``i``'s are ``times[offsets[i]:offsets[i + 1]]`` (seconds,
    increasing) and ``fractions`` (of its capacity, 0 to 1), at least one each."""

    offsets: np.ndarray
    times: np.ndarray
    fractions: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def first(self) -> np.ndarray:
        """Each device's first logged level: where its battery starts."""
        return self.fractions[self.offsets[:-1]]


class LoggedPower:
    """Every device's logged power between its logged levels (see the module docstring): ``power_w`` and
    ``next_at``, per device, are the present power and when the next level comes; :meth:`step` moves devices on
    in the compiled step at their next level, and :meth:`seek` to any instant (a device an actor gives back)."""

    def __init__(self, n: int, capacity_j: np.ndarray, slices: Sequence[slice], logs: Sequence[LevelLog | None]):
        counts = np.zeros(n, dtype=np.int64)
        for sl, log in zip(slices, logs):
            if log is not None:
                counts[sl] = np.diff(log.offsets)
        self.offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=self.offsets[1:])
        self.times = np.empty(int(self.offsets[-1]))
        self.powers = np.empty(int(self.offsets[-1]))  # from each point to the next (the last: 0)
        for sl, log in zip(slices, logs):
            if log is None:
                continue
            a, b = int(self.offsets[sl.start]), int(self.offsets[sl.stop])
            times, power = self.times[a:b], self.powers[a:b]
            times[:] = log.times
            capacity = np.asarray(capacity_j[sl], dtype=float)
            if capacity.size and (capacity.strides == (0,) or bool(np.all(capacity == capacity[0]))):
                capacity = capacity[0]  # one capacity for the group: no array of it per level
            else:
                capacity = np.repeat(capacity, np.diff(log.offsets))[:-1]
            with np.errstate(divide="ignore", invalid="ignore"):
                np.subtract(log.fractions[:-1], log.fractions[1:], out=power[:-1])  # the fall to the next point
                power[:-1] *= capacity
                power[:-1] /= np.diff(times)
            power[np.asarray(log.offsets[1:], dtype=np.int64) - 1] = 0.0  # each device's last point: flat after it
        counts = self._merge_runs(n, counts)
        self.position = self.offsets[:-1].copy()  # each device's next point
        self.power_w = np.zeros(n)
        self.next_at = np.full(n, math.inf)
        has = counts > 0
        self.next_at[has] = self.times[self.position[has]]

    def _merge_runs(self, n: int, counts: np.ndarray) -> np.ndarray:
        """Points that do not change their device's power dropped (a level logged on a straight line, a flat
        stretch): the same world with fewer changes. Each device's new count."""
        total = len(self.powers)
        if total < 2:
            return counts
        keep = np.empty(total, dtype=bool)
        keep[0] = True
        np.not_equal(self.powers[1:], self.powers[:-1], out=keep[1:])
        keep[self.offsets[:-1][counts > 0]] = True  # each device's first point
        if keep.all():
            return counts
        owner = np.repeat(np.arange(n), counts)[keep]
        self.times, self.powers = self.times[keep], self.powers[keep]
        counts = np.bincount(owner, minlength=n)
        np.cumsum(counts, out=self.offsets[1:])
        return counts

    @classmethod
    def none(cls, n: int) -> LoggedPower:
        """No device's battery follows logged levels: every array a view of one value (no memory per device),
        never written, as no logged level ever comes."""
        empty = cls.__new__(cls)
        empty.offsets, empty.times, empty.powers = np.zeros(2, dtype=np.int64), np.zeros(1), np.zeros(1)
        empty.position = np.zeros(1, dtype=np.int64)
        empty.power_w = np.lib.stride_tricks.as_strided(np.zeros(1), (n,), (0,), writeable=True)
        empty.next_at = np.lib.stride_tricks.as_strided(np.full(1, math.inf), (n,), (0,), writeable=True)
        return empty

    def kernel_tuple(self) -> tuple:
        """The arrays as the compiled step takes them (netfl/kernels/idle_step.py: LEVELS_T), moved on in place."""
        return (self.power_w, self.next_at, self.position, self.offsets, self.times, self.powers)

    def seek(self, d: np.ndarray, now: float) -> None:
        """Devices ``d`` at ``now``: the power of the levels logged up to ``now`` (included), the next one after."""
        for device in np.asarray(d, dtype=np.int64).tolist():
            a, b = int(self.offsets[device]), int(self.offsets[device + 1])
            k = a + int(np.searchsorted(self.times[a:b], now, side="right"))
            self.power_w[device] = self.powers[k - 1] if k > a else 0.0
            self.position[device] = k
            self.next_at[device] = self.times[k] if k < b else math.inf

    def row(self, d: int) -> tuple[np.ndarray, np.ndarray] | None:
        """Device ``d``'s points and the power from each (None: its battery is not driven by logged levels)."""
        a, b = int(self.offsets[d]), int(self.offsets[d + 1])
        return (self.times[a:b], self.powers[a:b]) if b > a else None
