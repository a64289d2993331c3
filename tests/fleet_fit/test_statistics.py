"""The fit's statistics and estimators against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from netfl.fleet_fit.estimate import circular_mean_sd, fit_group
from netfl.fleet_fit.goodness import circular_ks_binned, ks_binned
from netfl.fleet_fit.statistics import HOUR, device_stats, hourly_seconds
from netfl.fleet_fit.tracks import intervals_of, tracks_of_log
from netfl.fleet_logs import BATTERY, CHARGER, LOCK, NETWORK, SCREEN, DeviceLog


def test_hourly_seconds_splits_at_hours_and_days():
    # 00:30-02:15 and 23:00-01:00 of the next day
    got = hourly_seconds(np.array([1800.0, 23 * HOUR]), np.array([2.25 * HOUR, 25 * HOUR]))
    want = np.zeros(24)
    want[0], want[1], want[2], want[23] = 1800 + 3600, 3600, 900, 3600
    assert np.allclose(got, want)


def test_intervals_merge_equal_neighbours():
    s, e = intervals_of(np.array([0.0, 1, 2, 5]), np.array([True, True, False, True]), 9.0)
    assert s.tolist() == [0.0, 5.0] and e.tolist() == [2.0, 9.0]


def log(rows):
    a = np.array(rows, dtype=float)
    return DeviceLog("d", a[:, 0], a[:, 1].astype(np.int8), a[:, 2])


def test_eligible_is_locked_and_charging_and_on_wifi():
    t = tracks_of_log(
        log(
            [
                (0, SCREEN, 0),
                (0, LOCK, 1),
                (0, NETWORK, 1),
                (0, CHARGER, 0),
                (0, BATTERY, 50),
                (100, CHARGER, 1),
                (200, SCREEN, 1),
                (200, LOCK, 0),
                (300, SCREEN, 0),
                (300, LOCK, 1),
                (400, NETWORK, 4),
                (500, BATTERY, 60),
            ]
        )
    )
    assert list(zip(*t.eligible)) == [(100, 200), (300, 400)]
    assert list(zip(*t.use)) == [(200, 300)]
    assert list(zip(*t.charge)) == [(100, 500)]


def test_battery_rates_solve_the_physics():
    # 0-3600 unplugged idle: -1 %; 3600-7200 in use: -1 - 4 = -5 %; 7200-10800 charging: +20 - 1 = +19 %
    s = device_stats(
        tracks_of_log(
            log(
                [
                    (0, SCREEN, 0),
                    (0, CHARGER, 0),
                    (0, BATTERY, 50),
                    (3600, BATTERY, 49),
                    (3600, SCREEN, 1),
                    (7200, SCREEN, 0),
                    (7200, BATTERY, 44),
                    (7200, CHARGER, 1),
                    (10800, BATTERY, 63),
                ]
            )
        )
    )
    g = fit_group("g", [s], capacity=360000.0)  # 3600 J per percent: 1 %/h is 1 W
    assert (g.idle_power, g.use_power, g.charge_power) == pytest.approx((1.0, 4.0, 20.0))


def test_circular_mean_across_midnight():
    mean, sd = circular_mean_sd(np.array([23.5 * HOUR, 0.5 * HOUR]))
    assert min(mean, 86400 - mean) == pytest.approx(0, abs=1e-6) and sd == pytest.approx(1800)


def test_ks_of_histograms():
    assert ks_binned(np.array([1, 0, 0, 1]), np.array([0, 1, 0, 1])) == pytest.approx(0.5)
    assert ks_binned(np.array([1, 1]), np.array([1, 1])) == 0
    # two peaks either side of midnight a quarter day apart: the best cut makes them 1 apart still
    a, b = np.zeros(1440), np.zeros(1440)
    a[10], b[1430] = 1, 1
    assert circular_ks_binned(a, b) == 1.0 and math.isnan(ks_binned(a, np.zeros(1440)))
