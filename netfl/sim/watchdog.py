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

import inspect
import math
import weakref
from collections import Counter
from collections.abc import Callable
from typing import Any

import simpy

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
    process's name, :attr:`simpy.Process.name`: its generator function's), so the message speaks of policies and
    devices, not of generators. Only SimPy's public interface is used: ``now``, ``peek()``, ``step()``,
    ``schedule()``, ``process()`` and ``active_process``.
    """

    def __init__(self, limit: int):
        super().__init__()
        self.limit = limit
        self._instant = 0.0  # when the current instant began
        self._count = 0
        self._owners: weakref.WeakKeyDictionary[simpy.Process, Any] = weakref.WeakKeyDictionary()
        #: Asked after every event; True stops the run there with KeyboardInterrupt, between two events (a Ctrl-C
        #: noted while an event ran), never inside a process, where SimPy would hold it while other events run.
        self.stop_requested: Callable[[], bool] | None = None
        #: Asked after every event too; True: a Ctrl-C struck inside the event (netfl.signals.interrupts_kept), which
        #: SimPy took for the failure of the process it struck in, going on with the others: the run stops at once.
        self.interrupted: Callable[[], bool] | None = None
        #: A stop asked for before this simulated time waits for it: the array form's asynchronous arrivals took idle
        #: devices ahead of the clock up to there (netfl/sim/workers.py), and the results read at a stop would see them.
        self.stops_held_until = -math.inf

    def process(self, generator) -> simpy.Process:  # type: ignore[override]
        """SimPy's, noting who started the process: the ``self`` of the generator method (the device, the server),
        read once with :func:`inspect.getgeneratorlocals`, for the message should it loop."""
        process = simpy.Process(self, generator)
        owner = inspect.getgeneratorlocals(generator).get("self")
        if owner is not None:
            self._owners[process] = owner
        return process

    def step(self) -> None:
        try:
            super().step()
        finally:  # the interrupted process's failure may raise from step itself, as a KeyboardInterrupt or not
            if self.interrupted is not None and self.interrupted():
                raise KeyboardInterrupt
        if self.stop_requested is not None and self.now >= self.stops_held_until and self.stop_requested():
            raise KeyboardInterrupt
        now = self.now
        if now - self._instant > INSTANT_S:
            self._instant, self._count = now, 0
            return
        self._count += 1
        if self._count > self.limit:
            raise SimulationStuck(self._diagnosis())

    def _diagnosis(self) -> str:
        """Step on a little, counting the processes that resume: each schedules its next event (a timeout, the
        condition it waits on) while it is SimPy's active process. Counted only here, so a run pays nothing."""
        resumed: Counter = Counter()
        schedule = self.schedule

        def counted(event: simpy.Event, *args: Any, **kwargs: Any) -> None:
            if self.active_process is not None:
                resumed[self.active_process] += 1
            schedule(event, *args, **kwargs)

        self.schedule = counted  # type: ignore[method-assign]  # this instance only, while sampling
        try:
            for _ in range(_SAMPLE):
                if math.isinf(self.peek()):
                    break
                super().step()
        finally:
            del self.schedule
        where = (
            f"simulated time stopped advancing at {self._instant:.6g} s: over {self.limit:,} events within 1 us of it"
        )
        if not resumed:
            return where
        process, count = resumed.most_common(1)[0]
        share = f"{count} of the next {sum(resumed.values())} resumptions"
        return (
            f"{where}; {self.describe(process)} keeps resuming ({share}). A policy's next_wakeup(now) must move time "
            f"forward by a real amount (seconds, not a rounding step)"
        )

    def describe(self, process: simpy.Process) -> str:
        """Who runs ``process``: its owner's own words, else ``Class.method``."""
        owner = self._owners.get(process)
        if owner is None:
            return f"process {process.name}"
        hook = getattr(owner, "describe_process", None)
        text = hook(process.name) if hook is not None else None
        return text or f"{type(owner).__name__}.{process.name}"
