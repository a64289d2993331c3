"""Engine test support: a fake training backend, tiny scenarios and event queries (no torch).

The fake :class:`FakeBackend` implements :class:`~netfl.backend.TrainingBackend`
with a fixed model size and job cost and records what the engine asked of it,
so every simulated instant a test checks can be computed by hand.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from netfl.assemble import build_world
from netfl.backend import Evaluation, RoundContext, RoundPlan, Work, sample_uniform
from netfl.config import scenario_from_dict
from netfl.events import EVENT_FIELDS
from netfl.policies import DeviceInfo, PolicyParams, RoundPolicy, SessionPolicy, build_policy
from netfl.registry.device_params import ChannelSpec
from netfl.rng import RandomStreams
from netfl.sim.channel import Channel
from netfl.sim.simulation import Simulation

REL = 1e-12

#: The events of the work (rounds, jobs, transfers), which the event log holds whichever form holds a device.
WORK_KINDS = {
    "round_start",
    "selected",
    "download_start",
    "download_end",
    "train_start",
    "train_end",
    "upload_start",
    "upload_end",
    "dropout",
    "aggregate",
    "late",
}


def approx(value: float) -> object:
    return pytest.approx(value, rel=REL, abs=1e-12)


def channel(seed: object = 0, *, distance_m: float = 100.0, bandwidth_hz: float = 1e6, **spec: object) -> Channel:
    """One device's channel, ``distance_m`` away over ``bandwidth_hz``, its other parameters declared as a topology
    declares them (:class:`~netfl.registry.device_params.ChannelSpec`: ``kind``, ``tx_power``, ``rate``...)."""
    declared = ChannelSpec(distance_m=distance_m, **spec)
    return Channel(declared, seed, distance_m=distance_m, bandwidth_hz=bandwidth_hz)


# ----------------------------------------------------------------- fixtures


class FakeBackend:
    """Implements netfl.backend.TrainingBackend; records every call.

    Rounds select ``participants`` of the available clients uniformly (all if None; ``simulate`` sets it from
    the scenario), each job downloading and uploading ``model_bytes`` and computing ``flops``.
    """

    def __init__(
        self, model_bytes: int = 250_000, flops: float = 2.5e9, participants: int | None = None, steps: int = 0
    ):
        self.model_bytes = model_bytes
        self.flops = flops
        self.participants = participants
        self.steps = steps  # local steps the FLOPs are made of (0: the work cannot be cut)
        self.cuts: list[tuple[int, int]] = []  # (job, steps) of partial work
        self.rng = np.random.default_rng(0)
        self.submitted: list[tuple[int, int, int]] = []  # (job, client, round)
        self.cancelled: list[int] = []
        self.contexts: list[RoundContext] = []
        self.clouds: list = []  # CloudContext of each cloud aggregation (hierarchical FL)
        self.evaluations = 0

    def plan_round(self, round_index: int, available, devices=None) -> RoundPlan:
        return RoundPlan(
            tuple(self.submit(c, round_index) for c in sample_uniform(available, self.participants, self.rng))
        )

    def plan_after_probe(self, round_index: int, reported) -> RoundPlan:
        raise AssertionError("FakeBackend never probes")

    def submit(self, client: int, round_index: int, steps: int | None = None) -> Work:
        job = len(self.submitted)
        self.submitted.append((job, client, round_index))
        return Work(client, job, self.model_bytes, self.flops, self.model_bytes, steps=self.steps)

    def cancel(self, job: int) -> None:
        self.cancelled.append(job)

    def cut(self, job: int, steps: int) -> None:
        self.cuts.append((job, steps))

    def aggregate(self, context: RoundContext) -> int:
        self.contexts.append(context)
        return len(context.delivered)

    def aggregate_cloud(self, context) -> int:
        self.clouds.append(context)
        return len(context.edges)

    def evaluate(self) -> Evaluation:
        self.evaluations += 1
        return Evaluation(accuracy=0.5, loss=1.0)

    def client_of(self, job: int) -> int:
        return self.submitted[job][1]


class AlwaysRound(RoundPolicy):
    """Available in every round (a round-based policy, so no session process)."""

    def participates(self, round_index: int) -> bool:
        return True


class NeverRound(RoundPolicy):
    def participates(self, round_index: int) -> bool:
        return False


def group(
    name: str,
    count: int = 1,
    *,
    flops: float = 1e9,
    up: float = 1e6,
    down: float | None = None,
    latency: float = 0.0,
    power: dict | None = None,
    battery: dict | None = None,
    availability: dict | None = None,
) -> dict:
    g = {"group": name, "count": count, "compute": {"flops_per_s": flops}, "link": {"uplink": up, "latency": latency}}
    if down is not None:
        g["link"]["downlink"] = down
    if power is not None:
        g["power"] = power
    if battery is not None:
        g["battery"] = battery
    if availability is not None:
        g["availability"] = availability
    return g


def scenario(
    devices: list[dict],
    *,
    stop: dict | None = None,
    round: dict | None = None,
    seed: int = 1,
    check_references: bool = True,
):
    data = {
        "name": "engine-test",
        "seed": seed,
        "stop": stop or {"rounds": 3},
        # the engine never trains; devices share samples so that any number of them is a valid scenario
        "task": {"dataset": {"name": "digits", "partition": {"samples_per_client": 10}}, "model": {"name": "logistic"}},
        "devices": devices,
        "server": {"round": round or {}},
    }
    return scenario_from_dict(data, check_references=check_references)


def info(i: int, group_name: str = "g") -> DeviceInfo:
    return DeviceInfo(index=i, group=group_name, num_samples=10, label_distribution=np.full(10, 0.1))


def simulate(sc, backend: FakeBackend, policy_cls: type[RoundPolicy] | None = AlwaysRound) -> tuple[Simulation, object]:
    """Build and run; ``policy_cls=None`` builds each group's policy from the scenario (as the runner does)."""
    streams = RandomStreams(sc.seed)
    groups = [g for g in sc.devices for _ in range(g.count)]
    if policy_cls is None:
        policies = [
            build_policy(g.availability, info(i, g.group), streams.numpy("availability", i))
            for i, g in enumerate(groups)
        ]
    else:
        policies = [
            policy_cls(policy_cls.Params(), info(i, g.group), streams.numpy("availability", i))
            for i, g in enumerate(groups)
        ]
    backend.participants = sc.server.round.asked
    sim = Simulation(build_world(sc, streams, policies=policies), backend)
    return sim, sim.run()


