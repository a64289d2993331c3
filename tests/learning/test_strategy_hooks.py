"""A strategy's client-side hooks, applied by the learner and the kernels without knowing the algorithm.

Gradient corrections (one job at a time, the fused MLP kernel and the
functional kernel), probes of a new kind, and the bytes a strategy adds to
what travels; checked against hand computations or the one-by-one path.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from learn_support import linear_ce_gradient, path_of, task_setup

from netfl.backend import BYTES_PER_VALUE, RoundContext
from netfl.learn.data.datasets import Dataset
from netfl.learn.federation.algorithms import ALGORITHMS, ClientInfo
from netfl.learn.federation.learner import Learner
from netfl.learn.federation.probes import Probe
from netfl.learn.models.builtin import build_model
from netfl.learn.models.flat_model import Network
from netfl.learn.training.objective import Correction
from netfl.learn.training.reference import minibatch_indices, train_one
from netfl.learn.training.trainer import Trainer, TrainJob
from netfl.registry.learning_params import LocalSpec
from netfl.rng import RandomStreams

F64 = torch.float64


def _data(shape: tuple[int, ...], n: int = 40, classes: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(4)
    return torch.rand(n, *shape, generator=g), torch.randint(0, classes, (n,), generator=g)


def test_one_job_adds_the_correction_to_each_gradient_by_hand() -> None:
    """train_one: w <- w - lr (grad + wd w + pull (w - w0) + shift), three steps of a linear model in float64."""
    shape, classes, lr, wd, pull, steps, batch = (1, 2, 2), 3, 0.4, 0.01, 0.5, 3, 5
    x, y = _data(shape, classes=classes)
    torch.manual_seed(0)
    network = Network(build_model("logistic", shape, classes))
    start = network.initial_params()
    shift = torch.linspace(-0.3, 0.3, start.numel())

    def run(correction):
        minibatches = minibatch_indices(len(x), batch, steps, torch.Generator().manual_seed(1))
        return train_one(network, start, x, y, minibatches, lr=lr, weight_decay=wd, correction=correction)[0]

    out = run(Correction(pull, shift))
    w0, w, flat = start.to(F64), start.to(F64), x.reshape(len(x), -1).to(F64)
    for idx in minibatch_indices(len(x), batch, steps, torch.Generator().manual_seed(1)):
        g = linear_ce_gradient(w, flat[idx], y[idx], classes)
        w = w - lr * (g + wd * w + pull * (w - w0) + shift.to(F64))
    torch.testing.assert_close(out, w.float(), rtol=1e-5, atol=1e-6)
    assert (out - run(None)).abs().max() > 0.05  # the correction moved it


def _trainer(name: str, path: str, shape=(1, 8, 8), n: int = 50, classes: int = 4, seed: int = 2):
    x, y = _data(shape, n=n, classes=classes)
    torch.manual_seed(seed)
    network = Network(build_model(name, shape, classes, hidden=(12,)))
    return Trainer(network, x, y, device=torch.device("cpu"), path=path), network, x


def _jobs(x, steps, batch, corrections, seed0=10):
    return [
        TrainJob(minibatch_indices(len(x), batch, s, torch.Generator().manual_seed(seed0 + j)), seed=j, correction=c)
        for j, (s, c) in enumerate(zip(steps, corrections))
    ]


@pytest.mark.parametrize("name,path", [("logistic", "fused"), ("mlp", "fused"), ("lenet5", "replicas"),
                                       ("lenet5", "stacked"), ("mlp", "replicas")])  # fmt: skip
@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_every_path_applies_each_jobs_correction(name, path, weight_decay) -> None:
    """Fused, replicated and stacked training against train_one with the same correction, job by job."""
    trainer, network, x = _trainer(name, path)
    start = network.initial_params()
    g = torch.Generator().manual_seed(3)
    corrections = [
        Correction(0.7, 0.5 * torch.randn(start.numel(), generator=g)),
        Correction(0.7),
        Correction(0.7, 0.5 * torch.randn(start.numel(), generator=g)),
    ]
    steps = [4, 2, 6]
    together = trainer.train(start, _jobs(x, steps, 6, corrections), lr=0.2, weight_decay=weight_decay)
    plain = trainer.train(start, _jobs(x, steps, 6, [None] * 3), lr=0.2, weight_decay=weight_decay)
    for j, s in enumerate(steps):
        minibatches = minibatch_indices(len(x), 6, s, torch.Generator().manual_seed(10 + j))
        alone, _ = train_one(
            network, start, trainer.x, trainer.y, minibatches, lr=0.2, weight_decay=weight_decay,
            correction=corrections[j],
        )  # fmt: skip
        torch.testing.assert_close(together[j][0], alone, rtol=1e-5, atol=1e-6)
        assert (together[j][0] - plain[j][0]).abs().max() > 1e-3


@pytest.mark.parametrize("name,path", [("mlp", "fused"), ("lenet5", "replicas"), ("lenet5", "stacked")])
def test_a_shift_alone_moves_one_step_by_minus_lr_times_it(name, path) -> None:
    """One step: w1 = w0 - lr (g + b), so corrected minus plain is -lr b exactly (up to rounding), any model."""
    trainer, network, x = _trainer(name, path, n=30, seed=5)
    start = network.initial_params()
    b = torch.randn(start.numel(), generator=torch.Generator().manual_seed(6))
    jobs = _jobs(x, [1, 1], 5, [Correction(shift=b), None], seed0=7)
    jobs[1].minibatches = jobs[0].minibatches
    (corrected, _), (plain, _) = trainer.train(start, jobs, lr=0.3, weight_decay=0.0)
    torch.testing.assert_close(corrected - plain, -0.3 * b, rtol=0, atol=1e-5)


@pytest.mark.parametrize("path", ["fused", "replicas", "stacked"])
def test_no_correction_is_the_plain_kernel_bit_for_bit_and_pulls_must_agree(path) -> None:
    trainer, network, x = _trainer("mlp", path, shape=(1, 4, 4), n=40, classes=3, seed=1)
    start = network.initial_params()
    plain = trainer.train(start, _jobs(x, (3, 5), 4, [None, None]), lr=0.2, weight_decay=0.01)
    zero = trainer.train(start, _jobs(x, (3, 5), 4, [Correction(0.0), None]), lr=0.2, weight_decay=0.01)
    assert all(torch.equal(a, b) for (a, _), (b, _) in zip(plain, zero))
    if path != "replicas":  # a stacked call folds one pull into its update; replicas apply each job's own
        with pytest.raises(ValueError, match="same correction pull"):
            trainer.train(start, _jobs(x, (3, 5), 4, [Correction(0.1), Correction(0.2)]), lr=0.2, weight_decay=0.0)


# ------------------------------------------------------------------ through the learner


def _dataset() -> Dataset:
    g = torch.Generator().manual_seed(0)
    return Dataset(
        "toy",
        torch.rand(48, 1, 2, 2, generator=g),
        torch.arange(48) % 3,
        torch.rand(12, 1, 2, 2, generator=g),
        torch.arange(12) % 3,
        3,
        (1, 2, 2),
    )


PARTS = [np.arange(0, 10), np.arange(10, 26), np.arange(26, 48)]


def _learner(strategy, *, batched: bool = True, steps: int = 3) -> Learner:
    local = LocalSpec(steps=steps, batch_size=4, lr=0.2)
    return Learner(
        [task_setup(_dataset(), PARTS, "logistic", [], local)],
        strategy=strategy,
        streams=RandomStreams(9),
        training_path=path_of(batched),
    )


def _clients() -> ClientInfo:
    return ClientInfo(tuple(len(p) for p in PARTS), local_lr=0.2)


class Corrected(ALGORITHMS["fedavg"]):
    """FedAvg whose jobs take a correction that depends on the client and on the strategy's current state."""

    def __init__(self, params, clients):
        super().__init__(params, clients)
        self.level = 1.0
        self.seen = []

    def correction(self, client, task):
        size = 4 * 3 + 3  # logistic on 4 inputs, 3 classes
        return Correction(pull=0.5 if client < 2 else 0.0, shift=torch.full((size,), self.level * (client - 1)))

    def aggregate(self, x, updates, context):
        self.seen.extend(updates)
        return super().aggregate(x, updates, context)


