"""Rules over a device's states: the intervals in which they hold, against hand-computed ones."""

from __future__ import annotations

import math

import numpy as np
import pytest

from netfl.fleet_logs import BATTERY, CHARGER, LOCK, NETWORK, SCREEN, DeviceLog, RuleError, parse_rule

# locked at 10, plugged and on Wi-Fi at 20 (same instant), 4G at 30, Wi-Fi again at 40, unlocked at 50,
# battery 25 % at 5, 35 % at 45
LOG = DeviceLog(
    "a",
    np.array([5, 10, 20, 20, 30, 40, 45, 50.0]),
    np.array([BATTERY, LOCK, CHARGER, NETWORK, NETWORK, NETWORK, BATTERY, LOCK], np.int8),
    np.array([25, 1, 1, 1, 4, 1, 35, 0.0]),
)


@pytest.mark.parametrize(
    "rule, starts, ends",
    [
        ("locked and charging and wifi", [20, 40], [30, 50]),
        ("not charging", [-math.inf], [20]),
        ("screen_on", [-math.inf], [math.inf]),  # never logged: on, as FLASH starts it
        ("cellular or no_network", [-math.inf, 30], [20, 40]),
        ("locked and battery >= 30", [45], [50]),
        ("battery < 30", [5], [45]),  # unknown before the first level
        ("(locked or charging) and not 4g", [10, 40], [30, math.inf]),
    ],
)
def test_intervals_by_hand(rule, starts, ends):
    got = parse_rule(rule).intervals(LOG)
    np.testing.assert_array_equal(got[0], starts)
    np.testing.assert_array_equal(got[1], ends)


def test_changes_at_one_instant_open_no_empty_interval():
    log = DeviceLog("b", np.array([0, 7, 7.0]), np.array([SCREEN, SCREEN, SCREEN], np.int8), np.array([0, 1, 0.0]))
    starts, ends = parse_rule("screen_off").intervals(log)
    np.testing.assert_array_equal(starts, [0])
    np.testing.assert_array_equal(ends, [math.inf])


@pytest.mark.parametrize(
    "rule, what",
    [
        ("locked and sleepy", "unknown word 'sleepy'"),
        ("locked and", "ends too soon"),
        ("battery = 3", "cannot read ' = 3'"),
        ("battery is 3", "battery needs"),
        ("(locked", "not closed"),
        ("", "rule is empty"),
    ],
)
def test_bad_rules_said(rule, what):
    with pytest.raises(RuleError, match=what):
        parse_rule(rule)


@pytest.mark.parametrize(
    "rule", ["locked and charging and wifi", "charging", "screen_on", "not locked or battery < 30", "cellular"]
)
def test_a_block_gives_each_devices_intervals(rule):
    """A block's intervals (which read only the rule's kinds' rows) are each device's own, for devices whose rows
    are mostly of kinds the rule ignores, a device of battery levels alone and one whose changes share an instant."""
    from netfl.fleet_logs import LogBlock

    rng = np.random.default_rng(3)
    logs = []
    for d in range(6):
        k = rng.choice([SCREEN, LOCK, CHARGER, NETWORK, BATTERY, BATTERY, BATTERY], 40).astype(np.int8)
        values = np.where(k == BATTERY, rng.integers(0, 101, 40), np.where(k == NETWORK, rng.choice([0, 1, 4], 40),
                          rng.integers(0, 2, 40))).astype(float)  # fmt: skip
        logs.append(DeviceLog(f"d{d}", np.sort(rng.integers(0, 30, 40)).astype(float), k, values))
    logs.append(DeviceLog("levels", np.array([5.0, 9.0]), np.array([BATTERY] * 2, np.int8), np.array([20.0, 40.0])))
    logs.append(DeviceLog("instant", np.array([7.0] * 3), np.array([LOCK, CHARGER, NETWORK], np.int8), np.ones(3)))
    block = LogBlock(
        [log.device for log in logs], np.cumsum([0] + [len(log) for log in logs]),
        np.concatenate([log.times for log in logs]), np.concatenate([log.kinds for log in logs]),
        np.concatenate([log.values for log in logs]),
    )  # fmt: skip
    holds = parse_rule(rule)
    owner, starts, ends = holds.block_intervals(block)
    for i, log in enumerate(logs):
        s, e = holds.intervals(log)
        assert starts[owner == i].tolist() == s.tolist() and ends[owner == i].tolist() == e.tolist(), (rule, i)
