"""Per-device parameters (netfl/policies/per_device.py): time zones, heavy and light users, battery health --
their draws against closed forms, held without memory where constant, and bad values refused in one line."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from cli_support import TINY, assert_user_error
from cli_support import run as run_cli

from netfl.assemble.world import device_table
from netfl.config.loading import load_scenario
from netfl.distributions import Distribution
from netfl.policies.builtin import BUILTIN_POLICIES
from netfl.policies.per_device import WeightedChoice, device_values, parse_per_device
from netfl.policies.population import build_population_model
from netfl.policies.sessions import DAY, HOUR
from netfl.rng import RandomStreams


def model(policy: str, n: int, key: int = 7, **params):
    cls = BUILTIN_POLICIES[policy]
    return build_population_model(policy, cls.Params.model_validate(params), n, key, np.full((n, 1), 1.0), seed=3)


def test_a_uniform_time_zone_moves_each_devices_first_window_by_its_own_offset() -> None:
    n = 10_000
    m = model("daily", n, start="12:00", end="13:00", time_zone_offset={"uniform": ["-5h", "3h"]})
    offset = device_values(Distribution("uniform", (-5 * HOUR, 3 * HOUR)), 7, "time_zone_offset", n)
    assert not m.state.any()
    assert np.allclose(m.change, 12 * HOUR - offset, rtol=0, atol=1e-9)  # local 12:00 is simulated 12:00 - offset
    assert m.change.mean() == pytest.approx(13 * HOUR, abs=4 * 8 * HOUR / math.sqrt(12 * n))  # 12h - E[offset]
    assert m.change.min() >= 9 * HOUR and m.change.max() <= 17 * HOUR


def test_a_weighted_choice_of_zones_gives_each_its_share() -> None:
    n = 20_000
    zones = {"choice": {"values": ["-5h", "0h", "1h"], "weights": [2, 5, 3]}}
    m = model("daily", n, start="12:00", end="13:00", time_zone_offset=zones)
    opens = np.round((12 * HOUR - m.change) / HOUR)
    shares = [(opens == z).mean() for z in (-5, 0, 1)]
    assert shares == pytest.approx([0.2, 0.5, 0.3], abs=0.015) and set(np.unique(opens)) == {-5, 0, 1}


def test_diurnal_starts_in_each_devices_local_hour() -> None:
    n = 5_000
    m = model("diurnal", n, profile=[1.0] * 12 + [0.0] * 12, mixing="1s", time_zone_offset={"uniform": ["0h", "24h"]})
    local_hour = np.floor(m.offset / HOUR) % 24
    assert np.array_equal(m.state, local_hour < 12) and 0.45 < m.state.mean() < 0.55


def test_heavy_users_are_online_as_the_scaled_chain_says() -> None:
    """P(online) of a device with rate factor a and length factor s is a s p / (a s p + 1 - p)."""
    n, p = 20_000, 0.2
    scales = {"rate_scale": {"choice": [0.5, 4.0]}, "length_scale": {"choice": [1.0, 2.0]}}
    m = model("diurnal", n, profile=[p] * 24, mixing="10s", **scales)
    m.advance(HOUR / 2)  # 180 mixing times: stationary
    odds = m.come_scale / m.leave_scale
    for a_s in np.unique(odds):
        expected = a_s * p / (a_s * p + 1 - p)
        assert m.state[odds == a_s].mean() == pytest.approx(expected, abs=0.025), a_s


def test_sessions_scale_each_devices_on_and_off_durations() -> None:
    n = 20_000
    exp = {"on": {"exponential": {"mean": "10min"}}, "off": {"exponential": {"mean": "30min"}}}
    m = model("sessions", n, **exp, rate_scale={"choice": [1.0, 3.0]}, length_scale=2.0)
    m.advance(DAY)
    fast = m.off_scale < 1.0
    assert m.state[fast].mean() == pytest.approx(20 / (20 + 10), abs=0.02)  # on 2x10min, off 30min / 3
    assert m.state[~fast].mean() == pytest.approx(20 / (20 + 30), abs=0.02)


def test_constant_parameters_hold_no_memory_per_device() -> None:
    m = model("diurnal", 100_000, mixing="10min", time_zone_offset="3h")
    for values in (m.offset, m.come_scale, m.leave_scale):
        assert values.strides == (0,) and values.shape == (100_000,)
    daily = model("daily", 100_000, start="22:00", end="07:00")
    assert daily.start.strides == (0,)


def test_a_devices_draw_depends_on_its_row_alone() -> None:
    dist = parse_per_device({"lognormal": {"median": 1, "sigma": 0.5}}, "count")
    whole = device_values(dist, 11, "rate_scale", 3_000)
    assert np.array_equal(device_values(dist, 11, "rate_scale", 1_000), whole[:1_000])
    assert not np.array_equal(device_values(dist, 11, "length_scale", 1_000), whole[:1_000])
    assert np.median(whole) == pytest.approx(1.0, rel=0.05)


def test_weighted_choice_as_written() -> None:
    dist = parse_per_device({"choice": {"values": ["1h", "2h"], "weights": [1, 3]}}, "time")
    assert isinstance(dist, WeightedChoice) and dist.params == (3600.0, 7200.0) and dist.mean == 6300.0
    assert parse_per_device(dist.as_scenario_value(), "time") == dist


def test_battery_health_fades_the_capacity_and_the_initial_charge_with_it(tmp_path: Path) -> None:
    battery = {"capacity": "50kJ", "health": {"uniform": [0.7, 1.0]}, "initial": 0.5}
    scenario = load_scenario(topology(tmp_path, battery=battery, count=10_000))
    table = device_table(scenario, RandomStreams(scenario.seed))
    assert table.capacity_j.mean() == pytest.approx(0.85 * 50e3, rel=0.01)
    assert table.capacity_j.min() >= 0.7 * 50e3 and table.capacity_j.max() <= 50e3
    assert np.array_equal(table.initial_j, 0.5 * table.capacity_j)
    plain = load_scenario(topology(tmp_path, battery={"capacity": "50kJ"}, count=10_000))
    assert device_table(plain, RandomStreams(plain.seed)).capacity_j.strides == (0,)


def topology(tmp_path: Path, count: int = 4, **group) -> Path:
    data = yaml.safe_load(TINY)
    data["devices"][0].update(count=count, **group)
    data["task"]["dataset"]["partition"] = {"kind": "iid", "samples_per_client": 20}  # many devices share them
    path = tmp_path / "topology.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_validate_accepts_and_shows_per_device_distributions(tmp_path: Path) -> None:
    availability = {"policy": "diurnal", "time_zone_offset": {"uniform": ["-5h", "3h"]}}
    battery = {"health": {"uniform": [0.7, 1.0]}}
    path = topology(tmp_path, availability=availability, battery=battery, usage="phone")
    result = run_cli("validate", path, "--set", "engine.devices=arrays")
    assert result.exit_code == 0, result.output
    assert "time_zone_offset={uniform: [-5h, 3h]}" in result.output
    assert "health uniform(70%, 100%)" in result.output
    assert "rate_scale={lognormal: {median: 1, sigma: 0.45}}, length_scale={lognormal: {median: 1, sigma: 0.25}}" in (
        result.output
    )


@pytest.mark.parametrize(
    "group, field, accepted",
    [
        ({"battery": {"health": -0.1}}, "devices[0].battery.health", "(0, 1]"),
        ({"battery": {"health": 1.2}}, "devices[0].battery.health", "(0, 1]"),
        ({"battery": {"health": {"uniform": [0.5, 1.1]}}}, "devices[0].battery.health", "(0, 1]"),
        ({"battery": {"health": {"beta": [2, 5]}}}, "devices[0].battery.health", "{uniform: [low, high]}"),
        (
            {"availability": {"policy": "daily", "start": "08:00", "end": "20:00", "time_zone_offset": {"gamma": 1}}},
            "devices[0].availability.time_zone_offset",
            "{uniform: [low, high]}",
        ),
        (
            {"availability": {"policy": "diurnal", "rate_scale": {"normal": {"mean": 1, "std": 0.2}}}},
            "devices[0].availability.rate_scale",
            "must be > 0 for every device",
        ),
        (
            {"battery": {"charging": {"policy": "daily", "start": "22:00", "end": "07:00", "time_zone_offset": []}}},
            "devices[0].battery.charging.time_zone_offset",
            "time quantity",
        ),
    ],
)
def test_bad_per_device_values_are_one_line_naming_the_file_and_field(
    tmp_path: Path, group: dict, field: str, accepted: str
) -> None:
    path = topology(tmp_path, **group)
    result = run_cli("validate", path, "--set", "engine.devices=arrays")
    assert_user_error(result, str(path), field, accepted)
    assert "1 problem(s)" in result.stderr and "no population form" not in result.stderr, result.stderr
