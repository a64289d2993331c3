"""Device logs replayed as the world (policy device_logs): availability, the charger and the owners' use from one
hand-written log set, against hand-computed intervals and battery levels, in each format, in both engine forms."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from engine_support import WORK_KINDS, events, group, scenario
from test_one_world import run  # either form of the engine, as the one-world tests run it

from netfl.errors import PolicyError
from netfl.fleet_logs import BATTERY, CHARGER, LOCK, NETWORK, SCREEN, DeviceLog, write_device_logs
from netfl.policies.catalog import check_spec, population_model

SUFFIX = {"flash": "json", "csv": "csv", "parquet": "parquet"}


def log(device, events_):
    times, kinds, values = zip(*events_)
    return DeviceLog(device, np.array(times, float), np.array(kinds, np.int8), np.array(values, float))


# Three phones, by hand (seconds from midnight of day 0):
#   a: screen off at 0, locked at 10, plugged at 20, Wi-Fi at 30, 4G at 60, Wi-Fi at 70, unplugged at 90
#      eligible (locked, charging, Wi-Fi) [30, 60) and [70, 90); charging [20, 90); in use never
#   b: screen on at 0 (unlocked), off and locked at 40, on and unlocked at 50, plugged and Wi-Fi at 55, locked
#      at 80: eligible [80, inf); charging [55, inf); in use [0, 40) and [50, inf)
#   c: a battery level and Wi-Fi only: screen on as FLASH starts it, never locked: eligible never, in use always
THREE = [
    log(
        "a",
        [
            (0, SCREEN, 0),
            (10, LOCK, 1),
            (20, CHARGER, 1),
            (30, NETWORK, 1),
            (60, NETWORK, 4),
            (70, NETWORK, 1),
            (90, CHARGER, 0),
        ],
    ),
    log(
        "b",
        [
            (0, SCREEN, 1),
            (0, BATTERY, 80),
            (40, SCREEN, 0),
            (40, LOCK, 1),
            (50, SCREEN, 1),
            (50, LOCK, 0),
            (55, CHARGER, 1),
            (55, NETWORK, 1),
            (80, LOCK, 1),
        ],
    ),
    log("c", [(5, BATTERY, 64), (5, NETWORK, 1)]),
]
INF = np.inf
ELIGIBLE = [[[30, 60], [70, 90]], [[80, INF]], []]
CHARGING = [[[20, 90]], [[55, INF]], []]
IN_USE = [[], [[0, 40], [50, INF]], [[0, INF]]]


def spec(path: Path, **params):
    from netfl.component_spec import PolicySpec

    return PolicySpec.model_validate({"policy": "device_logs", "file": str(path), **params})


@pytest.mark.parametrize("fmt", ["flash", "csv", "parquet"])
def test_three_phones_by_hand(tmp_path, fmt):
    path = write_device_logs(THREE, tmp_path / f"three.{SUFFIX[fmt]}", fmt)
    for rule, expected in (
        ({}, ELIGIBLE),
        ({"rule": "charging"}, CHARGING),
        ({"rule": "screen_on"}, IN_USE),
    ):
        model = population_model(spec(path, **rule), 3, 1, np.ones((3, 1)), 0, base_dir=tmp_path)
        for row in range(3):
            got = model.toggles.intervals(row).tolist()
            assert got == expected[row], (rule, row)


def test_repeated_every_period(tmp_path):
    path = write_device_logs(THREE, tmp_path / "three.csv", "csv")
    model = population_model(spec(path, period="100s"), 3, 1, np.ones((3, 1)), 0, base_dir=tmp_path)
    model.advance(150.0)  # a: on from 130 (30 s into its second cycle) to 160
    assert model.state.tolist() == [True, False, False]
    assert model.change[0] == 160.0
    assert model.toggles.intervals(1).tolist() == [[80, 100]]  # each cycle from FLASH's starting states


def test_fewer_devices_than_the_group_refused_or_cycled(tmp_path):
    path = write_device_logs(THREE, tmp_path / "three.parquet", "parquet")
    with pytest.raises(PolicyError, match=r"holds 3 devices, fewer than the 5 that replay it.*unlisted: cycle"):
        population_model(spec(path), 5, 1, np.ones((5, 1)), 0, base_dir=tmp_path)
    problems = check_spec(spec(path), tmp_path, devices=range(0, 5))
    assert len(problems) == 1 and "holds 3 devices, fewer than the 5" in problems[0][1]
    model = population_model(spec(path, unlisted="cycle"), 2, 1, np.ones((2, 1)), 0, base_dir=tmp_path, first=2)
    assert model.rows.tolist() == [2, 0]  # scenario devices 2 and 3: the log's c, then a again


def test_validate_names_the_bad_line(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("device,time,state,value\na,0,screen,1\na,5,battery,130\n")
    (problem,) = check_spec(spec(path), tmp_path)
    assert problem == (
        ".file",
        f"{path}:3: device a: battery value 130% is out of range; accepted: a percentage from 0 to 100",
    )
    ((where, what),) = check_spec(spec(path, rule="locked and asleep"), tmp_path)
    assert where == ".rule" and "unknown word 'asleep'; accepted: words screen_on" in what


def three_phone_world(path: Path, stop: dict, rule: str | None = None):
    logs = {"policy": "device_logs", "file": str(path)}
    availability = logs if rule is None else {**logs, "rule": rule}
    phones = group(
        "phones",
        3,
        flops=2e9,
        up=2e6,
        power={"compute": 2.0, "transmit": 0.5, "idle": 0.1},
        battery={"capacity": 100.0, "initial": 0.5, "charging": {**logs, "rule": "charging"}, "charge_power": 1.0},
        availability=availability,
    )
    phones["usage"] = {"sessions": {**logs, "rule": "screen_on"}, "power": 0.2}
    return scenario([phones], stop=stop, round={"participants": 2, "deadline": 5.0})


@pytest.mark.parametrize("form", ["actors", "arrays"])
def test_battery_from_the_logged_charger_and_screen_by_hand(tmp_path, form):
    """Never eligible (no FL work): each battery moves by the idle draw, the owner's use and the charger alone.
    Over 100 s from 50 J: a: -0.1 W x 100 s + 1 W x 70 s (plugged 20-90; the charger feeds the idle draw) = 110 J,
    capped at 100 J (full at 20 + 50 / 0.9 s, then 0.1 W drawn from 90 on) -> 99 J;
    b: -0.1 x 100 - 0.2 x (40 + 50) in use + 1 x 45 plugged = 67 J; c: -0.1 x 100 - 0.2 x 100 = 20 J."""
    path = write_device_logs(THREE, tmp_path / "three.json", "flash")
    sim, result = run(three_phone_world(path, {"sim_time": 100.0}, rule="locked and unlocked"), form)
    assert result.stats.battery_fraction == pytest.approx([0.99, 0.67, 0.20], abs=1e-9)
    assert result.stats.tasks_started.sum() == 0


def test_both_forms_give_the_same_event_log(tmp_path):
    rng = np.random.default_rng(11)
    logs = []
    for d in range(12):  # each phone toggles its states every 1 to 30 s over 20 minutes
        times = np.sort(rng.uniform(0, 1200, 120)).round(0)
        kinds = rng.choice([SCREEN, LOCK, CHARGER, NETWORK], 120).astype(np.int8)
        values = np.where(kinds == NETWORK, rng.choice([1, 4], 120), rng.integers(0, 2, 120)).astype(float)
        logs.append(DeviceLog(f"p{d}", times, kinds, values))
    path = write_device_logs(logs, tmp_path / "fleet.parquet", "parquet")
    sc = three_phone_world(path, {"rounds": 30}, rule="(locked or screen_off) and charging")
    sc = sc.model_copy(update={"devices": [sc.devices[0].model_copy(update={"count": 12})]})
    actor_sim, actors = run(sc, "actors")
    array_sim, arrays = run(sc, "arrays")

    def work(sim):
        return sorted((e for e in events(sim) if e.kind in WORK_KINDS), key=lambda e: (e.time, e.device))

    assert work(actor_sim) == work(array_sim)
    assert len(work(actor_sim)) > 20
    assert [tuple(map(int, c.available)) for c in actor_sim.backend.contexts] == [
        tuple(map(int, c.available)) for c in array_sim.backend.contexts
    ]
    a, b = actors.stats, arrays.stats
    assert np.array_equal(a.tasks_started, b.tasks_started)
    assert a.online_time_s == pytest.approx(b.online_time_s, rel=1e-9, abs=1e-9)
    assert a.battery_fraction == pytest.approx(b.battery_fraction, rel=1e-9)
    for activity in a.energy_by_activity_j:
        assert a.energy_by_activity_j[activity] == pytest.approx(b.energy_by_activity_j[activity], rel=1e-9, abs=1e-9)


def test_validate_says_the_devices_and_days(tmp_path):
    from netfl.policies.device_logs import describe_logs

    path = write_device_logs(THREE, tmp_path / "three.csv", "csv")
    line = describe_logs(path, 3)
    assert line == (
        f"logs       {path}: 3 devices; all its devices: 18 events, 6 a device, from day 0.00 to day 0.00 (0.0 days)"
    )
    assert "more than the 2 devices that replay it" in describe_logs(path, 2)
    assert ": 3 devices;" in describe_logs(path, None)  # cycling: all of them counted


def test_only_the_devices_a_group_needs_are_read(tmp_path, monkeypatch):
    """A group of 2 stops reading after the log's second device: a malformed third is never reached."""
    from netfl.fleet_logs import table

    monkeypatch.setattr(table, "BATCH_ROWS", 4)
    path = tmp_path / "fleet.csv"
    rows = "a,0,charger,1\na,5,lock,1\nb,0,screen,1\nb,9,screen,0\nc,0,battery,101\n"
    path.write_text("device,time,state,value\n" + rows)
    model = population_model(spec(path, rule="charging"), 2, 1, np.ones((2, 1)), 0, base_dir=tmp_path)
    assert model.toggles.intervals(0).tolist() == [[0, INF]]
    with pytest.raises(PolicyError, match=r"fleet.csv:6: device c: battery value 101%"):
        population_model(spec(path, rule="charging", unlisted="cycle"), 4, 1, np.ones((4, 1)), 0, base_dir=tmp_path)


