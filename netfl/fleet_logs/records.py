"""One device's log as arrays, and the one-line error a malformed log gets."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from netfl.errors import NetflError


@dataclass(frozen=True, eq=False)
class DeviceLog:
    """The state changes of one device, in time order.

    ``times``: float64 seconds since the log set's origin (midnight at the start of day 0 on the simulated
    clock), non-decreasing; ``kinds``: int8, the kinds of :mod:`netfl.fleet_logs.states`; ``values``:
    float64, the kind's new value. ``source`` is the file the log came from, for messages.
    """

    device: str
    times: np.ndarray
    kinds: np.ndarray
    values: np.ndarray
    source: str = ""

    def __len__(self) -> int:
        return len(self.times)

    def __eq__(self, other: object) -> bool:  # arrays compared by value (the dataclass' own == is ambiguous)
        if not isinstance(other, DeviceLog):
            return NotImplemented
        return (
            self.device == other.device
            and np.array_equal(self.times, other.times)
            and np.array_equal(self.kinds, other.kinds)
            and np.array_equal(self.values, other.values)
        )

    __hash__ = None  # type: ignore[assignment]


class LogError(NetflError, ValueError):
    """A device log is malformed. One line: ``<file>:<line>: device <id>: <what is wrong; what is accepted>``.

    ``line`` is the file's line (1-based; a CSV's header is line 1), or for parquet the table row counted the
    same way (header = 1, first row = 2), or 0 where the problem belongs to no single line.
    """

    def __init__(self, path: str, device: str | None, line: int, what: str):
        self.path, self.device, self.line, self.what = str(path), device, int(line), what
        who = f"device {device}: " if device is not None else ""
        super().__init__(f"{self.path}:{self.line}: {who}{what}")

    def __reduce__(self):
        return type(self), (self.path, self.device, self.line, self.what)
