"""FedProx (Li et al., Federated Optimization in Heterogeneous Networks): local steps by hand, mu = 0 is FedAvg."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from learn_support import job_minibatches, linear_ce_gradient, path_of, task_setup
from pydantic import ValidationError

from netfl.backend import RoundContext
from netfl.learn.data.datasets import Dataset
from netfl.learn.federation.algorithms import ALGORITHMS, ClientInfo
from netfl.learn.federation.learner import Learner
from netfl.registry.learning_params import LocalSpec
from netfl.rng import RandomStreams

F64 = torch.float64
SEED, LR, STEPS, BATCH = 9, 0.2, 3, 4
PARTS = [np.arange(0, 16), np.arange(16, 32), np.arange(32, 48)]


def _dataset(side: int = 2) -> Dataset:
    g = torch.Generator().manual_seed(0)
    return Dataset(
        "toy",
        torch.rand(48, 1, side, side, generator=g),
        torch.arange(48) % 3,
        torch.rand(12, 1, side, side, generator=g),
        torch.arange(12) % 3,
        3,
        (1, side, side),
    )


def _strategy(name: str, **params):
    cls = ALGORITHMS[name]
    return cls(cls.Params(**params), ClientInfo(tuple(len(p) for p in PARTS), local_lr=LR))


def _learner(strategy, *, model: str = "logistic", batched: bool = True) -> Learner:
    local = LocalSpec(steps=STEPS, batch_size=BATCH, lr=LR)
    return Learner(
        [task_setup(_dataset(8 if model == "lenet5" else 2), PARTS, model, [8], local)],
        strategy=strategy,
        streams=RandomStreams(SEED),
        training_path=path_of(batched),
    )


def _round(learner: Learner, r: int, clients=(0, 1, 2)) -> None:
    jobs = tuple(learner.submit(c, r).job for c in clients)
    learner.aggregate(RoundContext(r, float(r), clients, clients, jobs))


class Seen(ALGORITHMS["fedprox"]):
    """FedProx that keeps the updates it aggregated."""

    def __init__(self, params, clients):
        super().__init__(params, clients)
        self.updates = []

    def aggregate(self, x, updates, context):
        self.updates.extend(updates)
        return super().aggregate(x, updates, context)


@pytest.mark.parametrize("batched", [True, False])  # True: clients 0 and 1 train together in the fused kernel
def test_fedprox_local_steps_by_hand(batched: bool) -> None:
    """Each step w <- w - lr (grad f_B(w) + mu (w - w0)); the server then averages by samples, as FedAvg."""
    mu = 0.5
    strategy = Seen(Seen.Params(mu=mu), ClientInfo(tuple(len(p) for p in PARTS), local_lr=LR))
    learner = _learner(strategy, batched=batched)
    w0 = learner.global_vector.clone()
    task = learner.tasks[0]
    flat_x = task.dataset.train_x.reshape(48, -1).to(F64)
    jobs = [learner.submit(c, 0).job for c in (0, 1)]
    learner.aggregate(RoundContext(0, 0.0, (0, 1), (0, 1), tuple(jobs)))

    expected = []
    for client, job in zip((0, 1), jobs):
        w = w0.to(F64)
        for idx in job_minibatches(SEED, client, job, task.part(client), BATCH, STEPS):
            w = w - LR * (linear_ce_gradient(w, flat_x[idx], task.dataset.train_y[idx], 3) + mu * (w - w0.to(F64)))
        expected.append(w - w0.to(F64))
    for update, delta in zip(strategy.updates, expected):
        torch.testing.assert_close(update.delta.to(F64), delta, rtol=1e-5, atol=1e-6)
    # FedAvg's rule on the server: equal sample counts, so x1 = x0 + (delta_0 + delta_1) / 2
    torch.testing.assert_close(
        learner.global_vector.to(F64), w0.to(F64) + (expected[0] + expected[1]) / 2, rtol=1e-5, atol=1e-6
    )
    # and the proximal term mattered: plain SGD on the same batches ends elsewhere
    fedavg = _learner(_strategy("fedavg"), batched=batched)
    _round(fedavg, 0, (0, 1))
    assert (fedavg.global_vector - learner.global_vector).abs().max() > 1e-3


@pytest.mark.parametrize("model", ["logistic", "mlp", "lenet5"])
def test_fedprox_with_mu_zero_is_fedavg_bit_for_bit(model: str) -> None:
    prox, avg = _learner(_strategy("fedprox", mu=0.0), model=model), _learner(_strategy("fedavg"), model=model)
    assert prox.strategy.correction(0, 0) is None
    for r in range(3):
        _round(prox, r)
        _round(avg, r)
        assert torch.equal(prox.global_vector, avg.global_vector)


@pytest.mark.parametrize("model", ["logistic", "mlp", "lenet5"])  # fused, fused, functional kernel
def test_fedprox_stacked_kernels_apply_the_proximal_term(model: str) -> None:
    """Clients trained together (stacked) end where each trained alone ends, and not where FedAvg's do."""
    together = _learner(_strategy("fedprox", mu=2.0), model=model)
    alone = _learner(_strategy("fedprox", mu=2.0), model=model, batched=False)
    avg = _learner(_strategy("fedavg"), model=model)
    for r in range(2):
        for learner in (together, alone, avg):
            _round(learner, r)
        torch.testing.assert_close(together.global_vector, alone.global_vector, rtol=1e-5, atol=1e-6)
    assert (together.global_vector - avg.global_vector).abs().max() > 1e-3


def test_fedprox_params() -> None:
    s = _strategy("fedprox")
    assert s.params.mu == 0.01 and s.params.weighting == "samples" and s.params.server_lr == 1.0
    assert s.correction(3, 0).pull == 0.01 and s.correction(3, 0).shift is None
    with pytest.raises(ValidationError):
        ALGORITHMS["fedprox"].Params(mu=-0.1)
