"""The event log: every engine event, in simulated-time order.

One row per event: ``sim_time_s``, ``round``, ``device`` (-1 for the
server) and ``kind``, then typed columns that are null where they do not
apply (:data:`netfl.events.EVENT_FIELDS`: ``job``, ``task``, ``bytes``, ...) and a
``detail`` string for what has no column (``level=0.3000``,
``relay=r1``). Everything a user may plot comes from here (plus the
metrics the learner reports at evaluations), without parsing text.

Most events fill two or three of the typed columns, so each is kept
sparse -- the rows that have a value and the values, in compact arrays --
and made whole only when the log is written.
"""

from __future__ import annotations

from array import array
from typing import Any, NamedTuple

import numpy as np

from netfl.events import EVENT_FIELDS

SERVER = -1

_TYPECODE = {int: "q", float: "d"}


class Sparse(NamedTuple):
    """One nullable column: the rows that have a value, and their values."""

    rows: array
    values: array | list


class EventRecorder:
    def __init__(self) -> None:
        self.times: list[float] = []
        self.rounds: list[int] = []
        self.devices: list[int] = []
        self.kinds: list[str] = []
        self.details: list[str] = []
        self.fields = {
            name: Sparse(array("q"), array(_TYPECODE[t]) if t in _TYPECODE else []) for name, t in EVENT_FIELDS.items()
        }

    def log(self, time: float, round_index: int, device: int, kind: str, detail: str = "", **fields: Any) -> int:
        """Append one event; ``fields`` fill typed columns (None: null). Bytes are rounded to whole bytes.
        Returns the event's row."""
        row = len(self.kinds)
        self.times.append(float(time))
        self.rounds.append(int(round_index))
        self.devices.append(int(device))
        self.kinds.append(kind)
        self.details.append(detail)
        for name, value in fields.items():
            if value is not None:
                column = self.fields[name]  # a KeyError names an unknown column
                column.rows.append(row)
                kind_of = EVENT_FIELDS[name]
                column.values.append(round(value) if kind_of is int else kind_of(value))
        return row

    def __len__(self) -> int:
        return len(self.kinds)

    def extend(
        self,
        time: float,
        round_index: int,
        devices: np.ndarray,
        kinds: np.ndarray,
        fields: dict[str, tuple[np.ndarray, np.ndarray]],
    ) -> None:
        """Append one event per device, all at ``time`` (the present) in ``round_index``, in the order given;
        ``fields``: typed column -> (positions among the new rows, values); their ``detail`` is empty."""
        start, n = len(self.kinds), len(devices)
        self.times.extend([float(time)] * n)
        self.rounds.extend([int(round_index)] * n)
        self.devices.extend(np.asarray(devices).tolist())
        self.kinds.extend(np.asarray(kinds).tolist())
        self.details.extend([""] * n)
        for name, (where, values) in fields.items():
            column = self.fields[name]
            column.rows.extend((np.asarray(where, dtype=np.int64) + start).tolist())
            column.values.extend(np.asarray(values).tolist())

    def merge(
        self,
        times: np.ndarray,
        rounds: np.ndarray,
        devices: np.ndarray,
        kinds: np.ndarray,
        fields: dict[str, tuple[np.ndarray, np.ndarray]],
    ) -> None:
        """Put rows logged after their time (:mod:`netfl.sim.idle_events`: ``times`` ascending, in the order they
        are to have) into the log: each before the rows logged at its instant, which keep their order. ``fields``:
        typed column -> (positions among the new rows, values); their ``detail`` is empty."""
        old = len(self.kinds)
        clock = np.asarray(self.times, dtype=np.float64)  # logged at the clock: in time order
        place = np.searchsorted(clock, times, side="left")
        new_at = place + np.arange(len(times))
        old_at = np.arange(old) + np.searchsorted(place, np.arange(old), side="right")
        total = old + len(times)

        def woven(mine: list, theirs: np.ndarray, dtype) -> list:
            out = np.empty(total, dtype=dtype)
            out[old_at] = np.asarray(mine, dtype=dtype)
            out[new_at] = theirs
            return out.tolist()

        details = np.full(len(times), "", dtype=object)
        fields_now = {}
        for name, column in self.fields.items():
            rows, values = old_at[np.asarray(column.rows, dtype=np.int64)], column.values
            if name in fields:
                where, theirs = fields[name]
                strings = isinstance(values, list)
                both = np.concatenate([np.asarray(v, dtype=object if strings else None) for v in (values, theirs)])
                rows = np.concatenate([rows, new_at[where]])
                by_row = np.argsort(rows, kind="stable")
                rows, kept = rows[by_row], both[by_row].tolist()
                values = kept if strings else array(values.typecode, kept)
            fields_now[name] = Sparse(array("q", rows.tolist()), values)
        # all made before any is replaced: a Ctrl-C meanwhile leaves the log as it was
        self.times, self.rounds, self.devices, self.kinds, self.details, self.fields = (
            woven(self.times, times, np.float64),
            woven(self.rounds, rounds, np.int64),
            woven(self.devices, devices, np.int64),
            woven(self.kinds, kinds, object),
            woven(self.details, details, object),
            fields_now,
        )

    def drop_unfinished(self) -> None:
        """Drop an event whose logging was cut short (a Ctrl-C between two of :meth:`log`'s appends), so every
        column has one entry per whole event."""
        whole = min(map(len, (self.times, self.rounds, self.devices, self.kinds, self.details)))
        for values in (self.times, self.rounds, self.devices, self.kinds, self.details):
            del values[whole:]
        for rows, values in self.fields.values():
            kept = min(len(rows), len(values))
            while kept and rows[kept - 1] >= whole:
                kept -= 1
            del rows[kept:]
            del values[kept:]

    def count(self, kind: str) -> int:
        return self.kinds.count(kind)

    def column(self, name: str) -> list:
        """One typed column made whole, None where null (for tests and small logs)."""
        out: list = [None] * len(self)
        rows, values = self.fields[name]
        for row, value in zip(rows, values):
            out[row] = value
        return out

    def columns(self) -> dict[str, Any]:
        """The log's columns: lists for ``sim_time_s``, ``round``, ``device``, ``kind`` and ``detail``, a
        :class:`Sparse` for each typed one (:func:`netfl.results.events_file.events_frame` makes them whole)."""
        return {
            "sim_time_s": self.times,
            "round": self.rounds,
            "device": self.devices,
            "kind": self.kinds,
            **self.fields,
            "detail": self.details,
        }
