"""Buffers (BatchNorm's running statistics) under both rules, counted in what travels; and accuracy per token."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from learn_support import job_minibatches
from torch import nn

from netfl.backend import BYTES_PER_VALUE, RoundContext
from netfl.learn.data.datasets import Dataset
from netfl.learn.federation.algorithms import ALGORITHMS, ClientInfo
from netfl.learn.federation.learner import Learner
from netfl.learn.federation.task_model import TaskSetup
from netfl.learn.models.flat_model import Network
from netfl.learn.models.user import ModelRecipe
from netfl.learn.training.reference import train_one
from netfl.learn.training.replicas import Evaluator
from netfl.registry.learning_params import LocalSpec
from netfl.rng import RandomStreams

PARTS = [np.arange(0, 10), np.arange(10, 30), np.arange(30, 40)]
SEED = 4


class WithBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn, self.fc = nn.Conv2d(1, 3, 3, padding=1), nn.BatchNorm2d(3), nn.Linear(3 * 4 * 4, 2)

    def forward(self, x):
        return self.fc(nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2).flatten(1))


def _dataset() -> Dataset:
    g = torch.Generator().manual_seed(1)
    x = torch.rand(40, 1, 8, 8, generator=g) * torch.linspace(0.5, 3.0, 40).view(-1, 1, 1, 1)  # clients differ
    return Dataset("toy", x, torch.arange(40) % 2, torch.rand(10, 1, 8, 8, generator=g), torch.arange(10) % 2, 2,
                   (1, 8, 8))  # fmt: skip


def _learner(rule: str) -> Learner:
    local = LocalSpec(steps=3, batch_size=4, lr=0.1)
    recipe = ModelRecipe("with_bn", WithBN, buffers=rule)
    strategy = ALGORITHMS["fedavg"](ALGORITHMS["fedavg"].Params(), ClientInfo((10, 20, 10), local_lr=0.1))
    return Learner([TaskSetup(_dataset(), PARTS, recipe, local)], strategy=strategy, streams=RandomStreams(SEED))


def _context(r: int, jobs: tuple[int, ...]) -> RoundContext:
    return RoundContext(r, 0.0, np.arange(3), (0, 1, 2), jobs)


def _expected_buffers(learner: Learner, client: int, job: int, start_buffers: torch.Tensor) -> torch.Tensor:
    task = learner.tasks[0]
    minibatches = job_minibatches(SEED, client, job, task.part(client), 4, 3)
    _, buffers = train_one(task.network, task.snapshots[0][0], task.dataset.train_x, task.dataset.train_y,
                           minibatches, lr=0.1, buffers=start_buffers)  # fmt: skip
    return buffers


def test_averaged_buffers_travel_and_become_the_sample_weighted_mean() -> None:
    learner = _learner("average")
    task = learner.tasks[0]
    params, buffers = task.network.params.size, task.network.buffers.size
    assert buffers == 3 + 3 + 1  # running mean and variance of 3 channels, and the batch count
    work = [learner.submit(c, 0) for c in (0, 1)]
    assert all(w.download_bytes == w.upload_bytes == BYTES_PER_VALUE * (params + buffers) for w in work)
    initial = task.global_buffers.clone()
    expected = [_expected_buffers(learner, c, w.job, initial) for c, w in zip((0, 1), work)]
    learner.aggregate(_context(0, tuple(w.job for w in work)))
    mean = (10 * expected[0].double() + 20 * expected[1].double()) / 30  # clients hold 10 and 20 samples
    torch.testing.assert_close(task.global_buffers, mean.float(), rtol=1e-5, atol=1e-6)
    assert task.global_buffers[-1] == 3  # both ran 3 steps: the batch count averages to 3
    assert not torch.equal(task.global_buffers, initial)
    learner.aggregate(_context(1, ()))  # a round without updates keeps them
    torch.testing.assert_close(task.global_buffers, mean.float(), rtol=1e-5, atol=1e-6)


def test_local_buffers_stay_on_each_device_and_nothing_of_them_travels() -> None:
    learner = _learner("local")
    task = learner.tasks[0]
    work = learner.submit(2, 0)
    assert work.download_bytes == work.upload_bytes == BYTES_PER_VALUE * task.network.params.size
    initial = task.global_buffers.clone()
    own = _expected_buffers(learner, 2, work.job, initial)
    learner.aggregate(_context(0, (work.job,)))
    torch.testing.assert_close(task.device_buffers[2], own)
    assert torch.equal(task.global_buffers, initial)  # the server never sees them
    assert torch.equal(task.test_buffers(), task.device_buffers[2])  # the only device with buffers of its own
    assert task.job_buffers(2) is task.device_buffers[2] and task.job_buffers(0) is None  # 0 starts from initial
    second = learner.submit(0, 1)
    learner.aggregate(_context(1, (second.job,)))
    weights = torch.tensor([10.0, 10.0], dtype=torch.float64) / 20  # clients 0 and 2 hold 10 samples each
    mean = weights @ torch.stack([task.device_buffers[0], task.device_buffers[2]]).double()
    torch.testing.assert_close(task.test_buffers(), mean.float())


def test_a_job_starts_from_its_devices_own_buffers() -> None:
    learner = _learner("local")
    task = learner.tasks[0]
    first = learner.submit(1, 0)
    learner.aggregate(_context(0, (first.job,)))
    mine = task.device_buffers[1].clone()
    second = learner.submit(1, 1)
    learner.aggregate(_context(1, (second.job,)))
    minibatches = job_minibatches(SEED, 1, second.job, task.part(1), 4, 3)
    _, expected = train_one(task.network, task.snapshots[learner.version][0], task.dataset.train_x,
                            task.dataset.train_y, minibatches, lr=0.1, buffers=mine)  # fmt: skip
    assert expected[-1] == 6  # 3 batches counted on top of its own 3
    torch.testing.assert_close(task.device_buffers[1][-1], expected[-1])


class Fixed(nn.Module):
    """Scores that depend only on the token: token t predicts class t (mod 3)."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(()))

    def forward(self, x):
        return nn.functional.one_hot(x % 3, 3).float() * self.scale * 5.0


def test_accuracy_and_loss_per_token_count_labelled_positions_only() -> None:
    network = Network(Fixed())
    x = torch.tensor([[0, 1, 2, 0], [1, 1, 2, 2]])
    y = torch.tensor([[0, 1, 0, -100], [1, 2, 2, -100]])  # right: 0, 1, 1, 2 -> 4 of the 6 labelled tokens
    evaluate = Evaluator(network, 3, torch.device("cpu"), channels_last=False)
    accuracy, loss, per_class = evaluate(network.initial_params(), None, x, y)
    assert accuracy == pytest.approx(4 / 6)
    assert per_class == pytest.approx([1 / 2, 2 / 2, 1 / 2])  # class 0: 1 of 2; class 1: 2 of 2; class 2: 1 of 2
    logits = network.module(x).reshape(-1, 3)
    counted = y.reshape(-1) != -100
    expected = nn.functional.cross_entropy(logits[counted], y.reshape(-1)[counted])
    assert loss == pytest.approx(float(expected.detach()))
