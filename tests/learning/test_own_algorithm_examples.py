"""The example strategies of examples/own_algorithm/ (FedDyn, trimmed mean, battery-aware selection) against
hand-computed values, and world.yaml run end to end."""

from __future__ import annotations

import csv
import importlib.util
import math
from pathlib import Path

import numpy as np
import pydantic
import pytest
import torch

import netfl
from netfl.algorithms import ClientInfo, ClientUpdate, DeviceStates, RoundContext, sample_uniform

FOLDER = Path(__file__).resolve().parents[2] / "examples" / "own_algorithm"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"own_algorithm_{name}", FOLDER / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(cls, clients: int = 4, **params):
    return cls(cls.Params(**params), ClientInfo(sizes=(10,) * clients, local_lr=0.1))


def update(client: int, delta, samples: int = 10, correction=None) -> ClientUpdate:
    return ClientUpdate(client, samples, torch.tensor(delta, dtype=torch.float64), 0, 0.1, 5, correction=correction)


def context(round_index: int = 0) -> RoundContext:
    return RoundContext(round_index, 0.0, (0, 1, 2, 3), (0, 1), (0, 1))


def close(a: torch.Tensor, b) -> None:
    torch.testing.assert_close(a, torch.tensor(b, dtype=torch.float64))


def test_feddyn_over_two_rounds_by_hand() -> None:
    feddyn = load("feddyn")
    strategy = build(feddyn.FedDyn, clients=4, alpha=0.5)
    assert feddyn.FedDyn.entry.client_state == 1 and feddyn.FedDyn.Params().alpha == 0.01
    first = strategy.correction(0, 0)
    assert first.pull == 0.5 and first.shift is None  # g_i = 0: the proximal pull alone
    x = torch.tensor([1.0, 2.0], dtype=torch.float64)
    # round 0: g_0 = -0.5 [2, 0], g_1 = -0.5 [0, 4]; h = -0.5 [2, 4] / 4; x = [1, 2] + [1, 2] - h / 0.5
    out = strategy.aggregate(x, [update(0, [2.0, 0.0], correction=first), update(1, [0.0, 4.0])], context(0))
    close(out.vector, [2.5, 5.0])
    close(strategy.g[0], [-1.0, 0.0])
    close(strategy.g[1], [0.0, -2.0])
    close(strategy.h, [-0.25, -0.5])
    assert out.metrics["clients_in_memory"] == 2 and out.metrics["updates"] == 2
    assert out.metrics["h_norm"] == pytest.approx(math.hypot(0.25, 0.5))
    # round 1: client 0 trains with shift -g_0 = [1, 0]; g_0 = [-1, 0] - 0.5 [-1, 1];
    # h = [-0.25, -0.5] - 0.5 [-1, 1] / 4; x = [2.5, 5] + [-1, 1] - h / 0.5
    second = strategy.correction(0, 0)
    assert second.pull == 0.5
    close(second.shift, [1.0, 0.0])
    close(strategy.correction(1, 0).shift, [0.0, 2.0])
    out = strategy.aggregate(out.vector, [update(0, [-1.0, 1.0], correction=second)], context(1))
    close(out.vector, [1.75, 7.25])
    close(strategy.g[0], [-0.5, -0.5])
    close(strategy.h, [-0.125, -0.625])
    assert out.metrics["h_norm"] == pytest.approx(math.hypot(0.125, 0.625))
    # no update: the model and the state stay as they are
    same = strategy.aggregate(out.vector, [], context(2))
    close(same.vector, [1.75, 7.25])
    assert same.metrics == {"updates": 0, "clients_in_memory": 2, "h_norm": pytest.approx(math.hypot(0.125, 0.625))}


def test_feddyn_refuses_a_non_positive_alpha() -> None:
    with pytest.raises(pydantic.ValidationError):
        load("feddyn").FedDyn.Params(alpha=0)


