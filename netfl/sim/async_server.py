"""The asynchronous server: anarchic arrivals.

Anarchic FL: every device is a
worker that, whenever it is available, pulls the current model, trains its
own number of local steps and sends the update back; the server aggregates
whenever ``buffer`` updates have arrived, each tagged with the model version
it started from. Staleness (current version minus start version) is not
drawn: it comes out of the simulated devices, availability and network.

It reads its parameters from ``server.async``'s declaration (:class:`~netfl.registry.server_params.AsyncSpec`);
what it shares with the synchronous server is netfl/sim/server.py's.
"""

from __future__ import annotations

from collections.abc import Callable

import simpy

from netfl.backend import Work
from netfl.registry.server_params import AsyncSpec
from netfl.sim.device import Device
from netfl.sim.lazy_fleet import LazyFleet
from netfl.sim.server import ServerBase, settle
from netfl.sim.workers import ArrayArrivals, WorkerDraws


class AsyncServer(ServerBase):
    params: AsyncSpec  # buffer: aggregate every this many arrivals

    def __init__(self, *parts, draws: WorkerDraws, reads_at: Callable[[float], float] = lambda now: now, **common):
        """``parts``, ``common``: :class:`~netfl.sim.server.ServerBase`'s; ``draws``: each worker's pauses and
        local steps (params.pause, params.local_steps). ``reads_at(now)``: the first instant from ``now`` on at
        which the simulation reads every device on its own schedule (its evaluations on a time grid); the array
        form takes idle devices no further ahead of the clock (netfl/sim/workers.py). By default, every
        instant."""
        super().__init__(*parts, **common)
        self.draws = draws
        self.reads_at = reads_at
        self._arrived: list[int] = []
        self._versions: dict[int, int] = {}
        self._lost = 0
        self._full: simpy.Event = self.env.event()

    @property
    def unaggregated(self) -> tuple[int, int]:
        return len(self._arrived), self._lost

    def run(self):
        if isinstance(self.devices, LazyFleet):  # idle devices are rows: their pulls come from one queue
            attachments = self.network.attachments
            arrivals = ArrayArrivals(
                self.env,
                self.devices,
                self.draws,
                self._pull_device,
                self.stopping,
                reads_at=lambda now: min(self.reads_at(now), self.stop_s),
                updates_needed=lambda: self.params.buffer - len(self._versions),  # submitted: arrived, or under way
                latency_s=min(
                    (attachments.latency(g.start) for g in self.devices.slices if g.stop > g.start), default=0
                ),
            )
            self.env.process(arrivals.run())
        else:
            for device in self.devices:
                self.env.process(self._worker(device))
        while self.max_rounds is None or self.rounds_done < self.max_rounds:
            if self.stopping():
                yield self.env.event()  # the stop is due at this instant: wait for it
            self.log("round_start", "waiting for updates")
            while len(self._arrived) < self.params.buffer:
                self._full = self.env.event()
                yield self._full
            batch, self._arrived = self._arrived[: self.params.buffer], self._arrived[self.params.buffer :]
            versions = {job: self._versions.pop(job) for job in batch}
            self._aggregate(available=[], selected=[], delivered=batch, dropped=self._lost, versions=versions)
            self._lost = 0
            self.rounds_done += 1
            self.on_round_end(self.round_index)
            self.round_index += 1

    def _worker(self, device: Device):
        """A device acting on its own: whenever available, pull, train its own K steps, push."""
        job = 0
        while True:
            pause = float(self.draws.pause(device.index, job))
            if pause > 0:
                yield self.env.timeout(pause)
            while not device.eligible(self.round_index):
                yield device.changed()
            if self.stopping():
                return  # a job pulled at the stop would never finish
            yield self._pull(device, job)
            job += 1

    def _pull_device(self, index: int, job: int) -> simpy.Event:
        self.devices.activate([index])
        return self._pull(self.devices[index], job)

    def _pull(self, device: Device, job: int) -> simpy.Event:
        """Job number ``job`` of ``device``: pull the current model, train, push; the event fires when the worker
        is free again (its update reached its node, or was lost)."""
        steps = self.draws.steps(device.index, job)
        work = self.backend.submit(device.index, self.round_index, steps=steps)
        self._versions[work.job] = self.round_index
        device.log("pull", job=work.job, task=work.task, version=self.round_index, steps=steps)
        done = self.env.event()
        device.start_task(
            work,
            uploaded=lambda j, d=device, e=done, w=work: self.env.process(self._carry(w, d, e)),
            lost=lambda j, e=done: self._lose(j, e),
        )
        return done

    def _lose(self, job: int, done: simpy.Event) -> None:
        self._versions.pop(job, None)
        self.backend.cancel(job)
        self._lost += 1
        settle(done, False)

    def _carry(self, work: Work, device: Device, done: simpy.Event):
        """An upload that left its device; the worker pulls again once it reached the device's node."""
        hops = self.network.route_up(self.network.attachments.node(device.index))
        yield from self.network.in_flight(device.index)
        if hops:
            settle(done, True)  # the worker goes on once its update reached its node
            yield from self.network.forward(hops, 8.0 * work.upload_bytes)
        self._arrived.append(work.job)
        if len(self._arrived) >= self.params.buffer and not self._full.triggered:
            self._full.succeed()  # scheduled before the worker wakes: a same-instant pull sees the new model
        settle(done, True)
