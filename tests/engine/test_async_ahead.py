"""The array form's asynchronous arrivals decide ahead of the clock what waiting devices answer (netfl/sim/workers.py):
in vectorised steps over many devices, changing nothing -- the same event log, order of simultaneous events
included, the same devices and timeline as asking one device at a time -- and never letting a reading of the world
see a device taken ahead."""

from __future__ import annotations

import numpy as np
import pytest
from engine_support import FakeBackend, group

from netfl.assemble import build_world, group_models, population_models
from netfl.config import scenario_from_dict
from netfl.rng import RandomStreams
from netfl.sim.idle_rows import IdleRows
from netfl.sim.lazy_fleet import LazyFleet
from netfl.sim.simulation import Simulation
from netfl.sim.workers import ArrayArrivals

#: Sessions of whole seconds and a daily charger without jitter: many devices change at the same instants as one
#: another, as the evaluations on the time grid and the working devices' own changes.
TIED = {"policy": "sessions", "on": "4s", "off": "16s"}
NIGHTLY = {"policy": "daily", "start": "00:00:40", "end": "00:01:40"}
SCARCE = {"policy": "sessions", "on": {"exponential": {"mean": "5s"}}, "off": {"exponential": {"mean": "45s"}}}
USE = {"sessions": {"policy": "sessions", "on": {"exponential": {"mean": "8s"}}, "off": "20s"}, "power": 1.5}


def anarchic(
    availability: dict, *, count: int = 150, stop: dict, every: str, buffer: int = 6, latency: float = 0.0, pause=4.0
):
    """Phones that often wait: seldom available, batteries that empty, a charger that powers them on, their owners'
    use that keeps them from training; pauses of a few seconds between jobs."""
    battery = {
        "capacity": 300.0,
        "initial": {"uniform": [0.0, 0.6]},
        "min_level": 0.3,
        "charging": NIGHTLY,
        "charge_power": 3.0,
    }
    phones = group(
        "phones",
        count,
        flops=2e9,
        up=2e6,
        latency=latency,
        power={"compute": 2.0, "transmit": 0.5, "idle": 1.0},
        battery=battery,
        availability=availability,
    )
    phones["usage"] = {**USE, "train_while_in_use": False}
    boards = group("boards", 20, flops=0.5e9, up=1e6, latency=latency, availability=availability)
    return scenario_from_dict(
        {
            "name": "ahead",
            "seed": 4,
            "stop": stop,
            "task": {
                "dataset": {"name": "digits", "partition": {"samples_per_client": 10}},
                "model": {"name": "logistic"},
            },
            "devices": [phones, boards],
            "server": {
                "mode": "async",
                "async": {"buffer": buffer, "pause": pause, "local_steps": {"uniform": [1, 4]}},
            },
            "eval": {"every": every},
        }
    )


def run_arrays(sc) -> Simulation:
    streams = RandomStreams(sc.seed)
    mix = np.full((sc.num_devices, 10), 0.1)
    charging = group_models(sc, streams, mix, "charging")
    sim = Simulation(
        build_world(sc, streams, population=population_models(sc, streams, mix), charging=charging), FakeBackend()
    )
    sim.result = sim.run()
    assert isinstance(sim.devices, LazyFleet)
    return sim


def one_at_a_time(monkeypatch) -> None:
    """Arrivals that decide nothing ahead: each device asked at its instant, as before the look-ahead."""
    monkeypatch.setattr(ArrayArrivals, "horizon", lambda self, now: now)


CASES = {
    "tied instants, readings on a time grid": dict(availability=TIED, stop={"sim_time": 400.0}, every="30s"),
    "an evaluation at every aggregation, stop on rounds": dict(
        availability=SCARCE, stop={"rounds": 20}, every="1 rounds", latency=0.02
    ),
    "an update at a time (buffer 1)": dict(availability=SCARCE, stop={"sim_time": 300.0}, every="20s", buffer=1),
}


@pytest.mark.parametrize("case", list(CASES))
def test_looking_ahead_changes_nothing(case: str, monkeypatch) -> None:
    ahead = run_arrays(anarchic(**CASES[case]))
    with monkeypatch.context() as m:
        one_at_a_time(m)
        alone = run_arrays(anarchic(**CASES[case]))
    assert ahead.recorder.count("pull") > 50
    for name, column in alone.recorder.columns().items():  # every event, in the order it was logged
        assert ahead.recorder.columns()[name] == column, name
    assert [m.sim_time_s for m in ahead.metrics] == [m.sim_time_s for m in alone.metrics]
    assert [(m.energy_j, m.participants) for m in ahead.metrics] == [
        (m.energy_j, m.participants) for m in alone.metrics
    ]
    a, b = ahead.result.stats, alone.result.stats
    for field in (
        "tasks_started",
        "updates_delivered",
        "online_time_s",
        "charged_j",
        "battery_fraction",
        "battery_empty",
    ):
        assert np.array_equal(getattr(a, field), getattr(b, field), equal_nan=field == "battery_fraction"), field
    for activity, joules in b.energy_by_activity_j.items():
        assert np.array_equal(a.energy_by_activity_j[activity], joules), activity
    assert ahead.timeline.columns() == alone.timeline.columns()


