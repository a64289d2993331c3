"""Replayed online intervals held as arrays, for a whole trace at once.

A trace of 10^5 clients with tens of intervals each is millions of numbers;
as Python lists and tuples it would cost some 100 bytes apiece, as arrays 8.
Here a trace is a :class:`Toggles`: the times at which each row (a client, a
CSV's device) changes state, in one sorted float array for all rows and an
offsets array (CSR: row r's points are ``points[offsets[r]:offsets[r+1]]``),
with each row's state at time 0 and, where the trace repeats, its period.

A :class:`TraceModel` replays rows for a device group: each device keeps a
pointer to its next change point and the cycle it is in, so a flip moves the
pointer by one (no search, no float rounding), and a device's times are
``cycle * period + point``. :meth:`Toggles.seek` finds the state and next
change of any rows at any times by a binary search vectorised over the rows.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from pathlib import Path
from typing import Any

import numpy as np

from netfl.policies.population import PopulationModel

__all__ = ["Toggles", "TraceModel", "merge_intervals"]


def merge_intervals(
    owner: np.ndarray, starts: np.ndarray, ends: np.ndarray, rows: int
) -> tuple[np.ndarray, np.ndarray]:
    """Each row's half-open intervals ``[start, end)`` sorted, overlapping and touching ones merged, empty ones
    dropped: ``(offsets, bounds)`` with row r's ``[s0, e0, s1, e1, ...]`` in ``bounds[offsets[r]:offsets[r+1]]``.

    ``owner[i]`` is the row (0 to ``rows`` - 1) of interval i; the intervals may come in any order.
    """
    keep = ends > starts
    owner, starts, ends = owner[keep], starts[keep], ends[keep]
    same = owner[1:] == owner[:-1]
    if not ((owner[1:] > owner[:-1]) | same & (starts[1:] >= starts[:-1])).all():  # traces come sorted, mostly
        order = np.lexsort((starts, owner))
        owner, starts, ends = owner[order], starts[order], ends[order]
        same = owner[1:] == owner[:-1]
    reach = _running_max(owner, ends)  # the furthest end so far within the row
    new = np.ones(len(owner), dtype=bool)
    new[1:] = (owner[1:] != owner[:-1]) | (starts[1:] > reach[:-1])
    first = np.flatnonzero(new)
    last = np.append(first[1:], len(owner))[: len(first)] - 1
    bounds = np.empty(2 * len(first))
    bounds[0::2], bounds[1::2] = starts[first], reach[last]
    offsets = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(2 * np.bincount(owner[first], minlength=rows), out=offsets[1:])
    return offsets, bounds


def _running_max(owner: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The running maximum of ``values`` restarting at each new ``owner`` (sorted), exactly: the maximum is taken
    over ranks, offset per segment so that no segment sees an earlier one's."""
    n = len(values)
    if n == 0 or ((owner[1:] != owner[:-1]) | (values[1:] >= values[:-1])).all():  # rising already
        return values.copy()
    order = np.argsort(values, kind="stable")
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    segment = np.concatenate([[0], np.cumsum(owner[1:] != owner[:-1])])
    best = np.maximum.accumulate(segment * n + rank) - segment * n
    return values[order[best]]


