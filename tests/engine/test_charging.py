"""Charging, threshold crossings and power-on after empty, against hand computation.

The charger follows a continuous-time policy; here a tiny "plugged in from
time T on" policy so every instant is computed by hand.
"""

from __future__ import annotations

import math

import pytest
from engine_support import AlwaysRound, FakeBackend, approx, charger_events, group, info, run_with_charger, scenario

from netfl.assemble import build_world
from netfl.policies import SessionPolicy
from netfl.rng import RandomStreams
from netfl.sim.battery import Battery
from netfl.sim.simulation import Simulation


def test_battery_charges_net_of_loads_and_stays_full():
    b = Battery(100.0, 20.0, charge_w=11.0)
    b.set_load(0.0, "idle", 1.0)
    assert b.time_to_full(0.0) == math.inf  # not plugged in
    b.set_charging(10.0, True)  # 10 s at 1 W: 10 J left
    assert b.level_j == pytest.approx(10.0)
    assert b.time_to_full(10.0) == pytest.approx(9.0)  # 90 J at a net 10 W
    assert b.time_to_level(10.0, 50.0) == pytest.approx(4.0)
    assert b.time_to_empty(10.0) == math.inf
    b.settle(30.0)
    assert b.level_j == 100.0 and b.charged_j == pytest.approx(90.0)
    assert b.energy_j["idle"] == pytest.approx(30.0)  # loads are counted whoever pays for them


def test_charging_back_to_a_level_logs_exact_marks():
    # 100 J at 20 %, idle 1 W, min level 50 %; plugged in at t=10 with 11 W: net +10 W from 10 J.
    sc = scenario(
        [
            group(
                "g",
                1,
                power={"compute": 0.0, "transmit": 0.0, "idle": 1.0},
                battery={"capacity": 100.0, "initial": 0.2, "min_level": 0.5, "charge_power": 11.0},
            )
        ],
        stop={"sim_time": 40.0},
        round={"idle_wait": 100.0},
    )
    sim, result = run_with_charger(sc, {"start": 10.0})
    assert charger_events(sim, "charge_start")[0][0] == approx(10.0)
    assert charger_events(sim, "above_min_level")[0][0] == approx(14.0)  # 10 J -> 50 J at 10 W
    assert charger_events(sim, "battery_full")[0][0] == approx(19.0)  # 10 J -> 100 J at 10 W
    device = sim.devices[0]
    assert device.battery.level_j == approx(100.0) and not device.below_min
    assert result.energy_j == approx(40.0)  # idle 1 W for 40 s


def test_unplugging_drains_back_below_the_threshold():
    # full 100 J, idle 5 W, min 50 %: crosses 50 J at t=10 going down; plugged [12, 12.5) at 15 W nets
    # +10 W: 40 J -> 45 J, still below; then empty at 12.5 + 45/5 = 21.5.
    sc = scenario(
        [
            group(
                "g",
                1,
                power={"compute": 0.0, "transmit": 0.0, "idle": 5.0},
                battery={"capacity": 100.0, "min_level": 0.5, "charge_power": 15.0},
            )
        ],
        stop={"sim_time": 30.0},
        round={"idle_wait": 100.0},
    )
    sim, _ = run_with_charger(sc, {"start": 12.0, "end": 12.5})
    assert [t for t, _ in charger_events(sim, "below_min_level")] == [approx(10.0)]
    assert charger_events(sim, "above_min_level") == []
    assert [t for t, _ in charger_events(sim, "charge_stop")] == [approx(12.5)]
    assert [t for t, _ in charger_events(sim, "battery_empty")] == [approx(21.5)]


def test_empty_phone_powers_on_when_plugged_in_and_trains_again():
    # 5 J, idle 1 W: empty at 5 s; plugged at 8 s with 3 W (net +2 W from 0 J).
    sc = scenario(
        [
            group(
                "g",
                1,
                flops=1e9,
                up=1e6,
                power={"compute": 0.0, "transmit": 0.0, "idle": 1.0},
                battery={"capacity": 100.0, "initial": 0.05, "charge_power": 3.0},
            )
        ],
        stop={"sim_time": 20.0},
        round={"idle_wait": 1.0},
    )
    backend = FakeBackend(model_bytes=125_000, flops=1e9)  # 1 s down, 1 s train, 1 s up
    sim, result = run_with_charger(sc, {"start": 8.0}, policy=AlwaysRound, backend=backend)
    assert charger_events(sim, "battery_empty")[0][0] == approx(5.0)
    assert charger_events(sim, "power_on")[0][0] == approx(8.0)
    rec = sim.recorder
    dropouts = [(t, c) for t, c, k in zip(rec.times, rec.column("cause"), rec.kinds) if k == "dropout"]
    assert dropouts and dropouts[0] == (approx(5.0), "battery_empty")
    # rounds: [0,3] delivered; [3,5] empties mid-train; idle rounds until power-on at 8; trains again after
    uploads = [t for t, k in zip(rec.times, rec.kinds) if k == "upload_end"]
    assert uploads[0] == approx(3.0) and any(t > 8.0 for t in uploads)


