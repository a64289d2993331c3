"""Asynchronous workers (Anarchic FL): each device's own timing, and the array form's queue of arrivals.

Every device is a worker that, whenever it is available, pulls the current
model, trains its own number of local steps and sends the update back
(:class:`~netfl.sim.server.AsyncServer`). What a worker draws -- the pause
before each pull, the local steps of each job -- is keyed by (seed, device,
job number) (:class:`WorkerDraws`), so a device's timing is the same whether
the engine holds it as an actor or as a row, and does not depend on which
other devices worked before it.

In the array form a device is an actor only while it works;
:class:`ArrayArrivals` keeps when each idle device will next pull in one queue:
the first pulls (every device's first pause) as one sorted array, the later
ones (after a job, or a device that was not eligible when its pause ended and
waits for its next change) in a heap. At each instant it advances only the
devices due, pulls for those eligible, and queues the others at their next
change -- the instant at which the actor form's worker would wake and ask
again.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable

import numpy as np
import simpy

from netfl import keyed_random
from netfl.distributions import Distribution
from netfl.sim.fleet import LazyFleet


class WorkerDraws:
    """The pauses and local steps of every worker, keyed by (device, job number)."""

    def __init__(self, key: int, pause_s: float, local_steps: Distribution | None):
        self.key, self.pause_s, self.local_steps = key, pause_s, local_steps
        self._pause_key = keyed_random.child_key(key, "pause")
        self._steps_key = keyed_random.child_key(key, "steps")

    def pause(self, devices: np.ndarray | int, job: np.ndarray | int) -> np.ndarray:
        """The pause before job ``job`` of each device (exponential with mean ``pause_s``; 0 without pauses)."""
        if self.pause_s <= 0:
            return np.zeros(np.shape(devices))
        return keyed_random.exponential(self._pause_key, devices, job, self.pause_s)

    def steps(self, device: int, job: int) -> int | None:
        """A worker's own K for this job: uniform [a, b] means U{a..b}; other distributions are rounded."""
        dist = self.local_steps
        if dist is None:
            return None
        if dist.kind == "uniform":
            low, high = max(1, math.ceil(dist.params[0])), max(1, math.floor(dist.params[1]))
            u = float(keyed_random.uniform(self._steps_key, device, job))
            return low + min(int(u * (high - low + 1)), high - low)
        rng = np.random.default_rng((self._steps_key, device, job))
        return max(1, int(round(float(dist.sample(rng, 1)[0]))))


StartJob = Callable[[int, int], simpy.Event]


class ArrayArrivals:
    """When each idle device of a :class:`~netfl.sim.fleet.LazyFleet` next pulls (see the module docstring).

    ``start(device, job)`` pulls and starts job number ``job`` of ``device`` (an actor by then) and returns the
    event that fires when the worker is free again; ``stopping()`` says the run ends at this instant.
    """

    def __init__(self, env: simpy.Environment, fleet: LazyFleet, draws: WorkerDraws, start: StartJob, stopping):
        self.env, self.fleet, self.draws, self._start, self._stopping = env, fleet, draws, start, stopping
        n = len(fleet)
        first = draws.pause(np.arange(n), 0)
        self._order = np.argsort(first, kind="stable")
        self._first = first[self._order]  # every device's first pull, in time order
        self._cursor = 0
        self._queue: list[tuple[float, int]] = []  # (time, device): later pulls and waiting devices
        self._jobs: dict[int, int] = {}  # jobs pulled so far, for the devices that pulled any
        self._changed: simpy.Event = env.event()  # a job ended and queued a pull

    def _next(self) -> float:
        first = self._first[self._cursor] if self._cursor < len(self._first) else math.inf
        return min(first, self._queue[0][0] if self._queue else math.inf)

    def run(self):
        rows = self.fleet.rows
        while True:
            t = self._next()
            if t > self.env.now:  # wait for it, or for a job's end that queues an earlier pull
                self._changed = self.env.event()
                waits = [self._changed] if math.isinf(t) else [self._changed, self.env.timeout(t - self.env.now)]
                yield self.env.any_of(waits)
                continue
            if self._stopping():
                return  # a job pulled at the stop would never finish
            end = self._cursor + int(np.searchsorted(self._first[self._cursor :], t, side="right"))
            due = self._order[self._cursor : end].tolist()
            self._cursor = end
            while self._queue and self._queue[0][0] <= t:
                due.append(heapq.heappop(self._queue)[1])
            due_rows = np.unique(np.array(due, dtype=np.int64))
            rows.advance(t, due_rows)
            ready = rows.eligible(t, due_rows)
            for device in ready.tolist():
                self.env.process(self._work(device))
            waiting = np.setdiff1d(due_rows, ready, assume_unique=True)
            for device, at in zip(waiting.tolist(), rows.next_at[waiting].tolist()):
                if math.isfinite(at):  # it asks again at its next change, as an actor's worker wakes then
                    heapq.heappush(self._queue, (at, device))

    def _work(self, device: int):
        job = self._jobs.get(device, 0)
        self._jobs[device] = job + 1
        yield self._start(device, job)
        self.fleet.release([device])
        heapq.heappush(self._queue, (self.env.now + float(self.draws.pause(device, job + 1)), device))
        if not self._changed.triggered:
            self._changed.succeed()


__all__ = ["WorkerDraws", "ArrayArrivals"]
