"""The server's schedule: synchronous rounds, or anarchic asynchronous arrivals.

Synchronous (``SyncServer``): each round, ask every device whether it is
eligible (policy, battery), ask the backend for the round's plan (its
strategy picks who trains which model: by default ``participants`` of the
eligible uniformly at random; a plan may first probe the clients for small
reports, then assign), start the work, wait until every upload has arrived
(at the server, or at a RAM relay on its route) or was lost, or until the
deadline -- one deadline for the probe and the work together;
stop the stragglers (their work is lost), let each relay pass its one
update, aggregate what arrived, and start the next round. Over-commit
(Bonawitz et al., "Towards Federated Learning at Scale: System Design"):
the backend asks more devices than the round needs, and the round closes
as soon as ``goal`` updates reached the server; the stragglers are stopped
(a dropout with cause ``over_commit``, their energy spent). A round in which
nobody is available still counts (per-round policies and algorithms such as
FedAU see it as a round everybody missed); the server then waits
``idle_wait``. With an ``interval``, rounds start at most that often
(production FL paces rounds so as not to exhaust the eligible devices).

Asynchronous (``AsyncServer``, Anarchic FL): every device is a
worker that, whenever it is available, pulls the current model, trains its
own number of local steps and sends the update back; the server aggregates
whenever ``buffer`` updates have arrived, each tagged with the model version
it started from. Staleness (current version minus start version) is not
drawn: it comes out of the simulated devices, availability and network.

Each server reads its parameters from their declaration, the object a
scenario's ``server.round`` or ``server.async`` was validated into
(:mod:`netfl.registry.server_params`): a new one is a field there and its
use here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import simpy

from netfl.backend import CloudContext, RoundContext, TrainingBackend, Work
from netfl.registry.server_params import AsyncSpec, RoundSpec
from netfl.sim.device import Deadline, Device
from netfl.sim.edge import EdgeServer, EdgeTier
from netfl.sim.lazy_fleet import LazyFleet
from netfl.sim.network import Network
from netfl.sim.recorder import SERVER, EventRecorder
from netfl.sim.relay import RamRelay
from netfl.sim.workers import ArrayArrivals, WorkerDraws


class _ServerBase:
    def __init__(
        self,
        env: simpy.Environment,
        devices: Sequence[Device],
        backend: TrainingBackend,
        recorder: EventRecorder,
        network: Network,
        *,
        max_rounds: int | None,
        on_round_end: Callable[[int], None],
        stop_s: float | None = None,
    ):
        self.env = env
        self.devices = devices
        self.backend = backend
        self.recorder = recorder
        self.network = network
        self.max_rounds = max_rounds
        self.stop_s = math.inf if stop_s is None else stop_s  # the run ends here (stop.sim_time)
        self.on_round_end = on_round_end
        self.round_index = 0  # the round in progress (or next to start); = the global model version
        self.rounds_done = 0
        self.updates_received = 0
        self.updates_applied = 0
        self.updates_dropped = 0
        self.staleness: list[int] = []  # one entry per applied update

    def log(self, kind: str, detail: str = "", **fields) -> None:
        self.recorder.log(self.env.now, self.round_index, SERVER, kind, detail, **fields)

    def stopping(self) -> bool:
        """Whether the run ends at this instant (stop.sim_time): work started now would never finish, so none is
        (work finishing now still counts)."""
        return self.env.now >= self.stop_s

    def describe_process(self, name: str) -> str | None:
        """Which of the server's processes ``name`` is, for the watchdog's message (netfl/sim/watchdog.py)."""
        return {
            "run": "the server's rounds (taking no simulated time)",
            "_worker": "an asynchronous worker",
            "_carry": "an update in flight",
        }.get(name)

    def _aggregate(self, available, selected, delivered: list[int], dropped: int, versions: dict[int, int]) -> None:
        context = RoundContext(
            round_index=self.round_index,
            sim_time_s=self.env.now,
            available=available,
            selected=tuple(selected),
            delivered=tuple(delivered),
        )
        applied = self.backend.aggregate(context)
        stale = [self.round_index - versions[job] for job in delivered]
        self.staleness += stale
        self.updates_received += len(delivered)
        self.updates_applied += applied
        self.updates_dropped += dropped
        detail = "staleness=" + ",".join(map(str, stale)) if stale and max(stale) > 0 else ""
        self.log(
            "aggregate",
            detail,
            staleness=max(stale) if stale else None,
            received=len(delivered),
            applied=applied,
            dropped=dropped,
        )


class SyncServer(_ServerBase):
    def __init__(
        self,
        env,
        devices,
        backend,
        recorder,
        network,
        params: RoundSpec,
        *,
        max_rounds: int | None,
        on_round_end: Callable[[int], None],
        stop_s: float | None = None,
        relays: dict[str, RamRelay] | None = None,
        edges: EdgeTier | None = None,
    ):
        super().__init__(
            env, devices, backend, recorder, network, max_rounds=max_rounds, on_round_end=on_round_end, stop_s=stop_s
        )
        self.params = params  # deadline, idle_wait, interval, over-commit's goal, partial work (seconds)
        self.relays = relays or {}
        self.edges = edges
        self._stops = set(self.relays) | self.network.edges  # where an update's trip ends before the server

    def run(self):
        while self.max_rounds is None or self.rounds_done < self.max_rounds:
            if self.stopping():
                yield self.env.event()  # the stop is due at this instant: wait for it
            started = self.env.now
            yield from self._round()
            if self.edges is not None and self.edges.cloud_round(self.round_index):
                yield from self._cloud()
            if self.env.now - started < self.params.interval:
                yield self.env.timeout(started + self.params.interval - self.env.now)
            self.rounds_done += 1
            self.on_round_end(self.round_index)
            self.round_index += 1

    def _round(self):
        r = self.round_index
        available = self.devices.eligible(r)
        if self.edges is not None:
            available = self.edges.reachable(available, r)
        self.log("round_start", available=len(available))
        plan = self.backend.plan_round(r, available)
        if not plan.work:
            for relay in self.relays.values():
                relay.idle_round()
            yield self.env.timeout(self.params.idle_wait)
            self._aggregate(available=(), selected=[], delivered=[], dropped=0, versions={})
            return
        deadline = None if math.isinf(self.params.deadline) else self.env.timeout(self.params.deadline)
        self._deadline_at = self.env.now + self.params.deadline
        selected = sorted({w.client for w in plan.work})
        if plan.probe:
            probes = yield from self._run(plan.work, deadline)
            plan = self.backend.plan_after_probe(r, probes.delivered)
            selected = sorted(set(selected) | {w.client for w in plan.work})
        state = yield from self._run(plan.work, deadline, self.params.goal)
        for relay_name, relay in self.relays.items():  # each relay passes its one update of the round
            job = relay.release()
            if job is not None:
                yield from self.network.forward(self.network.route_up(relay_name), 8.0 * state.work[job].upload_bytes)
                state.delivered.append(job)
        for job in state.work:
            if job not in state.delivered:
                self.backend.cancel(job)
        self._aggregate(
            available=available,
            selected=selected,
            delivered=state.delivered,
            dropped=len(state.work) - len(state.delivered),
            versions={job: r for job in state.work},
        )
        self.devices.release(selected)

    def _cloud(self):
        """Hierarchical FL: the edges that are up send their models to the cloud, which averages them and sends
        the result back; each edge's transfers cross its wired route to the server, all edges at once."""
        up = [edge for edge in self.edges.edges if edge.online]
        bits = 8.0 * self.edges.model_bytes
        yield self.env.all_of([self.env.process(self._edge_transfer(edge, bits, "upload")) for edge in up])
        context = CloudContext(self.round_index, self.env.now, tuple(edge.index for edge in up))
        applied = self.backend.aggregate_cloud(context)
        self.log("cloud_aggregate", f"edges={','.join(e.name for e in up)}", applied=applied)
        yield self.env.all_of([self.env.process(self._edge_transfer(edge, bits, "download")) for edge in up])

    def _edge_transfer(self, edge: EdgeServer, bits: float, direction: str):
        """An edge model up to the cloud, or the cloud's model down to an edge, over the edge's wired route."""
        hops = self.network.route_up(edge.name)
        self.log(f"edge_{direction}_start", edge=edge.name, bytes=bits / 8)
        yield from self.network.forward(hops if direction == "upload" else hops[::-1], bits)
        self.log(f"edge_{direction}_end", edge=edge.name)

    def _run(self, work: Sequence[Work], deadline: simpy.Event | None, goal: int | None = None):
        """Start every item of ``work`` and wait until all arrived or were lost, the deadline, or ``goal`` arrivals.

        Stragglers are stopped at the deadline, or once ``goal`` updates reached the server (over-commit);
        their work is lost. Work whose device went away since the round started, or that would start
        after the deadline, is lost without starting.
        """
        state = _RoundState({w.job: w for w in work}, None if goal is None else (goal, self.env.event()))
        self.devices.activate([w.client for w in work])
        for w in work:
            device = self.devices[w.client]
            state.done[w.job] = self.env.event()
            device.log("selected", w.note, job=w.job, task=w.task)
            if (deadline is not None and deadline.processed) or not device.can_start():
                device.log("dropout", job=w.job, task=w.task, cause="deadline" if device.can_start() else "unavailable")
                _settle(state.done[w.job], False)
                continue
            device.start_task(
                w,
                uploaded=lambda j, d=device: self.env.process(self._carry(j, d, state)),
                lost=lambda j: _settle(state.done[j], False),
                deadline=self._partial(w) if self.params.partial_work else None,
            )
        everyone = self.env.all_of(list(state.done.values()))
        close = everyone if deadline is None else everyone | deadline
        yield close if state.goal is None else close | state.goal[1]
        state.open = False
        cause = "over_commit" if state.goal is not None and state.goal[1].triggered else "deadline"
        stragglers = [self.devices[w.client].task for w in work]
        stragglers = [t for t in stragglers if t is not None and t.is_alive]
        for task in stragglers:
            task.interrupt(cause)
        if stragglers:
            yield self.env.all_of(stragglers)
        return state

    def _hops_in(self, device: int) -> list:
        """The wired hops an update travels once it left the device: to the server, a RAM relay or an edge."""
        return self.network.route_below(self.network.attachments.node(device), self._stops)

    def _partial(self, work: Work) -> Deadline:
        """Partial work: the upload's last bit must leave the device in time for its latency and wired hops to end
        before the deadline."""
        bits = 8.0 * work.upload_bytes
        carry_s = self.network.attachments.latency(work.client) + sum(h.time(bits) for h in self._hops_in(work.client))
        return Deadline(self._deadline_at - carry_s, self.backend.cut, self.params.partial_margin)

    def _carry(self, job: int, device: Device, state: _RoundState):
        """An upload that left its device: its own hop's latency, then the wired hops to the server or to a RAM
        relay. The device is no longer needed: it may go offline or die meanwhile."""
        node = self.network.attachments.node(device.index)
        hops = self._hops_in(device.index)
        yield from self.network.in_flight(device.index)
        yield from self.network.forward(hops, 8.0 * state.work[job].upload_bytes)
        stop = hops[-1].target if hops else node
        if not state.open:
            device.log("late", job=job, task=state.work[job].task)
        elif stop in self.relays:
            self.relays[stop].hold(job, device.index, state.work[job].upload_bytes)
        else:
            state.delivered.append(job)
            if state.goal is not None and len(state.delivered) >= state.goal[0]:
                state.open = False  # the first `goal` are in: any later arrival, even at this instant, is late
                _settle(state.goal[1], True)
        _settle(state.done[job], True)


