"""The idle devices' events of the array form, kept as arrays and put into the event log in time order.

The actor form logs a device's changes -- online and offline, its battery's
marks, its charger, its owner's use -- as they happen (netfl/sim/device/).
The array form takes an idle device's changes only when the engine asks
(:class:`~netfl.sim.idle_rows.IdleRows`), in a compiled pass per device,
so it learns of them later than the simulated clock: :class:`IdleEvents`
keeps them as they are taken, a few numbers each, and :meth:`IdleEvents.into`
puts them into the event log when the run ends, each with the round that was
in progress at its time. The kinds and columns are the actor form's
(:mod:`netfl.events`).

The log is in time order. At one instant, the idle devices' events come
first -- they are the world that the engine's events at that instant see (a
round starting then counts a device that came online then) -- ordered by
device, each device's in the order it had them; then the events logged at
that instant (the work, and a working device's own), in the order they
happened. The order does not depend on when the engine took the changes.
A per-round availability's answers at a round's start are the exception:
they are taken at that instant, so they are logged then, by device, as the
actor form logs them (after the previous round's end, before the round's
start).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from netfl.sim.recorder import EventRecorder

#: The events an idle device logs (the actor form's: netfl/sim/device/), by code.
KINDS = (
    "online",
    "offline",
    "battery_empty",
    "power_on",
    "charge_start",
    "charge_stop",
    "below_min_level",
    "above_min_level",
    "battery_full",
    "use_start",
    "use_end",
)
_CODE = {kind: code for code, kind in enumerate(KINDS)}
#: Cause codes: none, the two fixed causes, then the strings a caller registers (:meth:`IdleEvents.cause`).
NO_CAUSE, BATTERY_EMPTY, CHARGING = 0, 1, 2


class IdleEvents:
    """Idle devices' events as they are taken (see the module docstring)."""

    def __init__(self, recorder: EventRecorder | None = None) -> None:
        """``recorder``: the log, for the events logged at the present instant (:meth:`answers`)."""
        self.recorder = recorder
        self._causes: list[str | None] = [None, "battery_empty", "charging"]
        # (times, devices, kind, cause, levels or None, round): what one add() logged, its constants once (kinds and
        # causes one per row, from add_rows)
        self._chunks: list[tuple] = []
        self._count = 0

    def cause(self, text: str) -> int:
        """The code of cause ``text`` (``policy:<name>``), registered once."""
        if text not in self._causes:
            self._causes.append(text)
        return self._causes.index(text)

    def __len__(self) -> int:
        return self._count

    def add(
        self,
        kind: str,
        devices: np.ndarray,
        times: np.ndarray | float,
        *,
        cause: int = NO_CAUSE,
        level: np.ndarray | float | None = None,
        round_index: int = -1,
    ) -> None:
        """One event of ``kind`` for each of ``devices`` at ``times`` (one each, or one for all), with its cause
        and its ``level`` column (the battery's fraction, or the threshold crossed) where the kind has them;
        ``round_index``: its round, where the caller knows it (-1: the round in progress at its time)."""
        n = len(devices)
        if not n:
            return
        levels = None if level is None else np.broadcast_to(np.asarray(level, dtype=np.float64), (n,)).copy()
        times = np.broadcast_to(np.asarray(times, dtype=np.float64), (n,)).copy()
        self._chunks.append((times, np.array(devices, dtype=np.int64), _CODE[kind], cause, levels, round_index))
        self._count += n

    def add_rows(
        self, kinds: np.ndarray, devices: np.ndarray, times: np.ndarray, causes: np.ndarray, levels: np.ndarray
    ) -> None:
        """Events of any kinds, one per row: kind and cause codes, and the level column (NaN: none), as the
        compiled step buffers them (netfl/kernels/idle_step.py), each device's in the order it had them."""
        if len(devices):
            self._chunks.append((times, devices, kinds, causes, levels, -1))
            self._count += len(devices)

    def now(self, time: float, round_index: int, parts: Sequence[tuple]) -> None:
        """Events taken at the instant they happen -- time 0's, a per-round availability's answers at its round's
        start -- in the actor form's order: by device, each device's in the order of ``parts`` (kind, devices,
        cause, level as :meth:`add` takes them). Into the log at once when there is one, else kept with the
        others."""
        if self.recorder is None:
            for kind, devices, cause, level in parts:
                self.add(kind, devices, time, cause=cause, level=level, round_index=round_index)
            return
        sizes = [len(devices) for _, devices, _, _ in parts]
        devices = np.concatenate([devices for _, devices, _, _ in parts]).astype(np.int64)
        order = np.argsort(devices, kind="stable")
        kinds = np.repeat(np.array([kind for kind, *_ in parts], dtype=object), sizes)[order]
        causes = np.repeat(np.array([cause for _, _, cause, _ in parts]), sizes)[order]
        levels = np.concatenate(
            [
                np.broadcast_to(np.asarray(np.nan if lv is None else lv, dtype=np.float64), (n,))
                for n, (*_, lv) in zip(sizes, parts)
            ]
        )[order]
        with_cause, with_level = np.flatnonzero(causes != NO_CAUSE), np.flatnonzero(~np.isnan(levels))
        self.recorder.extend(
            time,
            round_index,
            devices[order],
            kinds,
            {
                "cause": (with_cause, np.array(self._causes, dtype=object)[causes[with_cause]]),
                "level": (with_level, levels[with_level]),
            },
        )

    def into(self, recorder: EventRecorder, round_ends: Sequence[float], until: float = math.inf) -> None:
        """Put the events into ``recorder``'s log, in its time order (the module docstring); ``round_ends``: the
        instants at which the server's round index went up, in order. An event's round is the one in progress at
        its time; at an instant the index went up, the one that ended then (a change at that instant precedes the
        round that starts then, which sees it), but for a per-round availability's answer to that round (its
        ``round_index``). ``until``: the run's end; a change taken ahead of the clock past it (asynchronous workers
        decide ahead, netfl/sim/workers.py; a run stopped from outside) did not happen. Empties this buffer."""
        if not self._chunks:
            return
        chunks = self._chunks
        sizes = [len(chunk[0]) for chunk in chunks]
        times, devices = (np.concatenate([chunk[k] for chunk in chunks]) for k in (0, 1))
        kinds, causes = (
            np.concatenate([np.broadcast_to(chunk[k], (n,)) for n, chunk in zip(sizes, chunks)]) for k in (2, 3)
        )
        rounds = np.repeat(np.array([chunk[5] for chunk in chunks]), sizes)
        levels = np.concatenate([np.full(n, np.nan) if c[4] is None else c[4] for n, c in zip(sizes, chunks)])
        order = np.lexsort((np.arange(len(times)), devices, times))  # time, device, then each device's own order
        order = order[times[order] <= until]
        times, devices, kinds, causes, levels, rounds = (
            column[order] for column in (times, devices, kinds, causes, levels, rounds)
        )
        unknown = np.flatnonzero(rounds < 0)
        rounds[unknown] = np.searchsorted(np.asarray(round_ends, dtype=np.float64), times[unknown], side="left")
        with_cause = np.flatnonzero(causes != NO_CAUSE)
        with_level = np.flatnonzero(~np.isnan(levels))
        names = np.array(KINDS, dtype=object)
        recorder.merge(
            times,
            rounds,
            devices,
            names[kinds],
            {
                "cause": (with_cause, np.array(self._causes, dtype=object)[causes[with_cause]]),
                "level": (with_level, levels[with_level]),
            },
        )
        self._chunks, self._count = [], 0  # once they are in (a Ctrl-C before leaves them here, and the log whole)


__all__ = ["BATTERY_EMPTY", "CHARGING", "KINDS", "NO_CAUSE", "IdleEvents"]