def test_the_learner_fixes_a_jobs_correction_when_it_starts_and_hands_it_back() -> None:
    results = []
    for batched in (True, False):
        strategy = Corrected(Corrected.Params(), _clients())
        learner = _learner(strategy, batched=batched)
        jobs = [learner.submit(c, 0).job for c in range(3)]
        handed = [strategy.correction(c, 0) for c in range(3)]
        strategy.level = 100.0  # the jobs started already: they keep what they were given
        learner.aggregate(RoundContext(0, 0.0, (0, 1, 2), (0, 1, 2), tuple(jobs)))
        assert [u.correction.pull for u in strategy.seen] == [0.5, 0.5, 0.0]
        for update, given in zip(strategy.seen, handed):
            assert torch.equal(update.correction.shift, given.shift)
        results.append(learner.global_vector)
    # clients 0 and 1 (same pull) train together, client 2 alone: the same as one job at a time
    torch.testing.assert_close(results[0], results[1], rtol=1e-5, atol=1e-6)
    plain = _learner(ALGORITHMS["fedavg"](ALGORITHMS["fedavg"].Params(), _clients()))
    jobs = [plain.submit(c, 0).job for c in range(3)]
    plain.aggregate(RoundContext(0, 0.0, (0, 1, 2), (0, 1, 2), tuple(jobs)))
    assert (results[0] - plain.global_vector).abs().max() > 1e-3


