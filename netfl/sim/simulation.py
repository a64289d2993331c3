"""Build the simulated world from a scenario and run it.

``Simulation`` owns the SimPy environment, the devices and the server; the
learner is reached only through :class:`~netfl.backend.TrainingBackend`.
This module does not import torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import simpy

from netfl.policies import AvailabilityPolicy, SessionPolicy
from netfl.rng import RandomStreams
from netfl.scenario import Scenario
from netfl.backend import Evaluation, TrainingBackend
from netfl.sim.battery import Battery
from netfl.sim.device import Device, DeviceProfile
from netfl.sim.recorder import EventRecorder
from netfl.sim.network import Counters, Network, build_attachments, ram_weights
from netfl.sim.relay import RamRelay
from netfl.sim.server import AsyncServer, SyncServer

# Radio receive power when the scenario gives none: about half the uplink
# transmit power (receive chains draw less than the power amplifier).
RECEIVE_TO_TRANSMIT_POWER = 0.5


@dataclass
class MetricRow:
    sim_time_s: float
    round: int
    test_accuracy: float
    test_loss: float
    participants: int
    per_class_accuracy: tuple[float, ...] = ()
    tasks: tuple[Evaluation, ...] = ()  # each model's own results when several are trained (test_* is their mean)


@dataclass
class SimulationResult:
    rounds: int
    sim_time_s: float
    metrics: list[MetricRow]
    recorder: EventRecorder
    devices: list[Device]
    updates_received: int
    updates_applied: int
    updates_dropped: int
    stopped_by: str  # "rounds", "sim_time", "stalled" (nothing left to happen) or "interrupted"
    network: Counters = field(default_factory=Counters)
    staleness: list[int] = field(default_factory=list)  # of each applied update, in rounds
    relays: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def energy_j(self) -> float:
        return sum(d.battery.total_energy_j for d in self.devices)


def device_profiles(scenario: Scenario, streams: RandomStreams) -> list[DeviceProfile]:
    """Draw every device's physical parameters (one seeded stream per group and quantity)."""
    profiles: list[DeviceProfile] = []
    for group in scenario.devices:
        def draw(name, dist):
            return dist.sample(streams.numpy("devices", group.group, name), group.count)

        speed = draw("flops_per_s", group.compute.flops_per_s)
        for j in range(group.count):
            profiles.append(DeviceProfile(
                index=len(profiles), group=group.group, flops_per_s=float(speed[j]),
                compute_w=group.power.compute, transmit_w=group.power.transmit,
                receive_w=group.power.transmit * RECEIVE_TO_TRANSMIT_POWER, idle_w=group.power.idle))
    return profiles


def device_link_rates(scenario: Scenario, streams: RandomStreams) -> tuple[list[float | None], list[float | None]]:
    """Fixed uplink and downlink rates per device (None where a wireless channel or the node decides)."""
    ups: list[float | None] = []
    downs: list[float | None] = []
    for group in scenario.devices:
        link = group.link
        draw = lambda name, dist: dist.sample(streams.numpy("devices", group.group, name), group.count)  # noqa: E731
        up = draw("uplink", link.uplink) if link.uplink is not None else [None] * group.count
        down = draw("downlink", link.downlink) if link.downlink is not None else (
            up if link.to is None else [None] * group.count)
        ups += [None if u is None else float(u) for u in up]
        downs += [None if d is None else float(d) for d in down]
    return ups, downs


def device_batteries(scenario: Scenario, streams: RandomStreams) -> list[Battery]:
    batteries: list[Battery] = []
    for group in scenario.devices:
        spec = group.battery
        if spec is None:
            batteries += [Battery() for _ in range(group.count)]
            continue
        initial = spec.initial.sample(streams.numpy("devices", group.group, "battery_initial"), group.count)
        batteries += [Battery(spec.capacity, spec.capacity * float(f), spec.min_level, spec.charge_power)
                      for f in initial]
    return batteries


