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


@dataclass(frozen=True, eq=False)
class LogBlock:
    """Consecutive devices' logs in one set of arrays (CSR): device ``i``'s events are
    ``offsets[i]:offsets[i + 1]`` of ``times``, ``kinds`` and ``values``. What the readers produce, so that a
    whole block is checked, and a rule evaluated, in vectorised steps rather than one device at a time."""

    devices: list[str]
    offsets: np.ndarray
    times: np.ndarray
    kinds: np.ndarray
    values: np.ndarray
    source: str = ""

    def __len__(self) -> int:
        return len(self.devices)

    @property
    def owner(self) -> np.ndarray:
        """Each event's device (its index in the block)."""
        return np.repeat(np.arange(len(self.devices)), np.diff(self.offsets))

    def log(self, i: int) -> DeviceLog:
        a, b = int(self.offsets[i]), int(self.offsets[i + 1])
        return DeviceLog(self.devices[i], self.times[a:b], self.kinds[a:b], self.values[a:b], self.source)

    def logs(self):
        """The block's devices' logs in turn (views of its arrays)."""
        return (self.log(i) for i in range(len(self.devices)))

    @classmethod
    def of(cls, log: DeviceLog) -> LogBlock:
        """A block of one device."""
        return cls([log.device], np.array([0, len(log)]), log.times, log.kinds, log.values, log.source)
