"""``eligible`` at array scale: one model whose state is the AND of its components' models, the charger left to
the engine (requires_charging), and the per-device composite kept where a component is a per-device class."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from engine_support import group

from netfl import keyed_random
from netfl.config import scenario_from_dict
from netfl.policies import DeviceInfo, build_policy
from netfl.policies.catalog import population_model, supports_population

HOUR, DAY = 3600.0, 86400.0
IDLE = {"policy": "sessions", "on": {"exponential": {"mean": "40min"}}, "off": {"exponential": {"mean": "20min"}}}
WIFI = {"policy": "daily", "start": "18:00", "end": "08:00", "jitter": "30min"}


def spec(policy: str, **params) -> SimpleNamespace:
    return SimpleNamespace(policy=policy, params=params)


def build(n: int, key: int = 21, base_dir: Path | None = None, **params):
    return population_model(spec("eligible", **params), n, key, np.full((n, 2), 0.5), 1, base_dir=base_dir)


def test_the_state_is_the_and_of_the_components_drawn_on_their_own() -> None:
    n = 2000
    model = build(n, idle=IDLE, wifi=WIFI)
    alone = {name: population_model(spec(**s), n, keyed_random.child_key(21, name), np.full((n, 2), 0.5), 1)
             for name, s in (("idle", IDLE), ("wifi", WIFI))}  # fmt: skip
    online_s = np.zeros(n)

    def accrue(devices, since, at, was_on):
        online_s[devices[was_on]] += (at - since)[was_on]

    expected_s = np.zeros(n)
    times = np.arange(0, 3 * DAY, 97.0)
    for t, dt in zip(times, np.diff(times, append=3 * DAY)):
        model.advance(t, accrue)
        for m in alone.values():
            m.advance(t)
        both = alone["idle"].state & alone["wifi"].state
        assert np.array_equal(model.state, both), t
        expected_s += both * dt  # sampled every 97 s: the integral to within a sample's width per change
    model.advance(3 * DAY, accrue)
    online_s[model.state] += 3 * DAY - model.since[model.state]
    assert online_s.mean() == pytest.approx(expected_s.mean(), rel=0.01)
    share = expected_s.mean() / (3 * DAY)  # idle 2/3 of the time, Wi-Fi 14 h of 24: about 0.39
    assert share == pytest.approx(2 / 3 * 14 / 24, abs=0.02)
    assert model.requires_charging and not build(3, charging=False, idle=IDLE).requires_charging


def test_a_component_that_stops_changing_leaves_the_and_fixed_and_the_search_finite(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("device,start_s,end_s\n0,0,100\n1,50,60\n")
    model = build(2, charging=False, idle=IDLE, wifi={"policy": "trace_csv", "file": "t.csv"}, base_dir=tmp_path)
    model.advance(30 * DAY)  # idle flips on for ever; Wi-Fi never again after 100 s
    assert not model.state.any()


PER_DEVICE = """
from netfl.policies import SessionPolicy

class Idle(SessionPolicy):
    def online(self, now, state):
        return True
"""


def test_a_per_device_component_keeps_the_per_device_composite(tmp_path: Path) -> None:
    (tmp_path / "idle.py").write_text(PER_DEVICE)
    mixed = spec("eligible", charging=False, idle={"policy": "idle.py:Idle"}, wifi=WIFI)
    assert not supports_population(mixed, tmp_path)
    assert supports_population(spec("eligible", idle=IDLE, wifi=WIFI), tmp_path)
    info = DeviceInfo(0, "g", 10, np.full(10, 0.1), 0, tmp_path)
    policy = build_policy(mixed, info, np.random.default_rng(3))
    assert policy.model is None and set(policy.components) == {"idle", "wifi"}
    unplugged = SimpleNamespace(charging=False, mains=False, battery_fraction=1.0)
    assert not policy.online(12 * HOUR, unplugged) and policy.online(23 * HOUR, unplugged)


def lazy(availability: dict):
    return scenario_from_dict(
        {
            "name": "eligible-lazy",
            "stop": {"rounds": 2},
            "task": {
                "dataset": {"name": "digits", "partition": {"samples_per_client": 10}},
                "model": {"name": "logistic"},
            },
            "devices": [group("phones", 4, availability=availability)],
            "engine": {"devices": "lazy"},
        }
    )