def test_trimmed_mean_drops_an_outlier_per_coordinate() -> None:
    trimmed_mean = load("trimmed_mean")
    deltas = [[1.0, 1.0], [2.0, 1.0], [3.0, 1.0], [4.0, 2.0], [100.0, -50.0]]
    updates = [update(i, d) for i, d in enumerate(deltas)]
    x = torch.tensor([0.5, 0.0], dtype=torch.float64)
    out = build(trimmed_mean.TrimmedMean, clients=5, trim=0.2).aggregate(x, updates, context())
    close(out.vector, [3.5, 1.0])  # k = 1: [2, 3, 4] and [1, 1, 1] kept
    assert out.metrics == {"updates": 5, "trimmed": 2}
    plain = build(trimmed_mean.TrimmedMean, clients=5, trim=0.1).aggregate(x, updates, context())
    close(plain.vector, [22.5, -9.0])  # k = floor(0.5) = 0: the plain mean, outlier and all
    assert trimmed_mean.TrimmedMean.entry.edge_rule
    assert build(trimmed_mean.TrimmedMean).aggregate(x, [], context()).metrics == {"updates": 0, "trimmed": 0}
    for bad in (0.5, -0.1):
        with pytest.raises(pydantic.ValidationError):
            trimmed_mean.TrimmedMean.Params(trim=bad)


AVAILABLE = (2, 5, 7, 9, 11, 13)
STATES = {
    "battery": np.array([0.9, 0.1, 0.5, 0.5, np.nan, 0.25]),  # 11: mains power
    "charging": np.array([False, True, False, False, False, False]),
}


def devices() -> DeviceStates:
    def read(indices):
        assert list(indices) == list(AVAILABLE)
        n = len(indices)
        return {**{k: v.copy() for k, v in STATES.items()}, **{f: np.zeros(n) for f in DeviceStates.FIELDS[2:]}}

    return DeviceStates(AVAILABLE, 0.0, read)


def test_battery_aware_asks_the_charging_then_the_fullest() -> None:
    strategy = build(load("battery_aware").BatteryAware, clients=14, min_battery=0.3)
    rng = np.random.default_rng(0)
    # charging or mains first (11, then 5), then 2 (0.9); 13 (0.25, not charging) never
    assert strategy.select(0, AVAILABLE, 3, rng, devices()) == [(2, 0), (5, 0), (11, 0)]
    assert strategy.select(0, AVAILABLE, None, rng, devices()) == [(c, 0) for c in (2, 5, 7, 9, 11)]
    assert strategy.select(0, AVAILABLE, 10, rng, devices()) == [(c, 0) for c in (2, 5, 7, 9, 11)]
    fourth = set()  # 7 and 9 tie at 0.5: the rng decides, both in turn
    for seed in range(20):
        chosen = [c for c, _ in strategy.select(0, AVAILABLE, 4, np.random.default_rng(seed), devices())]
        assert chosen[:2] == [2, 5] and chosen[-1] == 11 and len(chosen) == 4
        fourth.add(chosen[2])
    assert fourth == {7, 9}
    again = [strategy.select(0, AVAILABLE, 4, np.random.default_rng(3), devices()) for _ in range(2)]
    assert again[0] == again[1]  # the seed decides


def test_battery_aware_is_uniform_without_device_states_and_averages_by_samples() -> None:
    strategy = build(load("battery_aware").BatteryAware, clients=14)
    chosen = strategy.select(0, AVAILABLE, 3, np.random.default_rng(5), None)
    assert chosen == [(c, 0) for c in sample_uniform(AVAILABLE, 3, np.random.default_rng(5))]
    x = torch.tensor([1.0, 1.0], dtype=torch.float64)
    out = strategy.aggregate(x, [update(0, [4.0, 0.0], samples=1), update(1, [0.0, 4.0], samples=3)], context())
    close(out.vector, [2.0, 4.0])
    assert out.metrics == {"updates": 2, "samples": 4}


def test_world_yaml_runs_feddyn_end_to_end(tmp_path: Path) -> None:
    result = netfl.run(FOLDER / "world.yaml", overrides=["stop.rounds=3"], out=tmp_path / "run", threads=1)
    assert result.summary["complete"] and result.summary["rounds"] == 3
    assert result.summary["algorithm"] == "feddyn.py:FedDyn"
    with open(tmp_path / "run" / "algorithm.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["round"]) for r in rows] == [0, 1, 2]
    assert {"updates", "clients_in_memory", "h_norm"} <= set(rows[0])
    memory = [int(r["clients_in_memory"]) for r in rows]
    assert memory == sorted(memory) and 0 < memory[-1] <= 16
    assert all(float(r["h_norm"]) > 0 for r in rows if int(r["updates"]))
