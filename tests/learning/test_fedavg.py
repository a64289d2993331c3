"""FedAvg aggregation, local SGD and the learner's order independence, against hand computations."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from learn_support import path_of, task_setup
from torch import nn

from netfl.backend import RoundContext
from netfl.config.schema import AlgorithmSpec
from netfl.learn.data.datasets import Dataset
from netfl.learn.federation.algorithms import ClientInfo, ClientUpdate, build_strategy
from netfl.learn.federation.algorithms.fedavg import FedAvg
from netfl.learn.federation.learner import Learner
from netfl.learn.models.builtin import build_model
from netfl.learn.models.flat_model import Network
from netfl.learn.models.params import ParamLayout
from netfl.learn.training.reference import minibatch_indices, num_local_steps, train_one
from netfl.registry.learning_params import LocalSpec
from netfl.rng import RandomStreams

CTX = RoundContext(round_index=0, sim_time_s=0.0, available=(0, 1), selected=(0, 1), delivered=(0, 1))

X = torch.tensor([1.0, 2.0, 3.0])
UPDATES = [
    ClientUpdate(client=0, num_samples=1, delta=torch.tensor([1.0, 0.0, -1.0]), start_version=0),
    ClientUpdate(client=1, num_samples=3, delta=torch.tensor([0.0, 2.0, 2.0]), start_version=0),
]


def fedavg(**params) -> FedAvg:
    return FedAvg(FedAvg.Params(**params), ClientInfo((1, 3), local_lr=0.1))


# ------------------------------------------------------------------- FedAvg


def test_fedavg_samples_weighting() -> None:
    # weights 1/4, 3/4: 0.25*[1,0,-1] + 0.75*[0,2,2] = [0.25, 1.5, 1.25]
    out = fedavg().aggregate(X, UPDATES, CTX).vector
    assert torch.equal(out, torch.tensor([1.25, 3.5, 4.25]))


def test_fedavg_uniform_weighting() -> None:
    # weights 1/2, 1/2: [0.5, 1, 0.5]
    out = fedavg(weighting="uniform").aggregate(X, UPDATES, CTX).vector
    assert torch.equal(out, torch.tensor([1.5, 3.0, 3.5]))


@pytest.mark.parametrize("weighting,avg", [("samples", [0.25, 1.5, 1.25]), ("uniform", [0.5, 1.0, 0.5])])
def test_fedavg_server_learning_rate(weighting: str, avg: list[float]) -> None:
    eta = 0.5
    out = fedavg(server_lr=eta, weighting=weighting).aggregate(X, UPDATES, CTX).vector
    assert torch.equal(out, X + eta * torch.tensor(avg))
    out = fedavg(server_lr=2.0, weighting=weighting).aggregate(X, UPDATES, CTX).vector
    assert torch.equal(out, X + 2.0 * torch.tensor(avg))


def test_fedavg_three_clients_float64() -> None:
    x = torch.tensor([0.5, -1.0], dtype=torch.float64)
    deltas = [
        torch.tensor([0.3, 0.1], dtype=torch.float64),
        torch.tensor([-0.6, 0.9], dtype=torch.float64),
        torch.tensor([1.2, -0.3], dtype=torch.float64),
    ]
    sizes = [2, 5, 13]
    updates = [ClientUpdate(i, n, d, 0) for i, (n, d) in enumerate(zip(sizes, deltas))]
    out = FedAvg(FedAvg.Params(server_lr=0.7), ClientInfo(tuple(sizes), local_lr=0.1)).aggregate(x, updates, CTX).vector
    total = sum(sizes)
    expected = [x[j].item() + 0.7 * sum(n / total * d[j].item() for n, d in zip(sizes, deltas)) for j in range(2)]
    assert out.tolist() == pytest.approx(expected, rel=1e-12)
    assert out.dtype == torch.float64


@pytest.mark.parametrize("weighting", ["samples", "uniform"])
def test_fedavg_without_updates_keeps_the_model(weighting: str) -> None:
    out = fedavg(server_lr=0.5, weighting=weighting).aggregate(X, [], CTX).vector
    assert torch.equal(out, X)


def test_build_strategy_from_spec() -> None:
    spec = AlgorithmSpec(name="fedavg", server_lr=0.25, weighting="uniform")
    strategy = build_strategy(spec.name, spec.params, ClientInfo((4, 4), local_lr=0.1))
    assert isinstance(strategy, FedAvg)
    assert strategy.params.server_lr == 0.25 and strategy.params.weighting == "uniform"


# ------------------------------------------------------------ local training


@pytest.mark.parametrize("n,b", [(10, 5), (10, 3), (7, 7), (5, 16), (13, 4)])
def test_minibatches_cover_each_sample_once_per_epoch(n: int, b: int) -> None:
    g = torch.Generator().manual_seed(3)
    epochs = 4
    size = min(b, n)
    steps = epochs * n // size + 1
    batches = minibatch_indices(n, b, steps, g)
    assert len(batches) == steps
    assert all(len(x) == size for x in batches)  # every step costs the same
    stream = batches.reshape(-1).tolist()
    for e in range(epochs):  # each run of n consecutive draws is one pass over the data
        assert sorted(stream[e * n : (e + 1) * n]) == list(range(n))
    # one epoch's worth of steps sees every sample
    one_epoch = minibatch_indices(n, b, num_local_steps(n, b, None, 1.0), torch.Generator().manual_seed(4))
    assert set(one_epoch.reshape(-1).tolist()) == set(range(n))


def test_minibatches_depend_only_on_the_generator() -> None:
    a = minibatch_indices(20, 6, 9, torch.Generator().manual_seed(11))
    b = minibatch_indices(20, 6, 9, torch.Generator().manual_seed(11))
    c = minibatch_indices(20, 6, 9, torch.Generator().manual_seed(12))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not all(torch.equal(x, y) for x, y in zip(a, c))


@pytest.mark.parametrize(
    "n,b,steps,epochs,want",
    [
        (10, 3, 7, None, 7),
        (10, 3, None, 1.0, 4),  # ceil(10/3)
        (32, 16, None, 1.0, 2),
        (10, 4, None, 2.5, 7),  # ceil(6.25)
        (100, 10, None, 0.001, 1),  # at least one step
    ],
)
def test_num_local_steps(n: int, b: int, steps: int | None, epochs: float | None, want: int) -> None:
    assert num_local_steps(n, b, steps, epochs) == want


def _logistic_problem(seed: int = 0):
    torch.manual_seed(seed)
    model = build_model("logistic", (1, 2, 2), 3)
    layout = ParamLayout.of(model)
    start = torch.randn(layout.size)
    x = torch.rand(6, 1, 2, 2)
    y = torch.tensor([0, 1, 2, 1, 0, 2])
    return model, layout, start, x, y


def test_a_job_with_zero_lr_returns_the_start() -> None:
    model, layout, start, x, y = _logistic_problem()
    minibatches = minibatch_indices(len(x), 4, 5, torch.Generator().manual_seed(0))
    out, _ = train_one(Network(model), start, x, y, minibatches, lr=0.0, weight_decay=0.0)
    assert torch.equal(out, start)
    assert out is not start  # a new tensor: the snapshot is never modified in place


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_one_local_step_is_a_gradient_step(weight_decay: float) -> None:
    model, layout, start, x, y = _logistic_problem(1)
    lr, b = 0.3, 4
    before = start.clone()
    minibatches = minibatch_indices(len(x), b, 1, torch.Generator().manual_seed(5))
    out, _ = train_one(Network(model), start, x, y, minibatches, lr=lr, weight_decay=weight_decay)
    assert torch.equal(start, before)

    # the same minibatch, by hand with a plain nn.Linear and autograd
    (idx,) = minibatch_indices(len(x), b, 1, torch.Generator().manual_seed(5))
    linear = nn.Linear(4, 3)
    with torch.no_grad():
        linear.weight.copy_(start[:12].view(3, 4))
        linear.bias.copy_(start[12:])
    loss = nn.functional.cross_entropy(linear(x[idx].reshape(b, 4)), y[idx])
    loss.backward()
    with torch.no_grad():
        w = linear.weight - lr * (linear.weight.grad + weight_decay * linear.weight)
        bias = linear.bias - lr * (linear.bias.grad + weight_decay * linear.bias)
    expected = torch.cat([w.reshape(-1), bias])
    torch.testing.assert_close(out, expected, rtol=1e-6, atol=1e-7)
    assert not torch.allclose(out, start)


# ------------------------------------------------------------------ learner


def _dataset(side: int = 2) -> Dataset:
    g = torch.Generator().manual_seed(0)
    train_x = torch.rand(48, 1, side, side, generator=g)
    train_y = torch.arange(48) % 3
    test_x = torch.rand(12, 1, side, side, generator=g)
    test_y = torch.arange(12) % 3
    return Dataset("toy", train_x, train_y, test_x, test_y, 3, (1, side, side))


def _learner(
    weighting: str,
    parts: list[np.ndarray],
    *,
    model: str = "logistic",
    batched: bool = True,
    weight_decay: float = 0.0,
    epochs: float | None = None,
) -> Learner:
    strategy = FedAvg(FedAvg.Params(weighting=weighting), ClientInfo(tuple(len(p) for p in parts), local_lr=0.1))
    local = LocalSpec(steps=None if epochs else 3, epochs=epochs, batch_size=4, lr=0.2, weight_decay=weight_decay)
    return Learner(
        [task_setup(_dataset(8 if model == "lenet5" else 2), parts, model, [8], local)],
        strategy=strategy,
        streams=RandomStreams(9),
        training_path=path_of(batched),
    )


def _context(r: int, delivered: tuple[int, ...]) -> RoundContext:
    return RoundContext(
        round_index=r, sim_time_s=float(r), available=(0, 1, 2), selected=(0, 1, 2), delivered=delivered
    )


def test_learner_result_does_not_depend_on_delivery_order() -> None:
    parts = [np.arange(0, 16), np.arange(16, 32), np.arange(32, 48)]
    a, b = _learner("uniform", parts), _learner("uniform", parts)
    start = a.global_vector.clone()
    assert torch.equal(start, b.global_vector)  # same seed, same start
    for r in range(2):
        jobs_a = [a.submit(c, r).job for c in (0, 1)]
        jobs_b = [b.submit(c, r).job for c in (0, 1)]
        assert jobs_a == jobs_b
        # two updates at weight 1/2 each: the sum is exact in either order
        assert a.aggregate(_context(r, tuple(jobs_a))) == 2
        assert b.aggregate(_context(r, tuple(reversed(jobs_b)))) == 2
        assert torch.equal(a.global_vector, b.global_vector)
    assert not torch.equal(a.global_vector, start)


def test_learner_jobs_are_independent_of_each_other() -> None:
    # three clients, sample weighting: order changes only the float rounding of the sum
    parts = [np.arange(0, 10), np.arange(10, 30), np.arange(30, 48)]
    a, b = _learner("samples", parts), _learner("samples", parts)
    jobs_a = [a.submit(c, 0).job for c in range(3)]
    jobs_b = [b.submit(c, 0).job for c in range(3)]
    a.aggregate(_context(0, (jobs_a[0], jobs_a[1], jobs_a[2])))
    b.aggregate(_context(0, (jobs_b[2], jobs_b[0], jobs_b[1])))
    torch.testing.assert_close(a.global_vector, b.global_vector, rtol=1e-6, atol=1e-7)

    # a cancelled job changes nothing for the others: jobs are trained from their own seeds
    c, d = _learner("samples", parts), _learner("samples", parts)
    jobs_c = [c.submit(k, 0).job for k in range(3)]
    jobs_d = [d.submit(k, 0).job for k in range(3)]
    c.cancel(jobs_c[1])
    c.aggregate(_context(0, (jobs_c[0], jobs_c[2])))
    d.cancel(jobs_d[1])
    d.aggregate(_context(0, (jobs_d[2], jobs_d[0])))
    torch.testing.assert_close(c.global_vector, d.global_vector, rtol=1e-6, atol=1e-7)
    assert not torch.allclose(c.global_vector, a.global_vector)


@pytest.mark.parametrize("model,epochs", [("logistic", None), ("mlp", None), ("lenet5", None), ("mlp", 1.0)])
def test_batched_training_equals_one_job_at_a_time(model: str, epochs: float | None) -> None:
    """Jobs trained together (stacked) give what each trained alone gives, up to rounding.

    3 steps each: clients 0-2 (batch 4) train together, client 3 (3 samples, batch 3) alone. One epoch:
    steps 4, 5, 3 and 1 -- clients 0, 1 and 2 (batch 4) train together with 4, 5 and 3 steps.
    """
    parts = [np.arange(0, 16), np.arange(16, 36), np.arange(36, 45), np.arange(45, 48)]
    together = _learner("samples", parts, model=model, weight_decay=1e-3, epochs=epochs)
    alone = _learner("samples", parts, model=model, weight_decay=1e-3, batched=False, epochs=epochs)
    for r in range(3):
        jobs = [learner.submit(c, r).job for learner in (together, alone) for c in range(4)]
        together.aggregate(_context(r, tuple(jobs[:4])))
        alone.aggregate(_context(r, tuple(jobs[4:])))
        torch.testing.assert_close(together.global_vector, alone.global_vector, rtol=1e-5, atol=1e-6)
    assert not torch.equal(together.global_vector, _learner("samples", parts, model=model).tasks[0].snapshots[0][0])


def test_learner_with_no_delivered_jobs_keeps_the_model() -> None:
    parts = [np.arange(0, 24), np.arange(24, 48)]
    learner = _learner("samples", parts)
    before = learner.global_vector.clone()
    job = learner.submit(0, 0).job
    learner.cancel(job)
    assert learner.aggregate(_context(0, ())) == 0
    assert torch.equal(learner.global_vector, before)
    assert learner.version == 1
