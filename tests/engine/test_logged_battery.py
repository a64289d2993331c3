"""A battery that follows its logged levels (battery.levels): linear between two logged levels, FL work's energy
drawn on top, against hand-computed levels, in both engine forms."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from engine_support import FakeBackend, events, group, scenario

from netfl.assemble import build_world, device_policies, group_models, population_models
from netfl.errors import ScenarioError
from netfl.fleet_logs import BATTERY, CHARGER, LOCK, NETWORK, DeviceLog, write_device_logs
from netfl.rng import RandomStreams
from netfl.sim.simulation import Simulation


def log(device: str, changes: list[tuple[float, int, float]]) -> DeviceLog:
    times, kinds, values = zip(*changes)
    return DeviceLog(device, np.array(times, float), np.array(kinds, np.int8), np.array(values, float))


def phones(path: Path, count: int = 1, stop_s: float = 1500.0, **battery):
    """Phones always available, 1 kJ batteries following ``path``'s levels, one round at time 0 (the next would be
    at 10 000 s) whose job computes 2.5 s at 2 W (5 J) and moves no bytes."""
    return scenario(
        [phones_group(path, count, **battery)],
        stop={"sim_time": stop_s},
        round={"participants": count, "deadline": 50.0, "interval": 10_000.0},
    )


def phones_group(path: Path, count: int, **battery) -> dict:
    devices = group(
        "phones",
        count,
        flops=1e9,
        up=1e6,
        power={"compute": 2.0, "transmit": 0.5, "idle": 0.3},
        battery={"capacity": 1000.0, "levels": {"file": str(path)}, **battery},
        availability={"policy": "always"},
    )
    devices["usage"] = {
        "sessions": {"policy": "sessions", "on": "30s", "off": "30s"},
        "power": 1.5,
        "train_while_in_use": True,
    }
    return devices


def run(sc, form: str, idle_events: bool = False):
    streams = RandomStreams(sc.seed)
    mix = np.full((sc.num_devices, 10), 0.1)
    backend = FakeBackend(model_bytes=0, flops=2.5e9, participants=sc.server.round.asked)
    if form == "actors":
        policies, chargers = device_policies(sc, streams, np.full(sc.num_devices, 10), mix)
        world = build_world(sc, streams, policies=policies, chargers=chargers)
    else:
        population, charging = population_models(sc, streams, mix), group_models(sc, streams, mix, "charging")
        world = build_world(sc, streams, population=population, charging=charging, idle_events=idle_events)
    sim = Simulation(world, backend)
    return sim, sim.run()


@pytest.mark.parametrize("form", ["actors", "arrays"])
def test_logged_fall_and_one_job_by_hand(tmp_path, form):
    """80 % at 0 s, 60 % at 1000 s, then no more levels (flat): 800 J - 200 J logged - 5 J of training = 595 J,
    whatever the idle draw (0.3 W) and the owner's use (1.5 W) would have drawn: the log holds them."""
    levels = [(0, BATTERY, 80), (0, LOCK, 1), (1000, BATTERY, 60)]
    path = write_device_logs([log("a", levels)], tmp_path / "a.csv", "csv")
    sim, result = run(phones(path), form)
    assert result.stats.tasks_started.tolist() == [1]
    assert [e.kind for e in events(sim) if e.kind in ("train_start", "train_end")] == ["train_start", "train_end"]
    assert result.stats.battery_fraction == pytest.approx([0.595], abs=1e-12)
    assert result.stats.energy_by_activity_j["compute"] == pytest.approx([5.0])
    assert result.stats.energy_by_activity_j["idle"] == pytest.approx([0.0])


@pytest.mark.parametrize("form", ["actors", "arrays"])
def test_a_logged_rise_revives_an_emptied_device(tmp_path, form):
    """10 % at 0 s falling to 0 % at 100 s (1 W), the job's 2 W on top from 0 to 2.5 s: empty at (100 - 5) / 1 = 95 s
    -- then dead, drawing nothing; from 100 s the log rises to 50 % at 200 s (-5 W): on again at 100 s, 500 J at
    200 s and after."""
    levels = [(0, BATTERY, 10), (100, BATTERY, 0), (200, BATTERY, 50)]
    path = write_device_logs([log("a", levels)], tmp_path / "a.parquet", "parquet")
    sim, result = run(phones(path, stop_s=300.0), form, idle_events=True)  # the rows log idle devices' events too
    kinds = [(e.kind, e.time) for e in events(sim) if e.kind in ("battery_empty", "offline", "power_on", "online")]
    assert kinds == [("online", 0), ("battery_empty", 95), ("offline", 95), ("power_on", 100), ("online", 100)]
    assert result.stats.battery_fraction == pytest.approx([0.5], abs=1e-12)
    assert not result.stats.battery_empty[0]


