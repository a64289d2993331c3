"""Round trip: a fleet of known parameters -> its logs in each format -> netfl fit -> the parameters back.

Tolerances, from the sample sizes (24 light and 16 heavy owners, 3 days):
* charger start and end: the circular mean of ~70 windows (fewer: the first and last are cut) of uniform
  jitter J = 45 min (sd J/sqrt 3 = 26 min): standard error ~3 min; allowed 10 min (> 3 SE).
* jitter: the sd of ~70 uniform draws has a relative standard error of about 1/sqrt(5 * 70) ~ 5 %; allowed 25 %.
* powers: the battery follows the physics exactly, rounded to 0.1 %; least squares over ~10^3 pairs: 5 %.
* use mixing: ~2 000 sessions, relative standard error ~2-3 %; allowed 12 %.
* hourly in-use probability: 72 device-hours an hour, correlated over ~mixing (4 min): ~540 independent
  looks, SE <= 0.02; allowed 0.08 (4 SE).
"""

from __future__ import annotations

import numpy as np
import pytest

from netfl.fleet_fit.estimate import circular_mean_sd
from netfl.fleet_fit.pipeline import fit_stats, stream_stats
from netfl.fleet_fit.synthetic import HEAVY, LIGHT, fleet_logs
from netfl.fleet_logs import write_device_logs
from netfl.policies.sessions import _parse_clock

KINDS = [(LIGHT, 24), (HEAVY, 16)]
DAYS = 3


def _near_clock(a: float, b: float, tolerance: float) -> bool:
    return abs((a - b + 43200) % 86400 - 43200) <= tolerance


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("logs")
    logs = list(fleet_logs(KINDS, DAYS, seed=5))
    out = {}
    for fmt, name in (("flash", "logs.json"), ("csv", "logs.csv"), ("parquet", "logs.parquet")):
        path = write_device_logs(logs, folder / name, fmt)
        stats, lines = stream_stats(path)
        out[fmt] = (fit_stats(stats, clusters=2, capacity=LIGHT.capacity, seed=0), lines)
    return out, sum(len(log) for log in logs)


@pytest.mark.parametrize("fmt", ["flash", "csv", "parquet"])
def test_parameters_recovered_from_each_format(fitted, fmt):
    results, total = fitted
    groups, lines = results[fmt]
    assert lines == total
    assert sorted(len(g.devices) for g in groups) == [16, 24]
    for g in groups:
        kind = {"0": LIGHT, "1": HEAVY}[g.devices[0].split("-")[0]]
        assert all(d.split("-")[0] == g.devices[0].split("-")[0] for d in g.devices)  # the clusters are the kinds
        start, end, jitter = g.window
        assert _near_clock(start, _parse_clock(kind.start), 600) and _near_clock(end, _parse_clock(kind.end), 600)
        assert jitter == pytest.approx(kind.jitter, rel=0.25)
        assert g.idle_power == pytest.approx(kind.idle_power, rel=0.05)
        assert g.use_power == pytest.approx(kind.use_power, rel=0.05)
        assert g.charge_power == pytest.approx(kind.charge_power, rel=0.05)
        assert g.use_mixing == pytest.approx(kind.use_mixing, rel=0.12)
        assert np.abs(np.array(g.use_profile) - np.array(kind.use_profile)).max() <= 0.08


def test_formats_agree(fitted):
    results, _ = fitted
    assert results["flash"][0] == results["csv"][0] == results["parquet"][0]


def test_circular_spread_of_uniform_jitter():
    u = np.linspace(-1, 1, 10001) * 2700 + 22.5 * 3600
    assert circular_mean_sd(u)[1] * 3**0.5 == pytest.approx(2700, rel=1e-3)


def test_per_device_groups_validate(tmp_path):
    import yaml

    from netfl.config import scenario_from_dict
    from netfl.fleet_fit.fragment import fragment_text

    stats, _ = stream_stats(
        write_device_logs(fleet_logs([(LIGHT, 3), (HEAVY, 2)], 2, seed=2), tmp_path / "l.csv", "csv")
    )
    groups = fit_stats(stats, clusters=None, capacity=LIGHT.capacity, seed=0)
    assert [g.devices for g in groups] == [(s.device,) for s in stats]
    devices = yaml.safe_load(fragment_text(groups, "l.csv", flops=1e9, uplink="10Mbps"))["devices"]
    world = {
        "name": "w",
        "stop": {"rounds": 1},
        "task": {"dataset": {"name": "digits"}, "model": {"name": "logistic"}, "local": {"steps": 1}},
        "devices": devices,
    }
    assert len(scenario_from_dict(world).devices) == 5