def test_waiting_devices_are_asked_in_vectorised_steps(monkeypatch) -> None:
    """Most waiting devices' instants are decided many at a time: far fewer steps than instants, and few devices
    left to ask one wake at a time."""
    asked = {"steps": 0, "instants": 0, "alone": 0}
    advance_each, advance = IdleRows.advance_each, IdleRows.advance

    def counted_each(self, devices, until):
        asked["steps"] += 1
        asked["instants"] += len(devices)
        return advance_each(self, devices, until)

    def counted(self, now, devices=None):
        if devices is not None:  # a wake's devices due and undecided, or a device pulled (brought to life)
            asked["alone"] += len(devices)
        return advance(self, now, devices)

    monkeypatch.setattr(IdleRows, "advance_each", counted_each)
    monkeypatch.setattr(IdleRows, "advance", counted)
    sim = run_arrays(anarchic(SCARCE, count=400, stop={"sim_time": 600.0}, every="1min", buffer=100, pause=60.0))
    pulls = sim.recorder.count("pull")
    assert pulls > 100
    assert asked["instants"] > 20 * pulls  # devices wait: many instants asked per pull
    assert asked["steps"] * 10 < asked["instants"]
    assert asked["alone"] < 0.2 * asked["instants"] + 2 * pulls


def check(fleet: LazyFleet, now: float) -> None:
    """No idle device has been taken past ``now``: neither its battery's accounts nor any of its models."""
    rows = fleet.rows
    idle = ~rows.busy
    assert (rows.since[idle] <= now).all()
    for sl, grp in zip(rows.slices, rows.groups):
        models = [grp.availability, grp.charger] + ([grp.usage.model] if grp.usage else [])
        for model in models:
            if model is not None and model.time_base == "continuous":
                assert (model.since[idle[sl]] <= now).all()


@pytest.mark.parametrize("case", list(CASES))
def test_no_reading_sees_a_device_taken_ahead(case: str, monkeypatch) -> None:
    """Whenever the world is read (evaluations, the timeline, the end), no idle device has been taken past the
    clock."""
    readings = []
    checked = check

    def check_at(fleet: LazyFleet, now: float) -> None:
        checked(fleet, now)
        readings.append(now)

    for name in ("energy_spent_at", "state_at"):
        original = getattr(LazyFleet, name)
        monkeypatch.setattr(LazyFleet, name, lambda self, now, f=original: (check_at(self, now), f(self, now))[1])
    stats = LazyFleet.stats
    monkeypatch.setattr(LazyFleet, "stats", lambda self: (check_at(self, self.env.now), stats(self))[1])
    decided = []
    decide = ArrayArrivals._decide
    monkeypatch.setattr(
        ArrayArrivals, "_decide", lambda self, d, t, limit: (decided.append(len(d)), decide(self, d, t, limit))[1]
    )
    run_arrays(anarchic(**CASES[case]))
    assert len(readings) > 10 and sum(decided) > 100


def test_a_stop_from_outside_waits_for_the_devices_taken_ahead() -> None:
    """A Ctrl-C while keeping checkpoints stops the engine between two events (netfl/sim/watchdog.py); the results
    then written read every device, so the stop waits until the clock has caught up with the devices taken ahead,
    and nothing more is taken ahead once it is asked for."""
    sc = anarchic(SCARCE, count=400, stop={"sim_time": 600.0}, every="1min", buffer=100, pause=60.0)
    streams = RandomStreams(sc.seed)
    mix = np.full((sc.num_devices, 10), 0.1)
    world = build_world(
        sc, streams, population=population_models(sc, streams, mix), charging=group_models(sc, streams, mix, "charging")
    )
    sim = Simulation(world, FakeBackend())
    asked_at = []

    def requested() -> bool:
        if not asked_at and sim.env.now > 200.0:
            asked_at.append(sim.env.now)
        return bool(asked_at)

    sim.env.stop_requested = requested
    with pytest.raises(KeyboardInterrupt):
        sim.run()
    assert asked_at and sim.env.stops_held_until > asked_at[0]  # devices had been taken ahead of the request
    assert sim.env.now >= sim.env.stops_held_until
    check(sim.devices, sim.env.now)