def test_both_forms_follow_the_same_levels(tmp_path):
    """Twelve phones, levels every 10 to 60 s rising and falling, and five boards of a simulated battery beside
    them (a world of both), many rounds of work: the same world in both forms."""
    rng = np.random.default_rng(3)
    logs = []
    for d in range(12):
        times = np.cumsum(rng.uniform(10, 60, 30)).round()
        levels = np.clip(50 + np.cumsum(rng.normal(0, 8, 30)), 0, 100).round()
        logs.append(log(f"p{d}", [(t, BATTERY, v) for t, v in zip(times, levels)]))
    path = write_device_logs(logs, tmp_path / "fleet.json", "flash")
    boards = group("boards", 5, power={"idle": 0.5}, battery={"capacity": 300.0, "initial": 0.4, "min_level": 0.3})
    boards["availability"] = {"policy": "sessions", "on": {"exponential": {"mean": "40s"}}, "off": "20s"}
    # 997 J, not 1 kJ: with whole seconds and whole percentages a level can return to min_level exactly at a
    # logged level (a tie each form's float sums may break its own way)
    devices = [phones_group(path, 12, min_level=0.3, capacity=997.0), boards]
    sc = scenario(devices, stop={"sim_time": 800.0}, round={"participants": 4, "deadline": 20.0})
    (actor_sim, actors), (array_sim, arrays) = run(sc, "actors"), run(sc, "arrays")
    available = [[tuple(map(int, c.available)) for c in sim.backend.contexts] for sim in (actor_sim, array_sim)]
    assert available[0] == available[1]
    assert actors.stats.tasks_started.sum() > 10
    assert np.array_equal(actors.stats.tasks_started, arrays.stats.tasks_started)
    assert actors.stats.battery_fraction == pytest.approx(arrays.stats.battery_fraction, rel=1e-9)
    assert actors.stats.charged_j == pytest.approx(arrays.stats.charged_j, rel=1e-9)
    assert len({len(a) for a in available[0]}) > 1  # min_level and the levels matter
    assert {"battery_empty", "power_on", "below_min_level"} <= set(actors.recorder.kinds)  # a logged 0 %, FL on top
    assert arrays.stats.battery_empty[12:].all()  # the boards' own battery: 120 J at 0.5 W, empty by 240 s


def test_validate_refuses_devices_without_levels_and_too_few_logs(tmp_path):
    path = tmp_path / "fleet.csv"
    path.write_text("device,time,state,value\na,0,battery,80\nb,0,lock,1\nb,5,screen,0\n")
    with pytest.raises(ScenarioError) as caught:
        phones(path, count=2)
    assert (
        f"devices[0].battery.levels.file: {path}:0: device b: has no battery level; accepted for battery.levels: "
        "at least one battery row"
    ) in str(caught.value)
    with pytest.raises(ScenarioError, match=r"holds 1 devices, fewer than the 2 whose batteries follow it"):
        phones(write_device_logs([log("a", [(0, BATTERY, 80)])], tmp_path / "one.csv", "csv"), count=2)
    bad = tmp_path / "bad.csv"
    bad.write_text("device,time,state,value\na,0,battery,130\n")
    with pytest.raises(ScenarioError, match=r"bad.csv:2: device a: battery value 130% is out of range"):
        phones(bad)
    with pytest.raises(ScenarioError, match=r"initial, charge_power: not with levels \(the battery starts at its"):
        phones(path, initial=0.5, charge_power=5.0)


TINY = """\
name: tiny-levels
seed: 1
stop: {sim_time: 1h}
task:
  dataset: {name: digits, partition: {kind: iid, samples_per_client: 20}}
  model: {name: logistic}
  local: {steps: 2, batch_size: 8, lr: 0.1}
devices:
  - group: phones
    count: 4
    compute: {flops_per_s: 1GFLOPS}
    power: {compute: 2W, transmit: 0.2W, idle: 50mW}
    battery: {capacity: 100J, levels: {file: fleet.csv}}
    availability: {policy: device_logs, file: fleet.csv}
    link: {uplink: 10Mbps}
server:
  round: {participants: 2, deadline: 1min, interval: 10min}
engine: {devices: arrays}
"""


def test_simulate_a_fleet_whose_batteries_follow_their_logs(tmp_path, monkeypatch):
    """`netfl simulate` end to end: four phones locked, charging and on Wi-Fi from 0 s, their levels logged every 10
    minutes (49-50 %, 40, 45, 60, 70 %, then none): each ends at its last logged level less the energy its FL work
    drew (no level is clipped on the way)."""
    import pandas as pd
    from cli_support import run as netfl

    logs = []
    for d in range(4):
        times = [0, 0, 0, 0, 600, 1200, 1800, 2400]
        kinds = [LOCK, CHARGER, NETWORK, BATTERY, BATTERY, BATTERY, BATTERY, BATTERY]
        logs.append(log(f"p{d}", list(zip(times, kinds, [1, 1, 1, 50 - d, 40, 45, 60, 70]))))
    write_device_logs(logs, tmp_path / "fleet.csv", "csv")
    (tmp_path / "tiny.yaml").write_text(TINY)
    monkeypatch.chdir(tmp_path)
    checked = netfl("validate", "tiny.yaml")
    assert checked.exit_code == 0, checked.output
    assert "logs       fleet.csv: 4 devices" in checked.output
    ran = netfl("simulate", "tiny.yaml", "--out", "res")
    assert ran.exit_code == 0, ran.output
    devices = pd.read_parquet(tmp_path / "res" / "devices.parquet")
    assert devices.tasks_started.sum() == 12 and (devices.work_energy_j > 0).all()
    expected = 0.70 - devices.work_energy_j / 100.0
    assert devices.battery_fraction.tolist() == pytest.approx(expected.tolist(), abs=1e-12)
    assert devices.energy_idle_j.tolist() == [0.0] * 4


def test_a_device_past_validates_sample_without_levels_is_refused_as_the_run_reads_it(tmp_path, monkeypatch):
    """validate reads the first devices in full (a sample) and counts the rest; the run reads them all, and names
    a device without levels past the sample in the same line."""
    from netfl.errors import PolicyError
    from netfl.policies import device_logs

    path = tmp_path / "fleet.csv"
    path.write_text("device,time,state,value\na,0,battery,80\nb,0,lock,1\n")
    monkeypatch.setattr(device_logs, "SAMPLE_DEVICES", 1)
    sc = phones(path, count=2)  # valid: device a, the sample, has levels
    with pytest.raises(PolicyError, match=r"fleet.csv:0: device b: has no battery level"):
        run(sc, "arrays")
