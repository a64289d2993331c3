"""Hierarchical FL on the learner's side (HierFAVG): edge rounds and a cloud round on hand-made updates."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from learn_support import task_setup

from netfl.backend import CloudContext, RoundContext
from netfl.learn.data.datasets import Dataset
from netfl.learn.federation.algorithms import ALGORITHMS, ClientInfo
from netfl.learn.federation.learner import Learner
from netfl.learn.federation.server_optimizers import ServerOptimizerChoice
from netfl.learn.federation.task_model import TaskSetup
from netfl.learn.models.user import user_recipe
from netfl.registry.learning_params import LocalSpec
from netfl.rng import RandomStreams

PARTS = [np.arange(0, 1), np.arange(1, 4), np.arange(4, 8), np.arange(8, 12)]  # 1, 3, 4 and 4 samples
EDGES = [0, 0, 1, 1]  # edge 0 holds 4 samples, edge 1 holds 8
SIZE = 4 * 3 + 3


class HandMade(Learner):
    """A learner whose jobs' updates are given (the tiers are under test here, not training)."""

    updates: dict[int, torch.Tensor] = {}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.book.train = self._given

    def _given(self, job_ids) -> None:
        for j in job_ids:
            self.book.jobs[j].delta = self.updates[self.book.jobs[j].client].clone()


def without_name(params: dict) -> dict:
    return {k: v for k, v in params.items() if k != "name"}


def toy() -> Dataset:
    g = torch.Generator().manual_seed(0)
    x, xt = torch.rand(12, 1, 2, 2, generator=g), torch.rand(6, 1, 2, 2, generator=g)
    return Dataset("toy", x, torch.arange(12) % 3, xt, torch.arange(6) % 3, 3, (1, 2, 2))


def learner(name: str = "fedavg", *, edge_count: int | None = None, optimizer: dict | None = None) -> HandMade:
    data = toy()
    local = LocalSpec(steps=2, batch_size=2, lr=0.1)
    cls = ALGORITHMS[name]
    strategy = cls(cls.Params(), ClientInfo(tuple(len(p) for p in PARTS), local_lr=0.1))
    out = HandMade(
        [task_setup(data, PARTS, "logistic", [], local)],
        strategy=strategy,
        streams=RandomStreams(1),
        client_edges=EDGES,
        edge_count=edge_count,
        server_optimizer=ServerOptimizerChoice(optimizer["name"], without_name(optimizer)) if optimizer else None,
    )
    out.updates = {c: torch.full((SIZE,), float(v)) for c, v in enumerate((1.0, 2.0, 4.0, 8.0))}
    return out


def edge_round(lrn: Learner, clients, index: int) -> None:
    jobs = [lrn.submit(c, index).job for c in clients]
    lrn.aggregate(RoundContext(index, 0.0, tuple(clients), tuple(clients), tuple(jobs)))


def test_two_edge_rounds_and_a_cloud_round_by_hand() -> None:
    """Round 0, clients 0, 1, 2 arrive: edge 0 = x + (1/4) 1 + (3/4) 2 = x + 1.75; edge 1 = x + 4; the cloud model
    stays x. Round 1, clients 1 and 3 arrive: edge 0 = x + 1.75 + 2 = x + 3.75; edge 1 = x + 4 + 8 = x + 12. Cloud,
    by the edges' data (4 and 8): x + (4 x 3.75 + 8 x 12) / 12 = x + 9.25; both edges take it."""
    lrn = learner()
    x = lrn.global_vector.clone()
    edge_round(lrn, [0, 1, 2], 0)
    torch.testing.assert_close(lrn.global_vector, x)
    torch.testing.assert_close(lrn.state()["edge_models"][0][0], x + 1.75)
    torch.testing.assert_close(lrn.state()["edge_models"][0][1], x + 4.0)
    edge_round(lrn, [1, 3], 1)
    assert lrn.aggregate_cloud(CloudContext(1, 0.0, (0, 1))) == 2
    torch.testing.assert_close(lrn.global_vector, x + 9.25)
    assert all(torch.equal(v, lrn.global_vector) for v in lrn.state()["edge_models"][0])
    # the next jobs start from their edge's model, which is now the cloud's
    seen = []
    aggregate = lrn.strategy.aggregate
    lrn.strategy.aggregate = lambda x, updates, context: seen.extend(updates) or aggregate(x, updates, context)
    edge_round(lrn, [0, 2], 2)
    assert len(seen) == 2 and all(torch.equal(u.start, lrn.global_vector) for u in seen)


