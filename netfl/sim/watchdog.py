"""A guard against simulated time that stops advancing.

A run whose clock stops -- a policy waking its device again and again at
the same instant, rounds that take no time -- would spin forever without a
word. :class:`WatchedEnvironment` counts the events processed while the
simulated time stays within one instant (:data:`INSTANT_S`) and, past a
bound no real run comes near (:func:`event_limit`: 10^5 events plus 100
per device, where a device's own work at one instant is a handful), stops
the run with :class:`SimulationStuck`, naming the process that kept
resuming: a device's availability or charging policy (class and file), its
battery, its task, or the server's rounds.

An "instant" is 1 microsecond, not exact equality, so that a clock that
creeps (a policy answering ``math.nextafter(now, math.inf)``, 10^-300 s at
a time) is caught too; nothing netfl models is that short (a 1500-byte
packet at 10 Gbit/s takes 1.2 us).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import simpy
from simpy.core import EmptySchedule

from netfl.errors import NetflError

INSTANT_S = 1e-6
BASE_LIMIT = 100_000
PER_DEVICE = 100
_SAMPLE = 2_000  # events looked at, once stuck, to find the process that keeps resuming


def event_limit(devices: int) -> int:
    """Events allowed within one instant: generous, and growing with the devices that may all act at once."""
    return BASE_LIMIT + PER_DEVICE * devices


class SimulationStuck(NetflError):
    """Simulated time stopped advancing."""


class WatchedEnvironment(simpy.Environment):
    """A SimPy environment that raises :class:`SimulationStuck` when ``limit`` events pass within one instant.

    Objects whose processes may loop name them through ``describe_process(name) -> str | None`` (``name`` is the
    generator function's name), so the message speaks of policies and devices, not of generators.
    """

    def __init__(self, limit: int):
        super().__init__()
        self.limit = limit
        self._instant = 0.0  # when the current instant began
        self._count = 0
        #: Asked after every event; True stops the run there with KeyboardInterrupt, between two events (a Ctrl-C
        #: noted while an event ran), never inside a process, where SimPy would hold it while other events run.
        self.stop_requested: Callable[[], bool] | None = None

    def step(self) -> None:
        super().step()
        if self.stop_requested is not None and self.stop_requested():
            raise KeyboardInterrupt
        if self._now - self._instant > INSTANT_S:
            self._instant, self._count = self._now, 0
            return
        self._count += 1
        if self._count > self.limit:
            raise SimulationStuck(self._diagnosis())

    def _diagnosis(self) -> str:
        """Step on a little, counting which processes resume, and name the busiest."""
        resumed: Counter = Counter()
        for _ in range(_SAMPLE):
            if not self._queue:
                break
            for callback in self._queue[0][3].callbacks or ():
                process = getattr(callback, "__self__", None)
                if isinstance(process, simpy.Process):
                    resumed[process] += 1
            try:
                super().step()
            except EmptySchedule:
                break
        where = (
            f"simulated time stopped advancing at {self._instant:.6g} s: over {self.limit:,} events within 1 us of it"
        )
        if not resumed:
            return where
        process, count = resumed.most_common(1)[0]
        share = f"{count} of the next {sum(resumed.values())} resumptions"
        return (
            f"{where}; {describe(process)} keeps resuming ({share}). A policy's next_wakeup(now) must move time "
            f"forward by a real amount (seconds, not a rounding step)"
        )


def describe(process: simpy.Process) -> str:
    """Who runs ``process``: its owner's own words, else ``Class.method``."""
    generator = process._generator
    frame = generator.gi_frame
    owner = frame.f_locals.get("self") if frame is not None else None
    if owner is None:
        return f"process {process.name}"
    hook = getattr(owner, "describe_process", None)
    text = hook(process.name) if hook is not None else None
    return text or f"{type(owner).__name__}.{process.name}"
