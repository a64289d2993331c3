"""Asynchronous workers (Anarchic FL): each device's own timing, and the array form's queue of arrivals.

Every device is a worker that, whenever it is available, pulls the current
model, trains its own number of local steps and sends the update back
(:class:`~netfl.sim.async_server.AsyncServer`). What a worker draws -- the pause
before each pull, the local steps of each job -- is keyed by (seed, device,
job number) (:class:`WorkerDraws`), so a device's timing is the same whether
the engine holds it as an actor or as a row, and does not depend on which
other devices worked before it.

In the array form a device is an actor only while it works;
:class:`ArrayArrivals` keeps when each idle device will next be asked in one
queue: the first pulls (every device's first pause) as one sorted array, the
later ones (after a job, or a device that was not eligible when its pause
ended and waits for its next change) in a heap. A device is asked at the end
of its pause and then at each of its own changes until it is eligible -- the
instants at which the actor form's worker wakes and asks again -- and the
queue wakes at each of these instants, as a process of its own.

Asking one waiting device at a time costs a vectorised step (some twenty
array operations) per device and change. So the queue decides ahead of the
clock, in one step for many devices (:meth:`IdleRows.advance_each
<netfl.sim.idle_rows.IdleRows.advance_each>`), what each device due before
a horizon will answer at each of its instants, and at those instants only
starts the pulls it decided. That changes no result, the order of
simultaneous events included, because:

* the queue still wakes at every instant at which it asked a device when it
  asked one at a time, and schedules the same SimPy events there (a decided
  instant at which nobody pulls is a wake that does nothing else), so every
  other process sees the same events in the same order;
* a waiting device's answers depend on its own row alone, which nothing
  else changes while it is idle (only its own pull takes it);
* nothing reads the rows taken ahead before the clock has caught up with
  them: the horizon ends before the simulation's next reading of every
  device (time 0, an evaluation on its time grid: ``reads_at``), the stop,
  and the first instant at which enough updates could have reached the
  server for it to aggregate (an aggregation may evaluate, end the run or
  find it diverged, which reads every device); a stop asked for from outside
  (Ctrl-C while keeping checkpoints) waits for the clock to catch up with
  them.

Enough updates: the server aggregates once ``buffer`` jobs submitted since its
last aggregation have arrived. Those submitted count at once; any other needs
a pull first -- by a queued device, at its queued instant or once its
availability can say online, whichever is later; by a device whose pull is
decided, at it; by a working device, its pause from now; and after each of
these by the same device its next pause later again -- and reaches the server
at least the devices' smallest hop latency after its pull. The horizon is
found window by window (:meth:`ArrayArrivals._window`): the devices due in one
are decided, so that the next counts their decided pulls instead of their
instants.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable

import numpy as np
import simpy

from netfl import keyed_random
from netfl.distributions import Distribution
from netfl.sim.lazy_fleet import LazyFleet


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
#: Undecided devices taken at a time to count the pulls that could come.
_CHUNK = 64


class ArrayArrivals:
    """When each idle device of a :class:`~netfl.sim.lazy_fleet.LazyFleet` is next asked, and what it answers (see
    the module docstring).

    ``start(device, job)`` pulls and starts job number ``job`` of ``device`` (an actor by then) and returns the
    event that fires when the worker is free again; ``stopping()`` says the run ends at this instant;
    ``reads_at(now)`` is the first instant from ``now`` on at which the simulation reads every device on its own
    schedule (the stop included); ``updates_needed()`` is how many more jobs must be submitted before the server
    can aggregate (``buffer`` less the jobs submitted and not yet aggregated or lost); ``latency_s`` is the
    smallest time from a pull to its update's arrival (the devices' smallest hop latency).
    """

    def __init__(
        self,
        env: simpy.Environment,
        fleet: LazyFleet,
        draws: WorkerDraws,
        start: StartJob,
        stopping: Callable[[], bool],
        *,
        reads_at: Callable[[float], float],
        updates_needed: Callable[[], int],
        latency_s: float,
    ):
        self.env, self.fleet, self.draws, self._start, self._stopping = env, fleet, draws, start, stopping
        self._reads_at, self._updates_needed, self._latency_s = reads_at, updates_needed, latency_s
        n = len(fleet)
        first = draws.pause(np.arange(n), 0)
        self._order = np.argsort(first, kind="stable")
        self._first = first[self._order]  # every device's first pull, in time order
        self._cursor = 0
        self._queue: list[tuple[float, int]] = []  # (time, device): later pulls and waiting devices, undecided
        self._decided: list[tuple[float, int, bool]] = []  # (time, device, pulls): instants decided ahead
        self._pulls: dict[int, tuple[float, float]] = {}  # device -> when it pulls (decided), its pause after
        self._jobs: dict[int, int] = {}  # jobs pulled so far, for the devices that pulled any
        self._working: dict[int, tuple[float, float]] = {}  # device -> its pauses after this job and the next
        self._starting = 0  # pulls started whose job is not yet submitted
        self._changed: simpy.Event = env.event()  # a job ended and queued a pull

    def _next(self) -> float:
        return min(self._head(), self._decided[0][0] if self._decided else math.inf)

    def run(self):
        while True:
            t = self._next()
            if t > self.env.now:  # wait for it, or for a job's end that queues an earlier pull
                if self._head() <= t:  # the next instant is undecided: decide ahead as far as may be
                    self._look_ahead()
                self._changed = self.env.event()
                waits = [self._changed] if math.isinf(t) else [self._changed, self.env.timeout(t - self.env.now)]
                yield self.env.any_of(waits)
                continue
            if self._stopping():
                return  # a job pulled at the stop would never finish
            for device in self._due(t):
                job = self._jobs.get(device, 0)
                self._jobs[device] = job + 1
                self._working[device] = (float(self.draws.pause(device, job + 1)), math.nan)
                self._starting += 1
                self.env.process(self._work(device, job))

    def _due(self, t: float) -> list[int]:
        """The devices that pull at ``t``, ascending: those decided ahead, and of those due now and undecided the
        eligible ones (the others are queued at their next change, when an actor's worker would wake)."""
        ready = []
        while self._decided and self._decided[0][0] <= t:
            _, device, pulls = heapq.heappop(self._decided)
            if pulls:
                ready.append(device)
                del self._pulls[device]
        end = self._cursor + int(np.searchsorted(self._first[self._cursor :], t, side="right"))
        due = self._order[self._cursor : end].tolist()
        self._cursor = end
        while self._queue and self._queue[0][0] <= t:
            due.append(heapq.heappop(self._queue)[1])
        if due:
            rows = self.fleet.rows
            due_rows = np.unique(np.array(due, dtype=np.int64))
            rows.advance(t, due_rows)
            eligible = rows.eligible(t, due_rows)
            waiting = np.setdiff1d(due_rows, eligible, assume_unique=True)
            for device, at in zip(waiting.tolist(), rows.next_at[waiting].tolist()):
                if math.isfinite(at):
                    heapq.heappush(self._queue, (at, device))
            ready += eligible.tolist()
        return sorted(ready)

    def _work(self, device: int, job: int):
        done = self._start(device, job)
        self._starting -= 1
        yield done
        self.fleet.release([device])
        heapq.heappush(self._queue, (self.env.now + self._working.pop(device)[0], device))
        if not self._changed.triggered:
            self._changed.succeed()

    # ------------------------------------------------------------------ ahead of the clock

    def horizon(self, now: float) -> float:
        """Before when the queue may decide ahead of the clock, from what is known without counting pulls (see the
        module docstring): the simulation's readings and the stop, a stop asked for from outside, and the next event
        if the jobs submitted suffice for an aggregation."""
        requested = getattr(self.env, "stop_requested", None)
        if requested is not None and requested():
            return now
        limit = self._reads_at(now)
        if self._updates_needed() - self._starting <= 0:
            limit = min(limit, self.env.peek())
        return limit

    def _look_ahead(self) -> None:
        """Decide the undecided devices' instants as far ahead as may be: window after window, each as far as the
        pulls that could come allow (:meth:`_window`), every device due in it decided in vectorised steps."""
        now = self.env.now
        limit = self.horizon(now)
        while self._head() < limit:
            window, taken = self._window(now, limit)
            while self._head() < window:
                taken.append(self._pop_undecided())
            for entry in taken:
                if entry[0] >= window:
                    heapq.heappush(self._queue, entry)
            taken = [entry for entry in taken if entry[0] < window]
            if not taken:
                return
            times, devices = zip(*taken)
            latest = self._decide(np.array(devices, dtype=np.int64), np.array(times), window)
            if hasattr(self.env, "stops_held_until"):  # a reading before then would see devices taken ahead
                self.env.stops_held_until = max(self.env.stops_held_until, latest)

    def _window(self, now: float, limit: float) -> tuple[float, list[tuple[float, int]]]:
        """Up to when (at most ``limit``) no aggregation can come, and the undecided devices taken to see it.

        The pulls that could come, earliest first, until there are enough to fill the buffer: each undecided
        device at its instant or once its availability can say online, each decided pull, each working device
        its pause from now; after each of these the device's next pause later again (a job takes no less than no
        time). The window ends the latency after the last of them."""
        taken: list[tuple[float, int]] = []
        need = self._updates_needed() - self._starting
        if need <= 0:  # the horizon is the next event already
            return limit, taken
        # (when, device, its job then, its pause after that job: nan where not drawn yet)
        then = [(at, device, self._jobs.get(device, 0), after) for device, (at, after) in self._pulls.items()]
        then += [(now + pause, device, self._jobs[device], after) for device, (pause, after) in self._working.items()]
        heapq.heapify(then)
        while True:
            head = self._head()
            if then and then[0][0] <= head:  # no device yet undecided can pull before it: count it
                at, device, job, after = heapq.heappop(then)
                if at >= limit:
                    return limit, taken
                need -= 1
                if need == 0:
                    return min(limit, at + self._latency_s), taken
                after = float(self.draws.pause(device, job + 1)) if math.isnan(after) else after
                heapq.heappush(then, (at + after, device, job + 1, math.nan))
                continue
            if head >= limit:
                return limit, taken
            chunk = [self._pop_undecided() for _ in range(_CHUNK) if self._head() < limit]
            taken += chunk
            devices = np.array([device for _, device in chunk], dtype=np.int64)
            earliest = np.maximum([at for at, _ in chunk], self.fleet.rows.offline_until(devices))
            jobs = np.array([self._jobs.get(device, 0) for _, device in chunk], dtype=np.int64)
            after = self.draws.pause(devices, jobs + 1)
            for entry in zip(earliest.tolist(), devices.tolist(), jobs.tolist(), after.tolist()):
                heapq.heappush(then, entry)

    def _head(self) -> float:
        """When the earliest undecided device is due."""
        first = self._first[self._cursor] if self._cursor < len(self._first) else math.inf
        return min(first, self._queue[0][0] if self._queue else math.inf)

    def _pop_undecided(self) -> tuple[float, int]:
        """The earliest undecided device due (from the first pulls or the heap) and its instant."""
        if self._queue and (self._cursor >= len(self._first) or self._queue[0][0] < self._first[self._cursor]):
            return heapq.heappop(self._queue)
        self._cursor += 1
        return float(self._first[self._cursor - 1]), int(self._order[self._cursor - 1])

    def _decide(self, devices: np.ndarray, times: np.ndarray, limit: float) -> float:
        """What each device answers at its instants before ``limit``, from ``times[k]`` on: at each, it is advanced
        to it and, unless eligible, asked again at its next change; the devices still waiting are queued. The
        latest instant decided (the devices are advanced no further)."""
        rows = self.fleet.rows
        latest = -math.inf
        while devices.size:
            latest = max(latest, float(times.max()))
            rows.advance_each(devices, times)
            pulls = rows.eligible_each(devices, times)
            for t, device, pull in zip(times.tolist(), devices.tolist(), pulls.tolist()):
                heapq.heappush(self._decided, (t, device, pull))
            if pulls.any():
                d = devices[pulls]
                jobs = np.array([self._jobs.get(device, 0) for device in d.tolist()], dtype=np.int64)
                self._pulls.update(zip(d.tolist(), zip(times[pulls].tolist(), self.draws.pause(d, jobs + 1).tolist())))
            devices = devices[~pulls]
            times = rows.next_at[devices]
            later = times >= limit
            for t, device in zip(times[later].tolist(), devices[later].tolist()):
                if math.isfinite(t):
                    heapq.heappush(self._queue, (t, device))
            devices, times = devices[~later], times[~later]
        return latest


__all__ = ["WorkerDraws", "ArrayArrivals"]
