"""Batteries that empty while plugged in, against hand computation.

A phone whose loads out-draw its charger (training on a weak charger)
empties although it is plugged in; it must power on again at once when the
charger covers its idle load (as it does when plugged in after emptying),
and must stay off when the charger is too weak even for that.
"""

from __future__ import annotations

from test_charging import events, run
from test_engine import AlwaysRound, FakeBackend, approx, group, scenario


def weak_charger_run(charge_w: float):
    # 10 J, full; idle 1 W, compute 3 W; plugged in at c W from t = 0. Download 1 s at (1 - c) W net (a full
    # battery stays full), then a 100 s job at (4 - c) W net: empty at 1 + min(10, 10 - (1 - c)) / (4 - c).
    power = {"compute": 3.0, "transmit": 0.0, "idle": 1.0}
    sc = scenario([group("g", 1, flops=1e9, up=1e6, power=power,
                         battery={"capacity": 10.0, "initial": 1.0, "charge_power": charge_w})],
                  stop={"sim_time": 20.0}, round={"idle_wait": 1.0})
    backend = FakeBackend(model_bytes=125_000, flops=1e11)
    return run(sc, {"start": 0.0}, policy=AlwaysRound, backend=backend)


def test_phone_emptied_on_a_charger_that_covers_idle_powers_on_at_once():
    sim, result = weak_charger_run(2.0)
    empty_at = 1.0 + 10.0 / (4.0 - 2.0)  # the charger out-supplies idle: still full after the download
    assert empty_at == 6.0
    assert [t for t, _ in events(sim, "battery_empty")][:1] == [approx(empty_at)]
    assert [t for t, _ in events(sim, "power_on")][:1] == [approx(empty_at)]
    dropouts = events(sim, "dropout")
    assert dropouts[0][0] == approx(empty_at) and "battery_empty" in dropouts[0][1]
    # back on, and (min_level 0) asked to train again in the very next round
    selected = [t for t, k in zip(sim.recorder.times, sim.recorder.kinds) if k == "selected"]
    assert selected[1] == approx(empty_at)


def test_phone_emptied_on_a_charger_weaker_than_idle_stays_off():
    sim, result = weak_charger_run(0.5)
    empty_at = 1.0 + (10.0 - 0.5 * 1.0) / (4.0 - 0.5)
    assert [t for t, _ in events(sim, "battery_empty")] == [approx(empty_at)]
    assert events(sim, "power_on") == []  # 0.5 W cannot run a 1 W idle phone: it charges, switched off
    device = result.devices[0]
    assert device.dead and device.battery.level_j == approx(0.5 * (20.0 - empty_at))  # charging, no load: 8.14 J
