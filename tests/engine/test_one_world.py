"""One seed, one world: the actor form (every device an actor) and the array form (devices as rows) of the
engine draw the same availability, so they agree on every round, every working device's events and every
device's online time, participation and energy, for every built-in policy."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from engine_support import WORK_KINDS, FakeBackend, events, group, scenario

from netfl.assemble import build_world, device_policies, group_models, population_models
from netfl.assemble.world import device_table
from netfl.rng import RandomStreams
from netfl.sim.idle_rows import IdleRows
from netfl.sim.simulation import Simulation

POLICIES = {
    "always": {"policy": "always"},
    "bernoulli": {"policy": "bernoulli", "p": 0.4},
    "markov": {"policy": "markov", "p": 0.3, "transition": 0.2},
    "cyclic": {"policy": "cyclic", "p": 0.5, "period": "6 rounds"},
    "sessions": {
        "policy": "sessions",
        "on": {"exponential": {"mean": "20s"}},
        "off": {"lognormal": {"median": "40s", "sigma": 0.8}},
    },
    "daily": {"policy": "daily", "start": "00:01", "end": "00:03", "jitter": "20s"},
    "diurnal": {"policy": "diurnal", "mixing": "30s"},
    "eligible": {  # the charger is the engine's (requires_charging): here without it
        "policy": "eligible",
        "charging": False,
        "idle": {"policy": "sessions", "on": {"exponential": {"mean": "25s"}}, "off": {"exponential": {"mean": "10s"}}},
        "wifi": {"policy": "daily", "start": "00:00:30", "end": "00:01:20", "jitter": "10s"},
    },
}


def alternating(rng: np.random.Generator, horizon: float) -> list[tuple[float, float]]:
    """Online intervals of 2 to 10 s with gaps of 2 to 15 s, the first from 0 or later, within [0, horizon]."""
    out, t = [], float(rng.choice([0.0, rng.uniform(0, 10)]))
    while t < horizon:
        end = min(t + rng.uniform(2, 10), horizon)
        out.append((t, end))
        t = end + rng.uniform(2, 15)
    return out


def csv_trace(tmp_path: Path) -> dict:
    """Devices 0 to 29 listed (some online across the period's end), 30 to 34 not: never online."""
    rng = np.random.default_rng(5)
    rows = [f"{d},{s!r},{e!r}" for d in range(30) for s, e in alternating(rng, 40.0)]
    (tmp_path / "trace.csv").write_text("device,start_s,end_s\n" + "\n".join(rows) + "\n")
    return {"policy": "trace_csv", "file": str(tmp_path / "trace.csv"), "period": "40s", "unlisted": "offline"}


def fedscale_trace(tmp_path: Path) -> dict:
    """12 clients with their own finish times, replayed from client 5 on."""
    rng = np.random.default_rng(6)
    data = {}
    for client in range(100, 112):
        finish = float(rng.uniform(20, 50))
        intervals = alternating(rng, finish)
        active, inactive = [s for s, _ in intervals], [e for _, e in intervals]
        data[client] = {"active": active, "inactive": inactive, "finish_time": finish}
    (tmp_path / "behave.pkl").write_bytes(pickle.dumps(data))
    return {"policy": "fedscale_trace", "file": str(tmp_path / "behave.pkl"), "trust_pickle": True, "client_offset": 5}


USER_POLICIES = """
import numpy as np

from netfl.policies import PolicyParams, PopulationPolicy


class Flicker(PopulationPolicy):
    class Params(PolicyParams):
        on: float = 12.0
        off: float = 20.0

    def start(self, devices):
        online = self.uniform(devices) < self.params.on / (self.params.on + self.params.off)
        return online, self.next_change(devices, np.zeros(len(devices)), online)

    def next_change(self, devices, at, online):
        return at + self.exponential(devices, np.where(online, self.params.on, self.params.off))


class Runs(PopulationPolicy):
    time_base = "round"

    def start(self, devices):
        self.length = 1 + np.floor(4 * self.uniform(devices))  # each device's own run length, 1 to 4 rounds
        return self.uniform(devices) < 0.5, self.length[devices]

    def next_change(self, devices, at, online):
        return at + np.where(online, self.length[devices], 1 + np.floor(3 * self.uniform(devices)))

    def participation_probability(self):
        return np.full(self.n, 0.6)
"""


def user_policy(name: str) -> Callable[[Path], dict]:
    def write(tmp_path: Path) -> dict:
        (tmp_path / "population.py").write_text(USER_POLICIES)
        return {"policy": f"{tmp_path / 'population.py'}:{name}"}

    return write


#: Policies that read a file: each writes its own in the test's folder.
FILE_POLICIES: dict[str, Callable[[Path], dict]] = {
    "trace_csv": csv_trace,
    "fedscale_trace": fedscale_trace,
    "population policy": user_policy("Flicker"),
    "population policy per round": user_policy("Runs"),
    "eligible of a population policy": lambda tmp_path: {
        "policy": "eligible",
        "charging": False,
        "idle": user_policy("Flicker")(tmp_path),
        "wifi": {"policy": "sessions", "on": "40s", "off": {"exponential": {"mean": "15s"}}},
    },
}


def world(policy: dict, count: int = 30, rounds: int = 25, charging: dict | None = None, usage=None, health=1.0):
    battery = {"capacity": 400.0, "initial": {"uniform": [0.0, 1.0]}, "min_level": 0.3, "health": health}
    idle = 0.3
    if charging is not None:  # batteries that empty within the run, and chargers that power them on again
        battery |= {"initial": {"uniform": [0.0, 0.5]}, "charging": charging, "charge_power": 3.0}
        idle = 1.0
    phones = group(
        "phones",
        count,
        flops=2e9,
        up=2e6,
        power={"compute": 2.0, "transmit": 0.5, "idle": idle},
        battery=battery,
        availability=policy,
    )
    if usage is not None:
        phones["usage"] = usage
    boards = group("boards", 5, flops=0.5e9, up=1e6, availability=policy)
    return scenario([phones, boards], stop={"rounds": rounds}, round={"participants": 6, "deadline": 5.0})


def run(sc, form: str, idle_events: bool = False):
    """The scenario run in either form (``idle_events``: the array form logs idle devices' events too)."""
    streams = RandomStreams(sc.seed)
    mix = np.full((sc.num_devices, 10), 0.1)
    backend = FakeBackend(participants=sc.server.round.asked)
    if form == "actors":
        policies, chargers = device_policies(sc, streams, np.full(sc.num_devices, 10), mix)
        w = build_world(sc, streams, policies=policies, chargers=chargers)
    else:
        population, charging = population_models(sc, streams, mix), group_models(sc, streams, mix, "charging")
        w = build_world(sc, streams, population=population, charging=charging, idle_events=idle_events)
    sim = Simulation(w, backend)
    return sim, sim.run()


def rounds(sim) -> list[tuple]:
    return [(c.round_index, tuple(map(int, c.available)), c.selected, c.delivered) for c in sim.backend.contexts]


def work(sim) -> list:
    """The work events, each device's in its order; devices acting at one instant (a trace's whole seconds) in
    the order of their index, as SimPy's order of simultaneous events is the order they were scheduled in."""
    return sorted((e for e in events(sim) if e.kind in WORK_KINDS), key=lambda e: (e.time, e.device))


CHARGERS = {
    "daily": {"policy": "daily", "start": "00:00:30", "end": "00:02", "jitter": "20s"},
    "sessions": {"policy": "sessions", "on": {"exponential": {"mean": "30s"}}, "off": {"exponential": {"mean": "30s"}}},
}
USE = {"sessions": {"policy": "sessions", "on": {"exponential": {"mean": "8s"}}, "off": "20s"}, "power": 1.5}


@pytest.mark.parametrize("name", list(POLICIES) + list(FILE_POLICIES))
def test_both_forms_draw_the_same_world(name: str, tmp_path: Path) -> None:
    assert_same_world(world(POLICIES[name] if name in POLICIES else FILE_POLICIES[name](tmp_path)), name)


@pytest.mark.parametrize("charger", list(CHARGERS))
@pytest.mark.parametrize("train_while_in_use", [None, False, True])
@pytest.mark.parametrize("name", ["sessions", "markov", "eligible on the charger"])
def test_both_forms_agree_with_chargers_and_the_owners_use(name: str, charger: str, train_while_in_use) -> None:
    usage = None if train_while_in_use is None else {**USE, "train_while_in_use": train_while_in_use}
    policy = POLICIES[name] if name in POLICIES else {**POLICIES["eligible"], "charging": True}
    sc = world(policy, count=40, rounds=40, charging=CHARGERS[charger], usage=usage)
    actors, arrays = assert_same_world(sc, name)
    kinds = set(actors.recorder.kinds)
    assert {"battery_empty", "power_on", "charge_start", "charge_stop"} <= kinds  # the world is interesting
    assert arrays.stats.charged_j.sum() > 0
    assert actors.stats.charged_j == pytest.approx(arrays.stats.charged_j, rel=1e-9, abs=1e-9)
    if usage is not None:
        use = arrays.stats.energy_by_activity_j["use"]
        assert use.sum() > 0 and actors.stats.energy_by_activity_j["use"] == pytest.approx(use, rel=1e-9, abs=1e-9)


def assert_same_world(sc, name: str):
    actor_sim, actors = run(sc, "actors")
    array_sim, arrays = run(sc, "arrays")
    assert rounds(actor_sim) == rounds(array_sim)
    assert any(len(c.available) < sc.num_devices for c in actor_sim.backend.contexts) or name == "always"
    assert work(actor_sim) == work(array_sim)
    a, b = actors.stats, arrays.stats
    assert np.array_equal(a.tasks_started, b.tasks_started) and np.array_equal(a.updates_delivered, b.updates_delivered)
    assert a.online_time_s == pytest.approx(b.online_time_s, rel=1e-9, abs=1e-9)
    for activity in ("idle", "compute", "transmit", "receive"):
        assert a.energy_by_activity_j[activity] == pytest.approx(b.energy_by_activity_j[activity], rel=1e-9, abs=1e-9)
    assert np.allclose(a.battery_fraction, b.battery_fraction, equal_nan=True, rtol=1e-9)
    assert np.array_equal(a.battery_empty, b.battery_empty)
    assert a.tasks_started.sum() > 0
    return actors, arrays


ASYNC_KINDS = WORK_KINDS | {"pull"}


def asynchronous(sc, pause: str, buffer: int, stop_s: float):
    server = {"mode": "async", "async": {"buffer": buffer, "pause": pause, "local_steps": {"uniform": [1, 4]}}}
    return sc.model_copy(
        update={
            "server": type(sc.server).model_validate({**server}),
            "stop": type(sc.stop).model_validate({"sim_time": stop_s}),
        }
    )


def assert_same_arrivals(sc):
    """The same jobs pulled at the same instants, the same work events and the same devices in both forms."""
    actor_sim, actors = run(sc, "actors")
    array_sim, arrays = run(sc, "arrays")
    mine = sorted((e for e in events(actor_sim) if e.kind in ASYNC_KINDS), key=lambda e: (e.time, e.device))
    theirs = sorted((e for e in events(array_sim) if e.kind in ASYNC_KINDS), key=lambda e: (e.time, e.device))
    assert len(mine) == len(theirs)
    for x, y in zip(mine, theirs):  # a battery's crossing, summed in other steps, may differ in the last bits
        assert (x.device, x.kind, x.round, x.values.keys()) == (y.device, y.kind, y.round, y.values.keys())
        assert x.time == pytest.approx(y.time, rel=1e-12, abs=1e-12)
        for key, value in x.values.items():
            other = y.values[key]
            assert value == (pytest.approx(other, rel=1e-12, abs=1e-12) if isinstance(value, float) else other), key
    assert actors.updates_received == arrays.updates_received and actors.rounds == arrays.rounds
    a, b = actors.stats, arrays.stats
    assert np.array_equal(a.tasks_started, b.tasks_started)
    assert a.online_time_s == pytest.approx(b.online_time_s, rel=1e-9, abs=1e-9)
    for activity in a.energy_by_activity_j:
        assert a.energy_by_activity_j[activity] == pytest.approx(b.energy_by_activity_j[activity], rel=1e-9, abs=1e-9)
    return actor_sim, array_sim


@pytest.mark.parametrize("pause", ["0s", "5s"])
@pytest.mark.parametrize("name", ["sessions", "daily", "eligible on the charger"])
def test_asynchronous_arrivals_are_the_same_in_both_forms(name: str, pause: str) -> None:
    """Anarchic FL: every worker pulls whenever it is available, after its own pause; the array form queues the
    idle devices' pulls and must start the same jobs at the same instants."""
    policy = POLICIES[name] if name in POLICIES else {**POLICIES["eligible"], "charging": True}
    sc = world(policy, count=30, charging=CHARGERS["sessions"], usage={**USE, "train_while_in_use": False})
    actor_sim, _ = assert_same_arrivals(asynchronous(sc, pause, buffer=4, stop_s=150.0))
    pulls = [e for e in events(actor_sim, "pull")]
    assert len(pulls) > 20 and len({e.device for e in pulls}) > 10


def test_asynchronous_arrivals_alike_when_most_devices_wait(monkeypatch) -> None:
    """Most workers wait most of the time -- seldom available, their batteries emptying and recharging, their
    owners' use keeping them from training -- and the array form decides what they answer at their instants
    ahead of the clock, many devices per step (netfl/sim/workers.py); the actors, each waking at its own
    changes, must pull the same jobs at the same instants."""
    asked = []
    advance_each = IdleRows.advance_each
    monkeypatch.setattr(
        IdleRows, "advance_each", lambda self, d, t: (asked.append(len(d)), advance_each(self, d, t))[1]
    )
    scarce = {"policy": "sessions", "on": {"exponential": {"mean": "6s"}}, "off": {"exponential": {"mean": "60s"}}}
    sc = world(scarce, count=120, charging=CHARGERS["sessions"], usage={**USE, "train_while_in_use": False})
    actor_sim, _ = assert_same_arrivals(asynchronous(sc, "20s", buffer=30, stop_s=400.0))
    pulls = len(events(actor_sim, "pull"))
    assert pulls > 100 and sum(asked) > 10 * pulls  # the devices wait: many instants asked per pull
    assert sum(asked) > 5 * len(asked)  # and they are asked many at a time


def test_partial_work_plans_alike_in_both_forms() -> None:
    """Partial work: each device trains the steps that fit before the deadline, planned from what its previous
    upload achieved, which the array form keeps for a device between its rounds as the actor does."""
    sc = world(POLICIES["sessions"], count=30, rounds=30)
    sc = sc.model_copy(
        update={
            "server": type(sc.server).model_validate(
                {"round": {"participants": 10, "deadline": 3.0, "partial_work": True}}
            )
        }
    )
    sims = {}
    for form in ("actors", "arrays"):
        streams = RandomStreams(sc.seed)
        mix = np.full((sc.num_devices, 10), 0.1)
        backend = FakeBackend(participants=10, steps=10)
        if form == "actors":
            policies, chargers = device_policies(sc, streams, np.full(sc.num_devices, 10), mix)
            w = build_world(sc, streams, policies=policies, chargers=chargers)
        else:
            w = build_world(sc, streams, population=population_models(sc, streams, mix))
        sims[form] = Simulation(w, backend)
        sims[form].run()
    assert sims["actors"].backend.cuts and sims["actors"].backend.cuts == sims["arrays"].backend.cuts
    assert work(sims["actors"]) == work(sims["arrays"])


def test_the_array_form_gives_the_same_world_whatever_its_step(monkeypatch) -> None:
    """Rows are taken through their changes a bounded step of devices at a time (netfl/sim/idle_rows.py): the
    step's size changes nothing, since every device's changes are its own."""

    sc = world(POLICIES["sessions"], count=40, rounds=30, charging=CHARGERS["daily"], usage=USE)
    whole_sim, whole = run(sc, "arrays")
    monkeypatch.setattr(IdleRows, "ROWS_PER_STEP", 3)
    stepped_sim, stepped = run(sc, "arrays")
    assert rounds(whole_sim) == rounds(stepped_sim) and work(whole_sim) == work(stepped_sim)
    for name in ("online_time_s", "charged_j", "battery_fraction", "tasks_started"):
        assert np.array_equal(getattr(whole.stats, name), getattr(stepped.stats, name), equal_nan=True), name
    for activity, joules in whole.stats.energy_by_activity_j.items():
        assert np.array_equal(joules, stepped.stats.energy_by_activity_j[activity]), activity


HETEROGENEOUS = {  # per-device time zones, use and battery health: drawn per device, the same in both forms
    "availability": {"policy": "diurnal", "mixing": "30s", "time_zone_offset": {"uniform": ["-5h", "3h"]}},
    "charging": {
        "policy": "daily",
        "start": "00:00:30",
        "end": "00:02",
        "jitter": "20s",
        "time_zone_offset": {"choice": {"values": ["0s", "40s", "-30s"], "weights": [2, 1, 1]}},
    },
    "usage": {
        "sessions": {
            "policy": "sessions",
            "on": {"exponential": {"mean": "8s"}},
            "off": "20s",
            "rate_scale": {"lognormal": {"median": 1, "sigma": 0.6}},
            "length_scale": {"uniform": [0.5, 2.0]},
        },
        "power": 1.5,
    },
}


def test_both_forms_draw_the_same_heterogeneous_owners_and_batteries() -> None:
    h = HETEROGENEOUS
    sc = world(h["availability"], 40, 40, h["charging"], h["usage"], health={"uniform": [0.7, 1.0]})
    actors, arrays = assert_same_world(sc, "heterogeneous")
    assert {"battery_empty", "charge_start"} <= set(actors.recorder.kinds)
    assert actors.stats.energy_by_activity_j["use"] == pytest.approx(
        arrays.stats.energy_by_activity_j["use"], rel=1e-9, abs=1e-9
    )
    capacity = device_table(sc, RandomStreams(sc.seed)).capacity_j[:40]
    assert len(np.unique(capacity)) == 40 and 0.7 * 400 <= capacity.min() and capacity.max() <= 400
