"""The array form's closed form of an idle device's day, against hand-computed times and joules.

One phone: 100 J battery holding 50 J, 1 W idle, a 3 W charger plugged in over [10, 40) and [200, 260), its
owner using it over [50, 60) at 2 W, available always, min_level 20 %:

    0-10    idle 1 W                     50 -> 40 J
    10-40   charging: 1 W - 3 W          40 -> 100 J (full at 40), 60 J charged
    40-50   idle                         100 -> 90 J
    50-60   in use: 1 W + 2 W            90 -> 60 J, 20 J of use
    60-120  idle                         60 -> 0 J: empty at 120, off
    120-200 off, nothing drawn           0 J
    200     plugged in: 3 W > 1 W idle, it powers on
    200-260 charging                     0 -> 100 J (full at 250), 100 J charged
    260-300 idle                         100 -> 60 J
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from netfl.policies.population import AlwaysModel, PopulationModel
from netfl.registry.device_params import UsageSpec
from netfl.sim.device_table import DeviceTable
from netfl.sim.idle_rows import GroupRows, IdleRows, UsageSetup


class Windows(PopulationModel):
    """One device on over the given [start, end) windows (off before the first)."""

    def __init__(self, *bounds: float):
        super().__init__(1, key=0)
        self.bounds = list(bounds)
        self.change[:] = self.bounds.pop(0)

    def _next_change(self, due: np.ndarray, at: np.ndarray) -> np.ndarray:
        return np.array([self.bounds.pop(0) if self.bounds else math.inf])


def phone(charge_w: float = 3.0) -> IdleRows:
    table = DeviceTable(
        group=np.zeros(1, dtype=np.int32),
        group_names=["phones"],
        **{k: np.zeros(1) for k in ("flops_per_s", "compute_w", "transmit_w", "receive_w")},
        idle_w=np.array([1.0]),
        capacity_j=np.array([100.0]),
        initial_j=np.array([50.0]),
        min_level=np.array([0.2]),
        charge_w=np.array([charge_w]),
        uplink_bps=np.ones(1),
        downlink_bps=np.ones(1),
        distance_m=np.ones(1),
    )
    usage = UsageSetup(Windows(50.0, 60.0), UsageSpec(sessions={"policy": "windows"}, power=2.0))
    always = AlwaysModel(None, 1, 0, np.ones((1, 1)), 0)
    return IdleRows(table, [GroupRows(always, Windows(10.0, 40.0, 200.0, 260.0), usage)])


@pytest.mark.parametrize(
    "t, level, eligible",
    [
        (5.0, 45.0, True),
        (10.0, 40.0, True),
        (25.0, 70.0, True),
        (40.0, 100.0, True),
        (55.0, 75.0, False),  # in use: not idle
        (60.0, 60.0, True),
        (115.0, 5.0, False),  # below min_level (20 J)
        (130.0, 0.0, False),  # off
        (205.0, 10.0, False),  # on again, below min_level
        (240.0, 80.0, True),
        (255.0, 100.0, True),  # full since 250
        (300.0, 60.0, True),
    ],
)
def test_an_idle_phones_day_in_closed_form(t: float, level: float, eligible: bool) -> None:
    rows = phone()
    rows.advance(t)
    assert rows.level_at(np.array([0]), t)[0] == pytest.approx(level, abs=1e-9)
    assert (0 in rows.eligible(t)) == eligible


def test_the_accounts_of_the_day() -> None:
    rows = phone()
    for t in (7.0, 55.0, 130.0, 230.0):  # reading along the way changes no account
        rows.advance(t)
        rows.energy_at(t)
    rows.advance(300.0)
    rows.settle(np.array([0]), 300.0)
    assert rows.level[0] == pytest.approx(60.0)
    assert rows.energy_j["idle"][0] == pytest.approx(120.0 + 100.0)  # on over [0, 120) and [200, 300)
    assert rows.energy_j["use"][0] == pytest.approx(20.0)
    assert rows.charged_j[0] == pytest.approx(60.0 + 100.0)
    assert rows.online_time_s[0] == pytest.approx(220.0)
    assert rows.alive[0] and not rows.charging[0] and not rows.using[0]


def test_a_charger_weaker_than_the_idle_draw_charges_a_dead_phone_without_powering_it_on() -> None:
    rows = phone(charge_w=0.5)
    rows.advance(300.0)
    # 0-10: 50 -> 40; 10-40: net 0.5 W drain -> 25; 40-50 -> 15; 50-60: 3 W -> 0 at 55: off.
    # 200-260: charging while off: +30 J; it stays off.
    rows.settle(np.array([0]), 300.0)
    assert not rows.alive[0] and rows.level[0] == pytest.approx(30.0)
    assert rows.energy_j["use"][0] == pytest.approx(10.0)  # 50-55
    assert rows.online_time_s[0] == pytest.approx(55.0)