def test_events_outside_the_period_refused(tmp_path):
    path = write_device_logs(THREE, tmp_path / "three.csv", "csv")
    with pytest.raises(PolicyError, match=r"device a: event 7 at 90 s lies outside the period \[0, 80 s\)"):
        population_model(spec(path, period="80s"), 3, 1, np.ones((3, 1)), 0, base_dir=tmp_path)


@pytest.mark.parametrize("where", ["usage", "eligible"])
def test_validate_counts_the_logs_of_the_owners_use_and_of_a_component(tmp_path, where):
    """A log set of 3 devices under a group of 5: refused wherever device_logs replays it, the owners' use (no
    availability from the logs) or a component of eligible, naming the YAML path and the counts."""
    from netfl.errors import ScenarioError

    path = write_device_logs(THREE, tmp_path / "three.csv", "csv")
    logs = {"policy": "device_logs", "file": str(path), "rule": "screen_on"}
    availability = {"policy": "eligible", "idle": logs} if where == "eligible" else {"policy": "always"}
    phones = group("phones", 5, battery={"capacity": 100.0}, availability=availability)
    if where == "usage":
        phones["usage"] = {"sessions": logs, "power": 0.2}
    with pytest.raises(ScenarioError) as caught:
        scenario([phones])
    text = str(caught.value)
    assert "holds 3 devices, fewer than the 5 that replay it" in text
    assert ("devices[0].usage.sessions.file" if where == "usage" else "devices[0].availability.idle.file") in text
    scenario([{**phones, "count": 3}])  # as many phones as logs: valid