class Simulation:
    def __init__(self, scenario: Scenario, backend: TrainingBackend, policies: Sequence[AvailabilityPolicy],
                 streams: RandomStreams, chargers: Sequence[SessionPolicy | None] | None = None):
        self.scenario = scenario
        self.backend = backend
        self.env = simpy.Environment()
        self.recorder = EventRecorder()
        self.metrics: list[MetricRow] = []
        self._last_participants = 0
        profiles = device_profiles(scenario, streams)
        batteries = device_batteries(scenario, streams)
        if len(policies) != len(profiles):
            raise ValueError(f"{len(policies)} policies for {len(profiles)} devices")
        self.server: SyncServer | AsyncServer | None = None  # built below, after the devices it schedules
        current_round = lambda: self.server.round_index if self.server is not None else 0  # noqa: E731
        log = lambda device, kind, detail="": self.recorder.log(self.env.now, current_round(), device, kind, detail)  # noqa: E731
        ups, downs = device_link_rates(scenario, streams)
        attachments = build_attachments(scenario, streams, ups, downs)
        self.network = Network(self.env, scenario, attachments, streams, log)
        chargers = chargers if chargers is not None else [None] * len(profiles)
        self.devices = [Device(self.env, p, b, pol, self.recorder, current_round, self.network, charger)
                        for p, b, pol, charger in zip(profiles, batteries, policies, chargers)]
        self.relays = self._build_relays(streams, log)
        server = scenario.server
        common = dict(max_rounds=scenario.stop.rounds, on_round_end=self._round_ended)
        if server.mode == "async":
            a = server.async_
            self.server = AsyncServer(self.env, self.devices, backend, self.recorder, self.network,
                                      streams.numpy("workers"), buffer=a.buffer, local_steps=a.local_steps,
                                      pause_s=a.pause, **common)
        else:
            rs = server.round
            self.server = SyncServer(
                self.env, self.devices, backend, self.recorder, self.network, streams.numpy("selection"),
                participants=rs.participants, deadline_s=rs.deadline, idle_wait_s=rs.idle_wait,
                interval_s=rs.interval, relays=self.relays, **common)
        self.progress: Callable[[float, int, float | None], None] | None = None

    def _build_relays(self, streams: RandomStreams, log) -> dict[str, RamRelay]:
        relays = {}
        for name, node in self.scenario.network.nodes.items():
            if node.ram is None:
                continue
            behind = [i for i, att in enumerate(self.network.attachments) if name in self.network.path_nodes(att.node)]
            weights = ram_weights(node.ram.rho, [self.network.attachments[i].channel for i in behind])
            relays[name] = RamRelay(name, node.ram.mode, dict(zip(behind, weights)), streams.numpy("relay", name), log)
        return relays

    def _round_ended(self, round_index: int) -> None:
        if (round_index + 1) % self.scenario.eval.every == 0:
            self._evaluate(round_index + 1)
        if self.progress is not None:
            last = self.metrics[-1].test_accuracy if self.metrics else None
            self.progress(self.env.now, round_index + 1, last)

    def _evaluate(self, rounds_done: int) -> None:
        result: Evaluation = self.backend.evaluate()
        received = self.server.updates_received
        self.metrics.append(MetricRow(self.env.now, rounds_done, result.accuracy, result.loss,
                                      received - self._last_participants, result.per_class_accuracy, result.tasks))
        self._last_participants = received

    def run(self) -> SimulationResult:
        if not self.metrics:
            self._evaluate(0)  # the starting point of every accuracy-vs-time curve
        server = self.env.process(self.server.run())
        limit = self.scenario.stop.sim_time
        until = server if limit is None else self.env.any_of([server, self.env.timeout(limit)])
        try:
            self.env.run(until=until)
            stopped_by = "rounds" if not server.is_alive else "sim_time"
        except RuntimeError as exc:  # nothing left to happen: e.g. every async worker is dead for good
            if "No scheduled events left" not in str(exc):
                raise
            stopped_by = "stalled"
        if self.metrics[-1].round != self.server.rounds_done:  # the model changed since the last evaluation
            self._evaluate(self.server.rounds_done)
        return self._result(stopped_by)

    def partial_result(self) -> SimulationResult:
        """What is known so far, for a run interrupted from outside (Ctrl-C)."""
        return self._result("interrupted")

    def _result(self, stopped_by: str) -> SimulationResult:
        for device in self.devices:
            device.settle()
        return SimulationResult(
            rounds=self.server.rounds_done, sim_time_s=self.env.now, metrics=self.metrics,
            recorder=self.recorder, devices=self.devices, updates_received=self.server.updates_received,
            updates_applied=self.server.updates_applied, updates_dropped=self.server.updates_dropped,
            stopped_by=stopped_by, network=self.network.counters, staleness=list(self.server.staleness),
            relays={name: {"passed": r.passed, "dropped": r.dropped} for name, r in self.relays.items()})
