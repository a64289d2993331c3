"""Run a simulated world.

``Simulation`` owns the SimPy environment, the devices and the server, all
made from a :class:`~netfl.sim.world.World` (plain objects; see
:mod:`netfl.assemble` for making one from a scenario). The learner is reached
only through :class:`~netfl.backend.TrainingBackend`; the engine never
touches tensors.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from netfl.backend import Diverged, Divergence, Evaluation, TrainingBackend
from netfl.registry.server_params import AsyncSpec
from netfl.signals import interrupts_kept
from netfl.sim.async_server import AsyncServer
from netfl.sim.build import build_edges, build_fleet, build_relays
from netfl.sim.device import Device
from netfl.sim.fleet import EagerFleet, Fleet
from netfl.sim.fleet_readings import DeviceStats, fleet_energy_j
from netfl.sim.idle_events import IdleEvents
from netfl.sim.network import Attachments, Counters, Network
from netfl.sim.recorder import SERVER, EventRecorder
from netfl.sim.sync_server import SyncServer
from netfl.sim.timeline import Timeline
from netfl.sim.watchdog import WatchedEnvironment, event_limit
from netfl.sim.workers import WorkerDraws
from netfl.sim.world import World


@dataclass
class MetricRow:
    sim_time_s: float
    round: int
    test_accuracy: float
    test_loss: float
    participants: int
    per_class_accuracy: tuple[float, ...] = ()
    tasks: tuple[Evaluation, ...] = ()  # each model's own results when several are trained (test_* is their mean)
    energy_j: float = math.nan  # drawn by all devices so far (the summary's energy_j at the stop time)
    work_energy_j: float = math.nan  # of which training and the radio: all but the idle draw


@dataclass
class SimulationResult:
    rounds: int
    sim_time_s: float
    metrics: list[MetricRow]
    recorder: EventRecorder
    stats: DeviceStats  # per device, either engine
    updates_received: int
    updates_applied: int
    updates_dropped: int
    # "rounds", "sim_time", "accuracy", "stalled" (nothing left to happen), "diverged" or "interrupted"
    stopped_by: str
    network: Counters = field(default_factory=Counters)
    staleness: list[int] = field(default_factory=list)  # of each applied update, in rounds
    relays: dict[str, dict[str, int]] = field(default_factory=dict)
    devices: list[Device] = field(default_factory=list)  # the actor form's actors, to inspect (array form: none)
    divergence: Divergence | None = None  # what the learner found when stopped_by is "diverged"
    timeline: Timeline | None = None  # the world at every evaluation, per device group (timeline.parquet)

    @property
    def energy_j(self) -> float:
        return float(self.stats.energy_j.sum())

    @property
    def work_energy_j(self) -> float:
        """What training and the radio drew (all but the idle draw): the energy federated learning cost."""
        return fleet_energy_j(self.stats.energy_by_activity_j, work_only=True)


class Simulation:
    """One world and the learner it drives, ready to :meth:`run`."""

    def __init__(self, world: World, backend: TrainingBackend):
        self.world = world
        self.backend = backend
        self.env = WatchedEnvironment(event_limit(len(world.devices)))  # time that stops advancing is an error
        self.recorder = EventRecorder()
        # the array form's idle devices' events, put into the log at the end (the actor form logs its own)
        self.idle_events = IdleEvents(self.recorder) if world.idle_events and world.population is not None else None
        self._round_ends: list[float] = []  # when the round index went up: the round of each idle event
        self.metrics: list[MetricRow] = []
        self._last_participants = 0
        table, streams = world.devices, world.streams
        self.server: SyncServer | AsyncServer | None = None  # built below, after the devices it schedules
        current_round = lambda: self.server.round_index if self.server is not None else 0  # noqa: E731
        log = lambda device, kind, detail="", **fields: self.recorder.log(  # noqa: E731
            self.env.now, current_round(), device, kind, detail, **fields
        )
        self.network = Network(
            self.env, world.nodes, world.wires, Attachments(table, world.links, world.nodes, streams), streams, log
        )
        self.devices: Fleet = build_fleet(self.env, world, self.network, self.recorder, current_round, self.idle_events)
        self.relays = build_relays(world, self.network, log)
        self.edges = build_edges(self.env, world, self.network, partial(log, SERVER))
        common = dict(max_rounds=world.stop.rounds, stop_s=world.stop.sim_time, on_round_end=self._round_ended)
        parts = (self.env, self.devices, backend, self.recorder, self.network)
        if isinstance(world.server, AsyncSpec):
            draws = WorkerDraws(streams.integer_seed("workers"), world.server.pause, world.server.local_steps)
            self.server = AsyncServer(*parts, world.server, draws=draws, reads_at=self._reads_at, **common)
        else:
            self.server = SyncServer(*parts, world.server, relays=self.relays, edges=self.edges, **common)
        self.progress: Callable[[float, int, float | None], None] | None = None
        self.target_reached = self.env.event()  # succeeds at the first evaluation reaching stop.accuracy
        self.timeline = Timeline(table.group, table.group_names, self.recorder)
        self._grid_read_s = math.inf  # the next evaluation on the time grid (_evaluate_on_grid)

    def _round_ended(self, round_index: int) -> None:
        if self.idle_events is not None:
            self._round_ends.append(self.env.now)
        every = self.world.evaluate
        if every.seconds is None and (round_index + 1) % every.rounds == 0:
            self._evaluate(round_index + 1)
        if self.progress is not None:
            last = self.metrics[-1].test_accuracy if self.metrics else None
            self.progress(self.env.now, round_index + 1, last)

    def _evaluate_on_grid(self, every_s: float):
        """Evaluate at every multiple of ``every_s`` simulated seconds, whatever the rounds are doing."""
        k = 1
        while True:
            delay = k * every_s - self.env.now
            self._grid_read_s = self.env.now + delay  # when the timeout fires, to the bit
            yield self.env.timeout(delay)
            if self.env.peek() == math.inf:  # nothing else will ever happen: let the run end as stalled
                return
            self._evaluate(self.server.rounds_done)
            k += 1

    def _reads_at(self, now: float) -> float:
        """The first instant from ``now`` on at which the simulation reads every device on its own schedule: time 0
        (the timeline's first reading), each evaluation on a time grid (the array form's asynchronous arrivals take
        idle devices no further ahead of the clock, netfl/sim/workers.py)."""
        return 0.0 if now <= 0 else self._grid_read_s

    def _read_start(self):
        """The timeline's first reading: time 0 once its events are over (devices asked their policies, round 0
        started), not before them, when every device still looks offline."""
        while self.env.peek() <= self.env.now:
            yield self.env.timeout(0)
        self.timeline.read(self.env.now, self.devices.state_at(self.env.now), start=True)

    def _evaluate(self, rounds_done: int) -> None:
        result: Evaluation = self.backend.evaluate()
        spent = self.devices.energy_spent_at(self.env.now)
        received = self.server.updates_received
        self.metrics.append(
            MetricRow(
                self.env.now,
                rounds_done,
                result.accuracy,
                result.loss,
                received - self._last_participants,
                result.per_class_accuracy,
                result.tasks,
                *spent,
            )
        )
        self._last_participants = received
        if self.env.now > 0:  # time 0's reading waits for the instant's events (_read_start)
            self.timeline.read(self.env.now, self.devices.state_at(self.env.now))
        target = self.world.stop.accuracy
        if target is not None and result.accuracy >= target and not self.target_reached.triggered:
            self.target_reached.succeed()

    def run(self) -> SimulationResult:
        stop, every_s = self.world.stop, self.world.evaluate.seconds
        if not self.metrics:
            self._evaluate(0)  # the starting point of every accuracy-vs-time curve
            self.env.process(self._read_start())
        server = self.env.process(self.server.run())
        if every_s is not None:
            self.env.process(self._evaluate_on_grid(every_s))
        limits = [server] + ([self.target_reached] if stop.accuracy is not None else [])
        if stop.sim_time is not None:
            limits.append(self.env.timeout(stop.sim_time))
        try:
            with interrupts_kept() as struck:
                self.env.interrupted = struck
                self.env.run(until=limits[0] if len(limits) == 1 else self.env.any_of(limits))
            stopped_by = (
                "accuracy" if self.target_reached.triggered else "rounds" if not server.is_alive else "sim_time"
            )
        except RuntimeError:  # SimPy's "no scheduled events left": e.g. every async worker is dead for good
            if not math.isinf(self.env.peek()):  # something else went wrong
                raise
            stopped_by = "stalled"
        except Diverged as exc:  # a NaN or inf in training: nothing after it would mean anything
            return self._result("diverged", exc.divergence)
        last = self.metrics[-1]
        changed = last.round != self.server.rounds_done  # the model changed since the last evaluation
        on_grid = every_s is not None
        if stopped_by != "accuracy" and (changed or (on_grid and last.sim_time_s < self.env.now)):
            try:
                self._evaluate(self.server.rounds_done)  # on a time grid, the curve also ends at the stop time
            except Diverged as exc:  # the last model is the first that is not finite, or whose loss exploded
                return self._result("diverged", exc.divergence)
        return self._result(stopped_by)

    def partial_result(self) -> SimulationResult:
        """What is known so far, for a run interrupted from outside (Ctrl-C), which may have struck mid-event."""
        self.recorder.drop_unfinished()
        self.devices.halt()
        return self._result("interrupted")

    def diverged_result(self, divergence: Divergence) -> SimulationResult:
        """The result of a run whose initial model's evaluation (before the engine ran) was not finite."""
        return self._result("diverged", divergence)

    def _result(self, stopped_by: str, divergence: Divergence | None = None) -> SimulationResult:
        stats = self.devices.stats()  # the array form takes its idle devices' last changes
        waiting, lost = self.server.unaggregated  # an asynchronous buffer's updates that no aggregation took
        if self.idle_events is not None:
            self.idle_events.into(self.recorder, self._round_ends, until=self.env.now)
        return SimulationResult(
            rounds=self.server.rounds_done,
            sim_time_s=self.env.now,
            metrics=self.metrics,
            recorder=self.recorder,
            stats=stats,
            updates_received=self.server.updates_received + waiting,  # received, applied or not
            updates_applied=self.server.updates_applied,
            updates_dropped=self.server.updates_dropped + lost,
            stopped_by=stopped_by,
            network=self.network.counters,
            staleness=list(self.server.staleness),
            relays={
                name: {"passed": r.passed, "dropped": r.dropped, "erasures": r.erasures}
                for name, r in self.relays.items()
            },
            devices=list(self.devices) if isinstance(self.devices, EagerFleet) else [],
            divergence=divergence,
            timeline=self.timeline,
        )