class _RoundState:
    def __init__(self, work: dict[int, Work], goal: tuple[int, simpy.Event] | None = None):
        self.work = work
        self.done: dict[int, simpy.Event] = {}
        self.delivered: list[int] = []
        self.open = True
        self.goal = goal  # over-commit: (updates that close the round, the event that they have arrived)


def _settle(event: simpy.Event, value: bool) -> None:
    if not event.triggered:
        event.succeed(value)


class AsyncServer(_ServerBase):
    def __init__(
        self,
        env,
        devices,
        backend,
        recorder,
        network,
        params: AsyncSpec,
        draws: WorkerDraws,
        *,
        max_rounds: int | None,
        on_round_end: Callable[[int], None],
        stop_s: float | None = None,
        reads_at: Callable[[float], float] = lambda now: now,
    ):
        """``reads_at(now)``: the first instant from ``now`` on at which the simulation reads every device on its
        own schedule (its evaluations on a time grid); the array form takes idle devices no further ahead of the
        clock (netfl/sim/workers.py). By default, every instant."""
        super().__init__(
            env, devices, backend, recorder, network, max_rounds=max_rounds, on_round_end=on_round_end, stop_s=stop_s
        )
        self.params = params  # buffer: aggregate every this many arrivals
        self.draws = draws  # each worker's pauses and local steps (params.pause, params.local_steps)
        self.reads_at = reads_at
        self._arrived: list[int] = []
        self._versions: dict[int, int] = {}
        self._lost = 0
        self._full: simpy.Event = env.event()

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
        _settle(done, False)

    def _carry(self, work: Work, device: Device, done: simpy.Event):
        """An upload that left its device; the worker pulls again once it reached the device's node."""
        hops = self.network.route_up(self.network.attachments.node(device.index))
        yield from self.network.in_flight(device.index)
        if hops:
            _settle(done, True)  # the worker goes on once its update reached its node
            yield from self.network.forward(hops, 8.0 * work.upload_bytes)
        self._arrived.append(work.job)
        if len(self._arrived) >= self.params.buffer and not self._full.triggered:
            self._full.succeed()  # scheduled before the worker wakes: a same-instant pull sees the new model
        _settle(done, True)