class Bulky(ALGORITHMS["fedavg"]):
    def download_bytes(self, model_bytes):
        return 3 * model_bytes

    def upload_bytes(self, model_bytes):
        return 2 * model_bytes + 8


def test_the_strategy_sizes_what_travels() -> None:
    plain = _learner(ALGORITHMS["fedavg"](ALGORITHMS["fedavg"].Params(), _clients())).submit(0, 0)
    bulky = _learner(Bulky(Bulky.Params(), _clients())).submit(0, 0)
    assert plain.download_bytes == plain.upload_bytes == (4 * 3 + 3) * 4  # float32 logistic
    assert (bulky.download_bytes, bulky.upload_bytes, bulky.flops) == (
        3 * plain.download_bytes,
        2 * plain.upload_bytes + 8,
        plain.flops,
    )


class SampleCount(Probe):
    """A new kind of probe: each client reports its number of samples at a made-up cost."""

    def flops(self, task, client):
        return 1000.0 * (client + 1)

    def report(self, task, client, update):
        return float(len(task.client_data(client)[1]))


class LargestDelta(Probe):
    """A probe that trains: each client reports the largest entry of its update."""

    trains = True

    def report(self, task, client, update):
        return float(update.delta.abs().max())


class Asker(ALGORITHMS["fedavg"]):
    """Assigns the one client with the largest report."""

    def __init__(self, params, clients, probe):
        super().__init__(params, clients)
        self.probe = probe
        self.reports = None

    def assign(self, round_index, reports, participants, rng):
        self.reports = {c: v.tolist() for c, v in reports.items()}
        return [(max(reports, key=lambda c: reports[c][0]), 0)]


def test_a_new_kind_of_probe_needs_no_learner_change() -> None:
    strategy = Asker(Asker.Params(), _clients(), SampleCount())
    learner = _learner(strategy)
    model_bytes = learner.tasks[0].model_bytes
    plan = learner.plan_round(0, [0, 1, 2])
    assert plan.probe and all(w.report and w.note == "probe" for w in plan.work)
    assert [(w.download_bytes, w.flops, w.upload_bytes) for w in plan.work] == [
        (model_bytes, 1000.0 * (c + 1), BYTES_PER_VALUE) for c in range(3)
    ]
    after = learner.plan_after_probe(0, [plan.work[0].job, plan.work[1].job])  # client 2's report was lost
    assert strategy.reports == {0: [10.0], 1: [16.0]}
    (work,) = after.work
    assert (work.client, work.download_bytes, work.upload_bytes) == (1, BYTES_PER_VALUE, model_bytes)
    assert work.flops == learner.tasks[0].job_flops(1, 3) > 0  # not trained in the probe: trains now


def test_a_probe_that_trains_reports_from_its_update_which_is_then_only_uploaded() -> None:
    strategy = Asker(Asker.Params(), _clients(), LargestDelta())
    learner = _learner(strategy)
    plan = learner.plan_round(0, [0, 1, 2])
    assert [w.flops for w in plan.work] == [learner.tasks[0].job_flops(c, 3) for c in range(3)]
    after = learner.plan_after_probe(0, [w.job for w in plan.work])
    (work,) = after.work
    assert work.flops == 0.0 and work.upload_bytes == learner.tasks[0].model_bytes
    start = learner.global_vector.clone()
    learner.aggregate(RoundContext(0, 0.0, (0, 1, 2), (work.client,), (work.job,)))
    # FedAvg of one update: the model became that client's result, whose largest change it reported
    assert float((learner.global_vector - start).abs().max()) == pytest.approx(strategy.reports[work.client][0])
    assert strategy.reports[work.client][0] == max(v[0] for v in strategy.reports.values())
