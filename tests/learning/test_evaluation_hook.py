"""Evaluation is the strategy's hook (as Flower's ``Strategy.evaluate``): by default the task's test set on the
global model; a strategy may test another vector, or give a result of its own, which the divergence watch
checks like any other."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from learn_support import task_setup

from netfl.backend import Diverged, Evaluation, RoundContext
from netfl.learn.data.datasets import Dataset
from netfl.learn.federation.algorithms import ALGORITHMS, ClientInfo
from netfl.learn.federation.learner import Learner
from netfl.registry.learning_params import LocalSpec
from netfl.rng import RandomStreams

PARTS = [np.arange(0, 10), np.arange(10, 20)]
FedAvg = ALGORITHMS["fedavg"]


class FirstModel(FedAvg):
    """Tests the vector it first aggregated from, whatever the global model is now."""

    first = None

    def aggregate(self, x, updates, context):
        self.first = x.clone() if self.first is None else self.first
        return super().aggregate(x, updates, context)

    def evaluate(self, task, x, test):
        return test(self.first if self.first is not None else x)


class Constant(FedAvg):
    loss = 0.25

    def evaluate(self, task, x, test):
        return Evaluation(0.5, self.loss)


def learner(cls: type = FedAvg) -> Learner:
    g = torch.Generator().manual_seed(1)
    x, test_x = torch.rand(20, 1, 2, 2, generator=g), torch.rand(9, 1, 2, 2, generator=g)
    data = Dataset("toy", x, torch.arange(20) % 3, test_x, torch.arange(9) % 3, 3, (1, 2, 2))
    return Learner(
        [task_setup(data, PARTS, "logistic", [], LocalSpec(steps=4, batch_size=4, lr=0.5))],
        strategy=cls(cls.Params(), ClientInfo((10, 10), local_lr=0.5)),
        streams=RandomStreams(2),
    )


def one_round(lrn: Learner) -> None:
    jobs = tuple(lrn.submit(c, 0).job for c in (0, 1))
    lrn.aggregate(RoundContext(0, 0.0, (0, 1), (0, 1), jobs))


def test_the_default_hook_tests_the_global_model() -> None:
    lrn = learner()
    before = lrn.evaluate()
    one_round(lrn)
    after = lrn.evaluate()
    assert after == lrn.tasks[0].evaluate() and after.loss != before.loss


def test_a_strategy_may_test_another_vector_or_answer_itself() -> None:
    initial = learner().evaluate()
    lrn = learner(FirstModel)
    one_round(lrn)
    assert lrn.evaluate() == initial  # the vector of its first aggregation: the initial model
    own = learner(Constant)
    assert own.evaluate() == Evaluation(0.5, 0.25)
    own.strategy.loss = float("nan")
    with pytest.raises(Diverged) as info:
        own.evaluate()
    assert info.value.divergence.where == "evaluation"