def test_an_edge_that_misses_the_cloud_keeps_its_model() -> None:
    lrn = learner()
    x = lrn.global_vector.clone()
    edge_round(lrn, [0, 2], 0)  # edge 0: x + 1, edge 1: x + 4
    lrn.aggregate_cloud(CloudContext(0, 0.0, (0,)))  # only edge 0 reached the cloud
    torch.testing.assert_close(lrn.global_vector, x + 1.0)
    torch.testing.assert_close(lrn.state()["edge_models"][0][1], x + 4.0)
    assert lrn.aggregate_cloud(CloudContext(0, 0.0, ())) == 0  # nobody: nothing changes
    torch.testing.assert_close(lrn.global_vector, x + 1.0)


def test_an_edge_without_devices_weighs_nothing_in_the_cloud() -> None:
    """Edge 2 has no devices (the last edge of the file): it reaches the cloud and adds no weight."""
    lrn = learner(edge_count=3)
    x = lrn.global_vector.clone()
    edge_round(lrn, [0, 2], 0)  # edge 0: x + 1 (4 samples), edge 1: x + 4 (8 samples)
    assert lrn.aggregate_cloud(CloudContext(0, 0.0, (0, 1, 2))) == 3
    torch.testing.assert_close(lrn.global_vector, x + (4 * 1.0 + 8 * 4.0) / 12)
    assert all(torch.equal(v, lrn.global_vector) for v in lrn.state()["edge_models"][0])


def test_a_cloud_round_with_no_new_update_leaves_the_optimiser_as_it_is() -> None:
    """With momentum, a cloud round after which no edge applied an update would still move the model (by the
    velocity): it does not, and t stays, as a round in which nothing arrived does without edges."""
    lrn = learner(optimizer={"name": "momentum", "lr": 1.0, "beta1": 0.9})
    x = lrn.global_vector.clone()
    edge_round(lrn, [0, 2], 0)
    lrn.aggregate_cloud(CloudContext(0, 0.0, (0, 1)))
    moved = lrn.global_vector.clone()
    torch.testing.assert_close(moved, x + 3.0)  # the first step: velocity = the pseudo-gradient
    assert lrn.aggregate_cloud(CloudContext(1, 0.0, (0, 1))) == 2  # nothing arrived since
    assert torch.equal(lrn.global_vector, moved) and lrn.state()["server_optimizers"][0].t == 1
    restored = learner(optimizer={"name": "momentum", "lr": 1.0, "beta1": 0.9})
    edge_round(lrn, [1], 2)
    restored.restore(lrn.state())  # whether an edge took an update since the cloud round is kept
    assert restored.state()["edges_fresh"] is True


def test_fednova_at_the_edges_and_a_refused_model_with_buffers() -> None:
    lrn = learner("fednova")
    x = lrn.global_vector.clone()
    edge_round(lrn, [0, 1], 0)  # equal steps: FedNova is FedAvg at the edge
    torch.testing.assert_close(lrn.state()["edge_models"][0][0], x + 1.75)

    def with_statistics(num_classes: int):
        return torch.nn.Sequential(torch.nn.BatchNorm2d(1), torch.nn.Flatten(), torch.nn.Linear(4, num_classes))

    data = toy()
    recipe = user_recipe(with_statistics, {}, (1, 2, 2), 3)
    setup = TaskSetup(data, PARTS, recipe, LocalSpec(steps=2, batch_size=2, lr=0.1))
    with pytest.raises(ValueError, match="buffers: local"):
        Learner([setup], strategy=lrn.strategy, streams=RandomStreams(1), client_edges=EDGES)
