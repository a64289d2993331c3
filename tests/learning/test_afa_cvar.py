"""AFA-CD / AFA-CS (Anarchic FL, Yang et al.) and Fed-CVaR-Avg against hand computations; blobs3 and by_label."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from learn_support import F64, ctx, make, task_setup, vec

from netfl.backend import RoundContext
from netfl.config import scenario_from_dict
from netfl.errors import ScenarioError
from netfl.learn.data.datasets import load_dataset
from netfl.learn.data.partition import partition_indices
from netfl.learn.federation.algorithms import ALGORITHMS, ClientInfo, ClientUpdate
from netfl.learn.federation.algorithms.fedcvar import cvar_objective
from netfl.learn.federation.learner import Learner
from netfl.registry.learning_params import LocalSpec
from netfl.rng import RandomStreams


def grad_update(client: int, g: tuple[float, ...], *, steps: int, lr: float, version: int = 0) -> ClientUpdate:
    """The update of a worker whose K SGD steps at lr averaged the gradient g: delta = -K lr g."""
    return ClientUpdate(client, 1, -steps * lr * vec(*g), version, lr, steps)


# ------------------------------------------------------------------ AFA-CD


def test_afa_cd_stale_updates_with_different_k_by_hand() -> None:
    s = make("afa_cd", ClientInfo((1,) * 4, local_lr=0.1), server_lr=2.0)
    x = vec(1.0, 2.0)
    updates = [
        # client 0: 2 steps at 0.1 from version 5, moved by [-0.2, 0.4]  ->  G = -delta/(2*0.1) = [1, -2]
        ClientUpdate(0, 1, vec(-0.2, 0.4), 5, 0.1, 2),
        # client 3: 3 steps at 0.1 from version 2 (stale), moved by [0.3, 0]  ->  G = [-1, 0]
        ClientUpdate(3, 1, vec(0.3, 0.0), 2, 0.1, 3),
    ]
    out = s.aggregate(x, updates, ctx(7, 2)).vector
    # G_t = mean = [0, -1];  x - eta * eta_L * G_t = [1, 2] - 2 * 0.1 * [0, -1] = [1, 2.2]
    torch.testing.assert_close(out, vec(1.0, 2.2), rtol=0, atol=1e-15)
    assert torch.equal(s.aggregate(x, [], ctx(8)).vector, x)


def test_afa_cd_with_eta_k_and_fresh_updates_is_uniform_fedavg() -> None:
    clients = ClientInfo((1,) * 3, local_lr=0.05)
    updates = [ClientUpdate(i, 1, vec(0.1 * i, -0.3 + i), 0, 0.05, 4) for i in range(3)]
    x = vec(0.5, -0.5)
    afa = make("afa_cd", clients, server_lr=4.0).aggregate(x, updates, ctx(0, 3)).vector
    fedavg = make("fedavg", clients, weighting="uniform").aggregate(x, updates, ctx(0, 3)).vector
    torch.testing.assert_close(afa, fedavg, rtol=0, atol=1e-14)


def test_afa_uses_the_round_lr_for_the_server_step() -> None:
    # lr schedule inverse_round: eta_L of round 3 is 0.4/4 = 0.1; the update trained at 0.2 (round 1)
    s = make("afa_cd", ClientInfo((1, 1), 0.4, lr_schedule="inverse_round"), server_lr=1.0)
    out = s.aggregate(vec(0.0), [ClientUpdate(0, 1, vec(-0.4), 1, 0.2, 2)], ctx(3, 1)).vector
    # G = 0.4 / (2 * 0.2) = 1;  x - 1 * 0.1 * 1
    torch.testing.assert_close(out, vec(-0.1), rtol=0, atol=1e-15)


@pytest.mark.parametrize("name", ["afa_cd", "afa_cs"])
def test_afa_needs_the_number_of_local_steps(name: str) -> None:
    s = make(name, ClientInfo((1, 1), 0.1))
    with pytest.raises(ValueError, match="local steps K"):
        s.aggregate(vec(0.0), [ClientUpdate(1, 1, vec(0.1), 0, 0.1)], ctx(0, 1))


# ------------------------------------------------------------------ AFA-CS


def test_afa_cs_memory_over_three_aggregations_by_hand() -> None:
    lr = 0.5
    s = make("afa_cs", ClientInfo((1,) * 3, local_lr=lr), server_lr=1.0)
    x = vec(0.0, 0.0)
    # round 0: worker 0 arrives with G = [2, 0]; memory [[2,0],[0,0],[0,0]] -> mean [2/3, 0]
    x = s.aggregate(x, [grad_update(0, (2.0, 0.0), steps=1, lr=lr)], ctx(0, 1)).vector
    torch.testing.assert_close(x, vec(-lr * 2 / 3, 0.0), rtol=0, atol=1e-15)
    # round 1: worker 1 (K=2) with [0, 3] and worker 0 again (K=4, stale) with [1, 1]
    # memory [[1,1],[0,3],[0,0]] -> mean [1/3, 4/3]
    x = s.aggregate(
        x,
        [grad_update(1, (0.0, 3.0), steps=2, lr=lr), grad_update(0, (1.0, 1.0), steps=4, lr=lr, version=0)],
        ctx(1, 2),
    ).vector
    torch.testing.assert_close(x, vec(-lr * (2 / 3 + 1 / 3), -lr * 4 / 3), rtol=0, atol=1e-14)
    # round 2: worker 2 with [3, -3]; memory [[1,1],[0,3],[3,-3]] -> mean [4/3, 1/3]
    x = s.aggregate(x, [grad_update(2, (3.0, -3.0), steps=3, lr=lr)], ctx(2, 1)).vector
    expect = vec(-lr * (2 / 3 + 1 / 3 + 4 / 3), -lr * (4 / 3 + 1 / 3))
    torch.testing.assert_close(x, expect, rtol=0, atol=1e-14)
    torch.testing.assert_close(
        s.memory, torch.tensor([[1.0, 1.0], [0.0, 3.0], [3.0, -3.0]], dtype=F64), rtol=0, atol=1e-14
    )
    # a round with nothing arrived changes nothing
    assert torch.equal(s.aggregate(x, [], ctx(3)).vector, x)


def test_afa_cs_later_arrival_of_the_same_worker_wins() -> None:
    lr = 0.1
    s = make("afa_cs", ClientInfo((1, 1), lr), server_lr=1.0)
    out = s.aggregate(
        vec(0.0), [grad_update(0, (5.0,), steps=1, lr=lr), grad_update(0, (1.0,), steps=2, lr=lr)], ctx(0, 2)
    ).vector
    torch.testing.assert_close(out, vec(-lr * 0.5), rtol=0, atol=1e-15)  # memory [1, 0]


def test_afa_cs_with_every_worker_fresh_is_afa_cd() -> None:
    clients = ClientInfo((1,) * 3, 0.2)
    updates = [grad_update(i, (1.0 + i, -i), steps=1 + i, lr=0.2) for i in range(3)]
    cs = make("afa_cs", clients, server_lr=3.0).aggregate(vec(1.0, 1.0), updates, ctx(0, 3)).vector
    cd = make("afa_cd", clients, server_lr=3.0).aggregate(vec(1.0, 1.0), updates, ctx(0, 3)).vector
    torch.testing.assert_close(cs, cd, rtol=0, atol=1e-14)


# ------------------------------------------------------------- Fed-CVaR-Avg


@pytest.mark.parametrize("alpha,gamma", [(0.1, 0.1), (0.3, 0.0), (1.0, 0.1), (0.5, 1.0)])
@pytest.mark.parametrize("f_value,t_value", [(0.9, 0.2), (0.2, 0.9)])
def test_cvar_gradients_autograd_vs_formula(alpha: float, gamma: float, f_value: float, t_value: float) -> None:
    theta = torch.tensor([0.7, -1.3], dtype=F64, requires_grad=True)
    t = torch.tensor(t_value, dtype=F64, requires_grad=True)
    direction = vec(0.3, 0.4)
    f = f_value + (theta - theta.detach()) @ direction  # value f_value, gradient `direction`
    g_theta, g_t = torch.autograd.grad(cvar_objective(f, t, alpha, gamma), (theta, t))
    above = float(f_value > t_value)
    assert float(g_t) == pytest.approx((1 - gamma) * (1 - above / alpha), abs=1e-12)
    torch.testing.assert_close(g_theta, ((1 - gamma) / alpha * above + gamma) * direction, rtol=0, atol=1e-12)
    value = (1 - gamma) * t_value + (1 - gamma) / alpha * max(f_value - t_value, 0.0) + gamma * f_value
    assert float(cvar_objective(torch.tensor(f_value), torch.tensor(t_value), alpha, gamma)) == pytest.approx(value)


def test_fed_cvar_server_adopts_one_update_and_averages_several() -> None:
    s = make("fed_cvar", ClientInfo((1,) * 3, 0.1))
    x = vec(1.0, 2.0, 0.0)  # (theta, t)
    one = s.aggregate(x, [ClientUpdate(2, 1, vec(0.5, -1.0, 0.25), 0, 0.1, 5)], ctx(0, 1)).vector
    assert one.tolist() == [1.5, 1.0, 0.25]  # the relayed user's result
    two = s.aggregate(
        x, [ClientUpdate(0, 1, vec(1.0, 0.0, 1.0), 0), ClientUpdate(1, 9, vec(0.0, 2.0, 0.0), 0)], ctx(1, 2)
    ).vector
    assert two.tolist() == [1.5, 3.0, 0.5]  # plain mean, not weighted by samples
    assert torch.equal(s.aggregate(x, [], ctx(2)).vector, x)


def test_fed_cvar_params_and_t_lr_schedule() -> None:
    s = make("fed_cvar", ClientInfo((1,), 0.2), alpha=0.5, gamma=0.0, t_lr=0.01)
    assert len(s.extras) == 1 and s.extras.lr(0.2) == pytest.approx(0.01) and s.extras.lr(0.1) == pytest.approx(0.005)
    assert make("fed_cvar", ClientInfo((1,), 0.2)).extras.lr(0.05) == 0.05  # t_lr omitted: the task lr
    assert torch.equal(s.extras.initial, torch.zeros(1))


def _blobs_learner(strategy, parts, *, lr: float = 0.05, steps: int = 6) -> Learner:
    return Learner(
        [
            task_setup(
                load_dataset("blobs3", seed=3),
                parts,
                "mlp",
                [16],
                LocalSpec(steps=steps, batch_size=20, lr=lr),
            )
        ],
        strategy=strategy,
        streams=RandomStreams(5),
    )


def _run_relay_rounds(learner: Learner, picks: list[int]) -> list[torch.Tensor]:
    """Each round: every user starts a job, the relay passes user picks[r]; the model after each round."""
    out = []
    for r, user in enumerate(picks):
        jobs = [learner.submit(c, r).job for c in range(3)]
        for c, job in enumerate(jobs):
            if c != user:
                learner.cancel(job)
        learner.aggregate(RoundContext(r, float(r), (0, 1, 2), (0, 1, 2), (jobs[user],)))
        out.append(learner.global_vector.clone())
    return out


def test_fed_cvar_with_alpha_one_is_fedavg_on_the_same_jobs() -> None:
    labels = load_dataset("blobs3", seed=3).train_y.numpy()
    parts = partition_indices(labels, 3, "by_label", np.random.default_rng(0))
    clients = ClientInfo(tuple(len(p) for p in parts), 0.05)
    picks = [0, 1, 0, 2, 1, 0, 0, 1]
    cvar = _blobs_learner(make("fed_cvar", clients, alpha=1.0, gamma=0.1, t_lr=0.3), parts)
    fedavg = _blobs_learner(make("fedavg", clients, weighting="uniform"), parts)
    assert len(cvar.global_vector) == len(fedavg.global_vector) + 1
    assert torch.equal(cvar.model_vector, fedavg.global_vector)  # same initial theta
    for a, b in zip(_run_relay_rounds(cvar, picks), _run_relay_rounds(fedavg, picks)):
        torch.testing.assert_close(a[:-1], b, rtol=1e-5, atol=1e-6)
        assert float(a[-1]) == 0.0  # d/dt = (1-gamma)(1 - 1{f > t}) = 0 while f > t = 0
    assert cvar.evaluate().accuracy == pytest.approx(fedavg.evaluate().accuracy, abs=1e-6)  # theta only

    # a real CVaR level moves t up (d/dt = (1-gamma)(1 - 1/alpha) < 0 while f > t) and theta elsewhere
    risky = _blobs_learner(make("fed_cvar", clients, alpha=0.2, gamma=0.1, t_lr=0.3), parts)
    last = _run_relay_rounds(risky, picks)[-1]
    assert float(last[-1]) > 0.0
    assert not torch.allclose(last[:-1], fedavg.global_vector, atol=1e-3)


def test_fed_cvar_t_steps_by_hand_in_the_learner() -> None:
    # one step: f > t = 0, so t <- 0 - t_lr * (1 - gamma)(1 - 1/alpha) = 0.3 * 0.9 * 4 = 1.08
    labels = load_dataset("blobs3", seed=3).train_y.numpy()
    parts = partition_indices(labels, 3, "by_label", np.random.default_rng(0))
    clients = ClientInfo(tuple(len(p) for p in parts), 0.05)
    learner = _blobs_learner(make("fed_cvar", clients, alpha=0.2, gamma=0.1, t_lr=0.3), parts, steps=1)
    (after,) = _run_relay_rounds(learner, [1])
    assert float(after[-1]) == pytest.approx(1.08, rel=1e-6)


def test_learner_reports_steps_and_keeps_the_plain_vector_for_other_strategies() -> None:
    seen: list[ClientUpdate] = []

    class Recorder(ALGORITHMS["afa_cd"]):
        def aggregate(self, x, updates, context):
            seen.extend(updates)
            return super().aggregate(x, updates, context)

    labels = load_dataset("blobs3", seed=3).train_y.numpy()
    parts = partition_indices(labels, 3, "by_label", np.random.default_rng(0))
    strategy = Recorder(Recorder.Params(), ClientInfo(tuple(len(p) for p in parts), 0.05))
    learner = _blobs_learner(strategy, parts)
    assert learner.extra == 0 and learner.global_vector.numel() == learner.layout.size
    assert learner.model_vector is learner.global_vector and learner.extra_vector.numel() == 0
    jobs = (learner.submit(0, 0, steps=7).job, learner.submit(2, 0).job)
    learner.aggregate(RoundContext(0, 0.0, (0, 2), (0, 2), jobs))
    assert [(u.client, u.steps, u.lr) for u in seen] == [(0, 7, 0.05), (2, 6, 0.05)]


# ---------------------------------------------------------- blobs3, by_label


def test_blobs3_dataset() -> None:
    d = load_dataset("blobs3", seed=0)
    assert d.input_shape == (1, 1, 2) and d.num_classes == 3
    assert len(d.train_y) == 2400 and len(d.test_y) == 600
    assert np.bincount(d.test_y.numpy()).tolist() == [200, 200, 200]
    means = [d.train_x[d.train_y == c].reshape(-1, 2).mean(0).tolist() for c in range(3)]
    np.testing.assert_allclose(means, [[1, 1], [2, 3], [2.3, 1.5]], atol=0.02)
    again = load_dataset("blobs3", seed=0)
    assert torch.equal(d.train_x, again.train_x)
    assert not torch.equal(load_dataset("blobs3", seed=1).train_y, d.train_y)  # the split follows the seed


def test_by_label_partition() -> None:
    labels = np.repeat(np.arange(3), 10)
    parts = partition_indices(labels, 3, "by_label", np.random.default_rng(0))
    assert [sorted(set(labels[p])) for p in parts] == [[0], [1], [2]]
    assert [len(p) for p in parts] == [10, 10, 10]
    six = partition_indices(labels, 6, "by_label", np.random.default_rng(0))
    assert [labels[p][0] for p in six] == [0, 1, 2, 0, 1, 2] and [len(p) for p in six] == [5] * 6
    assert len(np.unique(np.concatenate(six))) == 30
    two = partition_indices(labels, 2, "by_label", np.random.default_rng(0))
    assert [sorted(set(labels[p])) for p in two] == [[0], [1]]  # label 2 held by nobody


# ---------------------------------------------------------------- scenarios


def _scenario(algorithm: dict, *, mode: str = "sync", relay: bool = False) -> dict:
    data = {
        "name": "t",
        "seed": 1,
        "stop": {"rounds": 4},
        "task": {
            "dataset": {"name": "blobs3", "partition": {"kind": "by_label"}},
            "model": {"name": "mlp", "hidden": [8]},
            "local": {"steps": 3, "batch_size": 20, "lr": 0.05},
        },
        "devices": [
            {
                "group": "users",
                "count": 3,
                "compute": {"flops_per_s": 1e9},
                "link": {"uplink": "5Mbps", "latency": "5ms"},
            }
        ],
        "server": {"algorithm": algorithm, "mode": mode},
        "eval": {"every": "2 rounds"},
    }
    if relay:
        data["network"] = {
            "nodes": {"relay": {"kind": "relay", "ram": {"mode": "abstract", "rho": [0.5, 0.4, 0.1]}}},
            "links": [{"from": "relay", "to": "server", "rate": "100Mbps"}],
        }
        data["devices"][0]["link"]["to"] = "relay"
    if mode == "async":
        data["server"]["async"] = {"buffer": 2, "local_steps": {"uniform": [1, 4]}}
    return data


@pytest.mark.parametrize(
    "spec,path",
    [
        ({"name": "fed_cvar", "alpha": 0}, "server.algorithm.alpha"),
        ({"name": "fed_cvar", "alpha": 1.5}, "server.algorithm.alpha"),
        ({"name": "fed_cvar", "gamma": -0.1}, "server.algorithm.gamma"),
        ({"name": "fed_cvar", "gamma": 1.01}, "server.algorithm.gamma"),
        ({"name": "fed_cvar", "t_lr": 0}, "server.algorithm.t_lr"),
        ({"name": "afa_cs", "server_lr": -1}, "server.algorithm.server_lr"),
        ({"name": "afa_cd", "beta": 0.9}, "server.algorithm.beta"),
    ],
)
def test_bad_parameters_are_named_with_their_yaml_path(spec: dict, path: str) -> None:
    with pytest.raises(ScenarioError) as info:
        scenario_from_dict(_scenario(spec))
    assert path in [p for p, _ in info.value.problems]


@pytest.mark.parametrize("name", ["afa_cd", "afa_cs"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_afa_accepts_both_server_modes(name: str, mode: str) -> None:
    scenario = scenario_from_dict(_scenario({"name": name}, mode=mode))
    assert (scenario.server.mode, scenario.server.algorithm.name) == (mode, name)


def test_fed_cvar_and_afa_run_end_to_end() -> None:
    from netfl.assemble import build_simulation

    runs = [
        _scenario({"name": "fed_cvar", "alpha": 0.1, "gamma": 0.1, "t_lr": 0.05}, relay=True),
        _scenario({"name": "afa_cs", "server_lr": 2.0}, mode="async"),
        _scenario({"name": "afa_cd"}, mode="async"),
    ]
    for data in runs:
        sim, _ = build_simulation(scenario_from_dict(copy.deepcopy(data)))
        result = sim.run()
        assert result.rounds == 4 and len(result.metrics) >= 3
        assert all(len(m.per_class_accuracy) == 3 for m in result.metrics)
    # behind the relay each round applies exactly one update, and t moved away from 0
    sim, _ = build_simulation(scenario_from_dict(copy.deepcopy(runs[0])))
    result = sim.run()
    assert result.updates_applied == 4 and result.relays["relay"]["passed"] == 4
    assert float(sim.backend.extra_vector[0]) > 0


def test_mlp_softmax_outputs_probabilities() -> None:
    from netfl.learn.models.builtin import build_model

    model = build_model("mlp_softmax", (1, 1, 2), 3, hidden=(8,))
    out = model(torch.randn(5, 1, 1, 2))
    torch.testing.assert_close(out.sum(dim=1), torch.ones(5))
    assert (out >= 0).all()


@pytest.mark.parametrize("name", ["cvar-blobs", "afa-noniid"])
def test_shipped_topologies_for_the_reproductions_run(name: str) -> None:
    from pathlib import Path

    import yaml

    from netfl.assemble import build_simulation

    path = Path(__file__).resolve().parents[2] / "topologies" / f"{name}.yaml"
    data = yaml.safe_load(path.read_text())
    data["stop"] = {"rounds": 3}
    data["eval"] = {"every": "1 round"}
    sim, _ = build_simulation(scenario_from_dict(data, source=str(path), base_dir=path.parent))
    result = sim.run()
    assert result.rounds == 3 and len(result.metrics) == 4
