"""MMFL: the closed-form optimal sampling, its unbiased aggregation, the baselines, and the probe round in the
engine."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from click.testing import CliRunner
from scipy.optimize import minimize

from netfl.assemble import build_simulation
from netfl.backend import RoundContext
from netfl.cli.main import main
from netfl.config import scenario_from_dict
from netfl.errors import ScenarioError
from netfl.learn.federation.algorithms import ALGORITHMS, ClientInfo, ClientUpdate
from netfl.learn.federation.algorithms.mmfl import optimal_probabilities
from netfl.results.events_file import events_frame


def mmfl(sizes: list[list[int]], **params):
    cls = ALGORITHMS["mmfl"]
    return cls(cls.Params(**params), ClientInfo(tuple(sizes[0]), 0.1, task_sizes=tuple(map(tuple, sizes))))


def ctx(r: int = 0) -> RoundContext:
    return RoundContext(r, 0.0, (), (), ())


# ------------------------------------------------------------ the closed form


def test_optimal_probabilities_by_hand() -> None:
    # M = (1, 2, 4), N = 3, m = 2: N-m+1 = 2; l = 3 fails (lead 2 > 7/4), so k = 2:
    # the two smallest get (m-N+k) u / (M1 + M2) = u / 3, the largest u / M = (3/4, 1/4)
    u = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 1.0]])
    np.testing.assert_allclose(optimal_probabilities(u, 2), [[1 / 3, 0], [0, 2 / 3], [0.75, 0.25]])
    # one model, m = 1: no client saturates (k = N), p proportional to the norms
    np.testing.assert_allclose(optimal_probabilities(np.array([[1.0], [1.0], [2.0]]), 1), [[0.25], [0.25], [0.5]])
    # m = N: every client sends, each model in proportion to its norm
    np.testing.assert_allclose(optimal_probabilities(u, 3), [[1, 0], [0, 1], [0.75, 0.25]])


@pytest.mark.parametrize("seed", range(12))
def test_optimal_probabilities_invariants_and_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, s = int(rng.integers(3, 7)), int(rng.integers(1, 4))
    m = int(rng.integers(1, n))
    u = rng.lognormal(0.0, 1.5, size=(n, s))  # spread out: some clients saturate, some do not
    p = optimal_probabilities(u, m)
    assert (p >= 0).all() and p.sum() == pytest.approx(m, rel=1e-12)
    assert (p.sum(axis=1) <= 1 + 1e-12).all()

    # brute force: minimise sum u^2/p under the same constraints with a generic solver (SLSQP, exact gradients)
    scale = float(np.sum(u**2))
    weights = u.ravel() ** 2 / scale

    def client_row(i: int) -> np.ndarray:
        row = np.zeros((n, s))
        row[i] = -1.0
        return row.ravel()

    constraints = [{"type": "eq", "fun": lambda f: f.sum() - m, "jac": lambda f: np.ones_like(f)}]
    constraints += [
        {"type": "ineq", "fun": lambda f, i=i: 1 - f.reshape(n, s)[i].sum(), "jac": lambda f, i=i: client_row(i)}
        for i in range(n)
    ]
    best = minimize(
        lambda f: float(np.sum(weights / f)),
        np.full(n * s, m / (n * s)),
        jac=lambda f: -weights / f**2,
        method="SLSQP",
        bounds=[(1e-9, 1)] * (n * s),
        constraints=constraints,
        options={"ftol": 1e-13, "maxiter": 5000},
    )
    assert best.success, best.message
    assert float(np.sum(weights / p.ravel())) <= best.fun * (1 + 1e-9)
    np.testing.assert_allclose(p.ravel(), best.x, atol=1e-5)


def test_optimal_probabilities_edge_cases() -> None:
    u = np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 0.0]])
    p = optimal_probabilities(u, 2)  # the client with nothing to send gets 0; the others send for sure
    np.testing.assert_allclose(p, [[0, 0], [0.5, 0.5], [1, 0]])
    np.testing.assert_allclose(optimal_probabilities(u, 5), p)  # m capped: at most one update per client
    assert optimal_probabilities(np.zeros((3, 2)), 2).sum() == 0
    with pytest.raises(ValueError):
        optimal_probabilities(np.array([[-1.0]]), 1)


# ---------------------------------------------------------- the strategy


@pytest.mark.slow
def test_optimal_sampling_is_unbiased_monte_carlo() -> None:
    """E[sum_{i in A_s} (d_is/p_is) delta_is] = sum_i d_is delta_is, for each model s."""
    sizes = [[10, 30, 20, 40], [25, 25, 40, 10]]
    s = mmfl(sizes, sampling="optimal")
    rng = np.random.default_rng(7)
    deltas = torch.tensor(rng.normal(size=(4, 2, 3)))  # client x model x dim
    reports = {i: np.array([float(deltas[i, t].norm()) for t in range(2)]) for i in range(4)}
    d = np.asarray(sizes, dtype=float) / np.asarray(sizes, dtype=float).sum(axis=1, keepdims=True)
    full = [sum(d[t, i] * deltas[i, t] for i in range(4)) for t in range(2)]
    trials = 20000
    draws = torch.zeros(trials, 2, 3, dtype=torch.float64)
    sent = 0
    for k in range(trials):
        pairs = s.assign(0, reports, 2, rng)
        sent += len(pairs)
        assert len({c for c, _ in pairs}) == len(pairs)  # at most one model per client
        for t in range(2):
            ups = [ClientUpdate(c, sizes[t][c], deltas[c, t], 0, task=t) for c, tt in pairs if tt == t]
            draws[k, t] = s.aggregate(torch.zeros(3, dtype=torch.float64), ups, ctx()).vector
    mean, err = draws.mean(0), draws.std(0) / trials**0.5
    for t in range(2):
        assert (abs(mean[t] - full[t]) < 4.5 * err[t] + 1e-12).all(), (mean[t], full[t], err[t])
    assert sent / trials == pytest.approx(2.0, abs=0.05)  # m updates per round on average


def test_optimal_aggregation_by_hand() -> None:
    sizes = [[10, 30], [20, 20]]
    s = mmfl(sizes, sampling="optimal", server_lr=0.5)
    s._p = {(1, 0): 0.25, (0, 1): 0.5}
    x = torch.zeros(2, dtype=torch.float64)
    up = ClientUpdate(1, 30, torch.tensor([1.0, 2.0], dtype=torch.float64), 0, task=0)
    # d_{1,0} = 30/40, p = 0.25: x + 0.5 * 3 * delta
    torch.testing.assert_close(s.aggregate(x, [up], ctx()).vector, torch.tensor([1.5, 3.0], dtype=torch.float64))
    up = ClientUpdate(0, 20, torch.tensor([4.0, 0.0], dtype=torch.float64), 0, task=1)
    torch.testing.assert_close(s.aggregate(x, [up], ctx()).vector, torch.tensor([2.0, 0.0], dtype=torch.float64))
    assert torch.equal(s.aggregate(x, [], ctx()).vector, x)


def test_random_baseline_weights_and_round_robin_rotation() -> None:
    sizes = [[10] * 6, [10] * 6, [10] * 6]
    rnd = mmfl(sizes, sampling="random")
    rng = np.random.default_rng(0)
    pairs = rnd.select(0, [0, 1, 2, 3], 2, rng)
    assert len(pairs) == 2 and all(0 <= t < 3 for _, t in pairs)
    assert all(p == pytest.approx(2 / (4 * 3)) for p in rnd._p.values())  # m / (N_eligible S)
    client, task = pairs[0]
    up = ClientUpdate(client, 10, torch.ones(2, dtype=torch.float64), 0, task=task)
    # d = 1/6, p = 1/6: weight 1
    torch.testing.assert_close(
        rnd.aggregate(torch.zeros(2, dtype=torch.float64), [up], ctx()).vector, torch.ones(2, dtype=torch.float64)
    )

    rr = mmfl(sizes, sampling="round_robin")
    for r in range(4):  # blocks {0,1}, {2,3}, {4,5} take model (block + round) mod 3
        pairs = rr.select(r, list(range(6)), None, rng)
        assert pairs == [(c, (c // 2 + r) % 3) for c in range(6)]
    ups = [ClientUpdate(c, 10, torch.full((2,), float(c), dtype=torch.float64), 0) for c in (1, 3)]
    torch.testing.assert_close(
        rr.aggregate(torch.zeros(2, dtype=torch.float64), ups, ctx()).vector, torch.full((2,), 2.0, dtype=torch.float64)
    )  # the plain mean


# ------------------------------------------------------------- in the engine

DIGITS_TASK = {
    "dataset": {"name": "digits"},
    "model": {"name": "logistic"},
    "local": {"steps": 2, "batch_size": 8, "lr": 0.1},
}


def scenario(
    algorithm: dict, *, tasks: int = 2, devices: int = 2, participants: int | None = 1, rounds: int = 1, **extra
) -> dict:
    data = {
        "name": "mmfl-test",
        "seed": 4,
        "stop": {"rounds": rounds},
        "tasks": [DIGITS_TASK] * tasks,
        "devices": [
            {
                "group": "d",
                "count": devices,
                "compute": {"flops_per_s": 1e9},
                "link": {"uplink": 1e6, "downlink": 1e6, "latency": 0.01},
            }
        ],
        "server": {"algorithm": algorithm, "round": {} if participants is None else {"participants": participants}},
    }
    data.update(extra)
    return data


def run(data: dict):
    sim, learner = build_simulation(scenario_from_dict(data))
    result = sim.run()
    return learner, result, events_frame(result.recorder.columns())


def test_probe_round_timeline_by_hand() -> None:
    """Probe: download both models, train both, upload 2 numbers; then the decision (2 numbers) and one upload."""
    learner, result, ev = run(scenario({"name": "mmfl", "sampling": "optimal"}))
    bytes0, bytes1 = (t.model_bytes for t in learner.tasks)
    assert bytes0 == bytes1 == 4 * (64 * 10 + 10)
    flops = sum(t.job_flops(0, 2) for t in learner.tasks)
    report_sent = (0.01 + 8 * (bytes0 + bytes1) / 1e6) + flops / 1e9 + 8 * 8 / 1e6  # its last bit leaves
    probe_end = report_sent + 0.01  # and arrives
    reports = ev[ev.kind == "upload_end"].groupby("device").sim_time_s.min()
    assert reports.tolist() == pytest.approx([report_sent] * 2, rel=1e-12)
    selected = ev[ev.kind == "selected"]
    assert (selected.detail == "probe").sum() == 2 and selected.task.isna().sum() == 2  # a probe trains no one model
    picked = selected[selected.detail != "probe"]
    assert picked.task.notna().all()
    assert len(picked) <= 2 and picked.device.is_unique  # at most one model per client
    for device in picked.device:
        mine = ev[(ev.device == device) & (ev.sim_time_s >= probe_end)]
        times = dict(zip(mine.kind, mine.sim_time_s))
        assert "train_start" not in times  # the update was trained during the probe
        assert times["download_end"] == pytest.approx(probe_end + 0.01 + 8 * 8 / 1e6, rel=1e-12)
        assert times["upload_end"] == pytest.approx(times["download_end"] + 8 * bytes0 / 1e6, rel=1e-12)
    assert result.updates_received == len(picked)


def test_loss_probe_trains_only_the_assigned_model() -> None:
    learner, result, ev = run(
        scenario({"name": "mmfl", "sampling": "optimal", "norms": "loss"}, devices=3, participants=2, rounds=3)
    )
    trains = ev[ev.kind == "train_start"]
    probe_jobs = set(ev[(ev.kind == "selected") & (ev.detail == "probe")].job)
    for job, device, flops in zip(trains.job, trains.device, trains.flops):
        if job in probe_jobs:  # the probe: forward passes over the local data of both models
            assert flops == pytest.approx(sum(t.loss_flops(device) for t in learner.tasks), rel=1e-5)
        else:  # the one model it was assigned
            assert flops in [pytest.approx(t.job_flops(device, 2), rel=1e-5) for t in learner.tasks]
    per_round = ev[(ev.kind == "selected") & (ev.detail != "probe")].groupby("round").device
    assert all(g.is_unique for _, g in per_round)
    assert result.updates_received > 0


@pytest.mark.parametrize("sampling", ["random", "round_robin"])
def test_baselines_run_without_probe(sampling: str) -> None:
    _, result, ev = run(scenario({"name": "mmfl", "sampling": sampling}, devices=4, participants=2, rounds=3))
    assert not (ev.detail == "probe").any()
    assert result.updates_received == 6
    selected = ev[ev.kind == "selected"]
    assert set(selected.task) <= {0, 1}
    jobs = ev[ev.job.isin(selected.job) & ev.kind.isin(["train_end", "upload_end"])]
    assert jobs.task.notna().all() and (jobs.energy_j >= 0).all()  # every row of a job names its model


def test_scenario_errors_for_multi_model_runs() -> None:
    with pytest.raises(
        ScenarioError, match="trains one model, but the scenario lists 2 tasks; algorithms that train several: mmfl"
    ):
        scenario_from_dict(scenario({"name": "fedavg"}))
    devices = [{"group": "d", "count": 2, "compute": {"flops_per_s": 1e9}, "link": {"uplink": 1e6}}]
    with pytest.raises(ScenarioError, match="use server.mode: sync"):
        scenario_from_dict(
            scenario({"name": "mmfl"}, devices=2)
            | {"server": {"algorithm": {"name": "mmfl"}, "mode": "async"}, "devices": devices}
        )
    with pytest.raises(ScenarioError, match=r"server.algorithm.sampling: 'best' is not accepted"):
        scenario_from_dict(scenario({"name": "mmfl", "sampling": "best"}))


def test_mmfl_end_to_end_from_the_cli(tmp_path: Path) -> None:
    data = scenario(
        {"name": "mmfl", "sampling": "optimal"},
        tasks=3,
        devices=12,
        participants=4,
        rounds=12,
        eval={"every": "4 rounds"},
    )
    data["tasks"] = [
        DIGITS_TASK,
        {**DIGITS_TASK, "dataset": {"name": "digits", "partition": {"kind": "dirichlet", "alpha": 0.5}}},
        {**DIGITS_TASK, "model": {"name": "mlp", "hidden": [16]}},
    ]
    path = tmp_path / "mmfl.yaml"
    path.write_text(yaml.safe_dump(data))
    result = CliRunner().invoke(main, ["simulate", str(path), "--out", str(tmp_path / "out"), "--quiet"])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [t["model"] for t in summary["tasks"]] == ["logistic", "logistic", "mlp"]
    metrics = pd.read_csv(tmp_path / "out" / "metrics.csv")
    assert {"task0_accuracy", "task2_loss", "task1_class_9_accuracy"} <= set(metrics.columns)
    means = metrics[["task0_accuracy", "task1_accuracy", "task2_accuracy"]].mean(axis=1)
    np.testing.assert_allclose(metrics.test_accuracy, means, atol=1e-6)
    assert metrics.test_accuracy.iloc[-1] > metrics.test_accuracy.iloc[0] + 0.2