@dataclass(frozen=True)
class Ev:
    time: float
    round: int
    device: int
    kind: str
    detail: str
    values: dict  # the typed columns that are not null

    def field(self, key: str):
        """A typed column's value (every count and number an event carries has a column)."""
        if key in self.values:
            return self.values[key]
        raise KeyError(f"{key} not in {self.values!r} (detail: {self.detail!r})")

    @property
    def job(self) -> int:
        return self.field("job")


def events(sim: Simulation, kind: str | None = None, device: int | None = None) -> list[Ev]:
    r = sim.recorder
    typed = {name: r.column(name) for name in EVENT_FIELDS}
    rows = [
        Ev(*row, {name: column[i] for name, column in typed.items() if column[i] is not None})
        for i, row in enumerate(zip(r.times, r.rounds, r.devices, r.kinds, r.details))
    ]
    return [e for e in rows if (kind is None or e.kind == kind) and (device is None or e.device == device)]


def by_job(sim: Simulation, kind: str) -> dict[int, float]:
    return {e.job: e.time for e in events(sim, kind)}


# Shared physical parameters of the timing tests.


def network_scenario(devices, *, network=None, server=None, stop=None, seed=1, check=True):
    """A scenario with a ``network:`` section (and ``server:`` as given) on digits."""
    data = {
        "name": "net",
        "seed": seed,
        "stop": stop or {"rounds": 3},
        "task": {"dataset": {"name": "digits"}, "model": {"name": "logistic"}},
        "devices": devices,
        "server": server or {},
    }
    if network is not None:
        data["network"] = network
    return scenario_from_dict(data, check_references=check)


def run_network(sc, backend, policy_cls=AlwaysRound):
    """Run ``sc`` with ``policy_cls`` on every device (None: the scenario's own policies); the backend keeps its
    own ``participants``."""
    streams = RandomStreams(sc.seed)
    n = sc.num_devices
    if policy_cls is None:
        groups = [g for g in sc.devices for _ in range(g.count)]
        policies = [
            build_policy(g.availability, info(i), streams.numpy("availability", i)) for i, g in enumerate(groups)
        ]
    else:
        policies = [policy_cls(policy_cls.Params(), info(i), streams.numpy("availability", i)) for i in range(n)]
    sim = Simulation(build_world(sc, streams, policies=policies), backend)
    return sim, sim.run()


def kinds(sim, kind):
    """(time, device, event) of every event of one kind."""
    return [(e.time, e.device, e) for e in events(sim, kind)]


class PluggedBetween(SessionPolicy):
    """Charger plugged in over [start, end)."""

    class Params(PolicyParams):
        start: float = 0.0
        end: float = math.inf

    def online(self, now, state) -> bool:
        return self.params.start <= now < self.params.end

    def next_wakeup(self, now: float) -> float:
        return next((t for t in (self.params.start, self.params.end) if t > now), math.inf)


def run_with_charger(sc, charger_params: dict, policy=NeverRound, backend=None):
    """Run ``sc`` with every device on a charger plugged in over [start, end) (``charger_params``)."""
    streams = RandomStreams(sc.seed)
    n = sc.num_devices
    policies = [policy(policy.Params(), info(i), streams.numpy("availability", i)) for i in range(n)]
    chargers = [
        PluggedBetween(PluggedBetween.Params(**charger_params), info(i), streams.numpy("charging", i)) for i in range(n)
    ]
    sim = Simulation(build_world(sc, streams, policies=policies, chargers=chargers), backend or FakeBackend())
    return sim, sim.run()


def charger_events(sim, kind):
    """(time, event) of every event of one kind."""
    return [(e.time, e) for e in events(sim, kind)]