def test_device_starting_empty_is_off_until_charged():
    sc = scenario(
        [
            group(
                "g",
                1,
                power={"compute": 0.0, "transmit": 0.0, "idle": 1.0},
                battery={"capacity": 10.0, "initial": 0.0, "charge_power": 2.0},
            )
        ],
        stop={"sim_time": 5.0},
        round={"idle_wait": 1.0},
    )
    sim, _ = run_with_charger(sc, {"start": 2.0}, policy=AlwaysRound)
    assert charger_events(sim, "battery_empty")[0][0] == 0.0
    assert charger_events(sim, "power_on")[0][0] == approx(2.0)
    assert sim.devices[0].battery.level_j == approx(3.0)  # net +1 W for 3 s


class AboveHalf(SessionPolicy):
    """Online only while the battery is above half: it names 0.5 as a mark so the engine asks again there."""

    def online(self, now, state) -> bool:
        return state.battery_fraction > 0.5

    def battery_marks(self) -> tuple[float, ...]:
        return (0.5,)


class AboveHalfSilent(AboveHalf):
    def battery_marks(self) -> tuple[float, ...]:
        return ()


@pytest.mark.parametrize("policy,offline_at", [(AboveHalf, 30.0), (AboveHalfSilent, None)])
def test_a_policy_is_asked_again_at_its_own_battery_marks(policy, offline_at):
    """100 J at 80 %, 1 W idle: the level reaches 50 % at t = 30 s exactly (hand-computed)."""
    sc = scenario(
        [
            group(
                "phone",
                power={"compute": 0.0, "transmit": 0.0, "idle": 1.0},
                battery={"capacity": 100.0, "initial": 0.8},
            )
        ],
        stop={"sim_time": 60.0},
    )
    streams = RandomStreams(sc.seed)
    sim = Simulation(
        build_world(sc, streams, policies=[policy(policy.Params(), info(0), streams.numpy("availability", 0))]),
        FakeBackend(),
    )
    sim.run()
    offline = [t for t, d, k in zip(sim.recorder.times, sim.recorder.devices, sim.recorder.kinds) if k == "offline"]
    if offline_at is None:  # without the mark nobody asks: the device stays online far below its own threshold
        assert offline == []
    else:
        assert offline == [pytest.approx(offline_at, rel=1e-12)]


# ------------------------------- phones that empty while plugged in (loads out-draw the charger)


def weak_charger_run(charge_w: float):
    # 10 J, full; idle 1 W, compute 3 W; plugged in at c W from t = 0. Download 1 s at (1 - c) W net (a full
    # battery stays full), then a 100 s job at (4 - c) W net: empty at 1 + min(10, 10 - (1 - c)) / (4 - c).
    power = {"compute": 3.0, "transmit": 0.0, "idle": 1.0}
    sc = scenario(
        [
            group(
                "g",
                1,
                flops=1e9,
                up=1e6,
                power=power,
                battery={"capacity": 10.0, "initial": 1.0, "charge_power": charge_w},
            )
        ],
        stop={"sim_time": 20.0},
        round={"idle_wait": 1.0},
    )
    backend = FakeBackend(model_bytes=125_000, flops=1e11)
    return run_with_charger(sc, {"start": 0.0}, policy=AlwaysRound, backend=backend)


def test_phone_emptied_on_a_charger_that_covers_idle_powers_on_at_once():
    sim, result = weak_charger_run(2.0)
    empty_at = 1.0 + 10.0 / (4.0 - 2.0)  # the charger out-supplies idle: still full after the download
    assert empty_at == 6.0
    assert [t for t, _ in charger_events(sim, "battery_empty")][:1] == [approx(empty_at)]
    assert [t for t, _ in charger_events(sim, "power_on")][:1] == [approx(empty_at)]
    dropouts = charger_events(sim, "dropout")
    assert dropouts[0][0] == approx(empty_at) and dropouts[0][1].field("cause") == "battery_empty"
    # back on, and (min_level 0) asked to train again in the very next round
    selected = [t for t, k in zip(sim.recorder.times, sim.recorder.kinds) if k == "selected"]
    assert selected[1] == approx(empty_at)


def test_phone_emptied_on_a_charger_weaker_than_idle_stays_off():
    sim, result = weak_charger_run(0.5)
    empty_at = 1.0 + (10.0 - 0.5 * 1.0) / (4.0 - 0.5)
    assert [t for t, _ in charger_events(sim, "battery_empty")] == [approx(empty_at)]
    assert charger_events(sim, "power_on") == []  # 0.5 W cannot run a 1 W idle phone: it charges, switched off
    device = result.devices[0]
    assert device.dead and device.battery.level_j == approx(0.5 * (20.0 - empty_at))  # charging, no load: 8.14 J
