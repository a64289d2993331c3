"""The synchronous server: rounds.

Each round, ask every device whether it is
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

It reads its parameters from ``server.round``'s declaration (:class:`~netfl.registry.server_params.RoundSpec`);
what it shares with the asynchronous server is netfl/sim/server.py's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import simpy

from netfl.backend import CloudContext, DeviceStates, Work
from netfl.registry.server_params import RoundSpec
from netfl.sim.device import Deadline, Device
from netfl.sim.edge import EdgeServer, EdgeTier
from netfl.sim.relay import RamRelay
from netfl.sim.server import ServerBase, settle


class SyncServer(ServerBase):
    params: RoundSpec  # deadline, idle_wait, interval, over-commit's goal, partial work (seconds)

    def __init__(self, *parts, relays: dict[str, RamRelay] | None = None, edges: EdgeTier | None = None, **common):
        """``parts``, ``common``: :class:`~netfl.sim.server.ServerBase`'s; ``relays``: the RAM relays by node,
        ``edges``: hierarchical FL's edge tier."""
        super().__init__(*parts, **common)
        self.relays = relays or {}
        self.edges = edges
        self._stops = set(self.relays) | self.network.edges  # where an update's trip ends before the server
        self._last_selected: dict[int, float] = {}  # when the server last asked each device (those it ever asked)

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
        plan = self.backend.plan_round(r, available, DeviceStates(available, self.env.now, self._observe))
        if not plan.work:
            for relay in self.relays.values():
                relay.idle_round()
            yield self.env.timeout(self.params.idle_wait)
            self._aggregate(available=(), selected=[], delivered=[], dropped=0, versions={})
            return
        deadline = None if math.isinf(self.params.deadline) else self.env.timeout(self.params.deadline)
        self._deadline_at = self.env.now + self.params.deadline
        selected = sorted({w.client for w in plan.work})
        self._last_selected.update(dict.fromkeys(selected, self.env.now))
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

    def _observe(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        """What a strategy may observe of the devices ``indices`` now (:class:`~netfl.backend.DeviceStates`): read
        from the fleet's state, which advances idle devices without drawing or settling anything, so reading it
        leaves the run as it is."""
        state = self.devices.state_at(self.env.now)
        last = self._last_selected
        return {
            "battery": state.battery[indices].astype(np.float64),
            "charging": state.charging[indices].astype(bool),
            "uplink_bps": np.array([1.0 / self.network.send_estimate_s(int(i), 1.0) for i in indices]),
            "tasks_started": state.tasks_started[indices].astype(np.int64),
            "updates_delivered": state.updates_delivered[indices].astype(np.int64),
            "last_selected_s": np.array([last.get(int(i), math.nan) for i in indices], dtype=np.float64),
        }

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
                settle(state.done[w.job], False)
                continue
            device.start_task(
                w,
                uploaded=lambda j, d=device: self.env.process(self._carry(j, d, state)),
                lost=lambda j: settle(state.done[j], False),
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
                settle(state.goal[1], True)
        settle(state.done[job], True)


class _RoundState:
    def __init__(self, work: dict[int, Work], goal: tuple[int, simpy.Event] | None = None):
        self.work = work
        self.done: dict[int, simpy.Event] = {}
        self.delivered: list[int] = []
        self.open = True
        self.goal = goal  # over-commit: (updates that close the round, the event that they have arrived)