class Toggles:
    """Rows of merged intervals as change points (see the module docstring).

    Without a period a row's points are its interval bounds after 0. With one, a row's points lie in
    ``(0, period]`` and repeat every period; a point at ``period`` is the change at each cycle's end (a row
    online at the end of its cycle and offline at its start, or the reverse), and an interval that runs
    through the end of one cycle into the next is one online stretch, with no change between.
    """

    def __init__(self, offsets: np.ndarray, bounds: np.ndarray, period: np.ndarray | None):
        rows = len(offsets) - 1
        count = np.diff(offsets)
        owner = np.repeat(np.arange(rows), count)
        first, last = offsets[:-1], offsets[1:] - 1
        filled = count > 0
        self.start_on = np.zeros(rows, dtype=bool)  # each row's state at time 0
        self.start_on[filled] = bounds[first[filled]] == 0.0
        drop = np.zeros(len(bounds), dtype=bool)
        drop[first[self.start_on]] = True  # online from 0: the state at 0, not a change
        append = np.zeros(rows, dtype=bool)
        if period is not None:
            end_on = np.zeros(rows, dtype=bool)
            end_on[filled] = bounds[last[filled]] >= period[filled]
            drop[last[self.start_on & end_on]] = True  # online across the cycle's end: no change there
            append = self.start_on & ~end_on  # online at the start, not at the end: a change at the cycle's end
        kept = count - np.bincount(owner[drop], minlength=rows)
        kept_offsets = np.concatenate([[0], np.cumsum(kept)])
        points = bounds[~drop]
        if append.any():
            points = np.insert(points, kept_offsets[1:][append], period[append])
        self.points = points
        self.offsets = np.concatenate([[0], np.cumsum(kept + append)]).astype(np.int64)
        self.period = period

    @property
    def rows(self) -> int:
        return len(self.offsets) - 1

    def seek(self, rows: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(state at ``t``, cycle and pointer of the next change, its time) of each of ``rows``, vectorised."""
        t = np.broadcast_to(np.asarray(t, dtype=float), rows.shape)
        lo, hi = self.offsets[rows], self.offsets[rows + 1]
        if self.period is None:
            cycle = np.zeros(len(rows), dtype=np.int64)
            local = t
        else:
            period = self.period[rows]
            cycle = np.floor(t / period).astype(np.int64)
            cycle -= t < cycle * period  # rounding in t / period
            cycle += t - cycle * period >= period
            local = t - cycle * period
        pos = _first_above(self.points, lo, hi, local)
        state = self.start_on[rows] ^ ((pos - lo) % 2 == 1)
        if self.period is not None:
            wrap = (pos == hi) & (hi > lo)
            cycle = cycle + wrap
            pos = np.where(wrap, lo, pos)
        return state, cycle, pos, self._time(rows, cycle, pos)

    def step(self, rows: np.ndarray, cycle: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The change after the one at (``cycle``, ``pos``) of each of ``rows``: its (cycle, pointer, time)."""
        pos = pos + 1
        hi = self.offsets[rows + 1]
        if self.period is not None:
            wrap = pos >= hi
            cycle = cycle + wrap
            pos = np.where(wrap, self.offsets[rows], pos)
        return cycle, pos, self._time(rows, cycle, pos)

    def _time(self, rows: np.ndarray, cycle: np.ndarray, pos: np.ndarray) -> np.ndarray:
        ends = pos >= self.offsets[rows + 1]  # no change left (a row without points, or past a one-off trace's last)
        point = self.points[np.minimum(pos, len(self.points) - 1)] if len(self.points) else np.zeros(len(rows))
        at = point if self.period is None else cycle * self.period[rows] + point
        return np.where(ends, math.inf, at)

    def intervals(self, row: int) -> np.ndarray:
        """Row ``row``'s online intervals within its first cycle (or for ever), as rows ``[start, end)``."""
        points = self.points[self.offsets[row] : self.offsets[row + 1]]
        if self.period is not None:
            points = points[points < self.period[row]]
        seq = np.concatenate([[0.0] if self.start_on[row] else [], points])
        if len(seq) % 2:  # online at the cycle's end
            seq = np.append(seq, self.period[row] if self.period is not None else math.inf)
        return seq.reshape(-1, 2)


def _first_above(points: np.ndarray, lo: np.ndarray, hi: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Per element: the first index in ``[lo, hi)`` whose point is above ``x`` (``hi`` if none): one binary
    search per element, run for all of them together in about log2(longest row) vectorised steps."""
    lo, hi = lo.copy(), hi.copy()
    last = max(len(points) - 1, 0)
    while True:
        open_ = lo < hi
        if not open_.any():
            return lo
        mid = (lo + hi) // 2
        right = open_ & (points[np.minimum(mid, last)] <= x) if len(points) else np.zeros_like(open_)
        lo = np.where(right, mid + 1, lo)
        hi = np.where(open_ & ~right, mid, hi)


class TraceModel(PopulationModel):
    """A device group replaying rows of a trace: device j replays ``rows[j]`` from time 0. A subclass reads its
    kind of trace file (:meth:`_trace`)."""

    placed = True  # reads a file relative to the topology, and replays rows by the devices' indices

    def __init__(
        self,
        params: Any,
        n: int,
        key: int,
        label_mix: np.ndarray,
        seed: int,
        *,
        base_dir: Path | None = None,
        first: int = 0,
    ):
        super().__init__(n, key, params)
        toggles, rows = self._trace(params, self.resolve(params.file, base_dir), first)
        self.toggles, self.rows = toggles, np.asarray(rows, dtype=np.int64)
        state, self.cycle, self.pos, change = toggles.seek(self.rows, np.zeros(self.n))
        self.state[:], self.change[:] = state, change

    @abstractmethod
    def _trace(self, params: Any, path: Path, first: int) -> tuple[Toggles, np.ndarray]:
        """The trace in the file ``path`` and the row each of the group's n devices replays (device j is the
        scenario's device ``first + j``)."""

    def _next_change(self, due: np.ndarray, at: np.ndarray) -> np.ndarray:
        self.cycle[due], self.pos[due], change = self.toggles.step(self.rows[due], self.cycle[due], self.pos[due])
        return change

    @staticmethod
    def resolve(file: Path, base_dir: Path | None) -> Path:
        """``file`` relative to the topology's folder ``base_dir`` (the working directory when None)."""
        return file if file.is_absolute() else (base_dir or Path.cwd()) / file
