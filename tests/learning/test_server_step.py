"""The server step alone, by hand on two-value models: FedAvg's aggregate through a server optimiser, the edge
servers' rounds and the cloud's data-weighted average."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
import torch

from netfl.backend import CloudContext, Diverged, RoundContext
from netfl.learn.federation.algorithms import ALGORITHMS, ClientInfo, ClientUpdate
from netfl.learn.federation.server_optimizers import ServerOptimizerChoice
from netfl.learn.federation.server_step import ServerStep
from netfl.learn.federation.strategy_calls import StrategyCalls

SIZES = (1, 3, 4)
CONTEXT = RoundContext(0, 0.0, (0, 1, 2), (0, 1, 2), ())


@dataclass
class Task:
    """What the server step reads of a task: its global vector, its buffers and its clients' data sizes."""

    global_vector: torch.Tensor = field(default_factory=lambda: torch.tensor([1.0, 1.0], dtype=torch.float64))
    buffer_bytes: int = 0
    global_buffers: torch.Tensor = field(default_factory=lambda: torch.zeros(0))
    snapshots: dict = field(default_factory=dict)

    def client_size(self, client: int) -> int:
        return SIZES[client]


def fedavg():
    cls = ALGORITHMS["fedavg"]
    return StrategyCalls(cls(cls.Params(), ClientInfo(SIZES, local_lr=0.1)))


def update(client: int, *delta: float) -> ClientUpdate:
    return ClientUpdate(client, SIZES[client], torch.tensor(delta, dtype=torch.float64), 0)


def test_the_optimiser_steps_on_the_aggregate_minus_the_model() -> None:
    """FedAvg: x + (1/4 [1, 0] + 3/4 [0, 4]) = [1.25, 4]; pseudo-gradient [0.25, 3]; sgd with eta = 2:
    [1, 1] + 2 [0.25, 3] = [1.5, 7]. A round without updates leaves the model and the optimiser alone."""
    tasks = [Task()]
    plain = ServerStep(tasks)
    updates = [update(0, 1.0, 0.0), update(1, 0.0, 4.0)]
    assert plain.models(fedavg(), tasks, updates, CONTEXT)[0].tolist() == [1.25, 4.0]
    step = ServerStep(tasks, ServerOptimizerChoice("sgd", {"lr": 2.0}))
    assert step.models(fedavg(), tasks, updates, CONTEXT)[0].tolist() == [1.5, 7.0]
    assert step.models(fedavg(), tasks, [], CONTEXT)[0].tolist() == [1.0, 1.0] and step.optimizers[0].t == 1
    assert step.edge_of(2) == -1 and step.start(0, 2, tasks[0].global_vector) is tasks[0].global_vector


def test_edges_move_their_own_models_and_the_cloud_averages_them_by_data() -> None:
    """Clients 0, 1 under edge 0 (4 samples), client 2 under edge 1 (4 samples). Edge 0 takes client 0's [1, 0]:
    [2, 1]; edge 1 client 2's [0, 2]: [1, 3]; the global model stays [1, 1]. The cloud: (4 [2, 1] + 4 [1, 3]) / 8 =
    [1.5, 2], through sgd with eta = 2: [1, 1] + 2 [0.5, 1] = [2, 3], which both edges take."""
    tasks = [Task()]
    step = ServerStep(tasks, ServerOptimizerChoice("sgd", {"lr": 2.0}), client_edges=[0, 0, 1])
    models = step.models(fedavg(), tasks, [update(0, 1.0, 0.0), update(2, 0.0, 2.0)], CONTEXT)
    assert models[0].tolist() == [1.0, 1.0] and step.edges.fresh
    assert step.start(0, 1, models[0]).tolist() == [2.0, 1.0] and step.edge_of(2) == 1
    step.cloud(tasks, CloudContext(0, 0.0, (0, 1)), version=5)
    assert tasks[0].global_vector.tolist() == [2.0, 3.0] and tasks[0].snapshots[5][0] is tasks[0].global_vector
    assert step.start(0, 2, None).tolist() == [2.0, 3.0] and not step.edges.fresh
    step.cloud(tasks, CloudContext(4, 0.0, (0, 1)), version=5)  # no edge moved: the optimiser takes no step
    assert tasks[0].global_vector.tolist() == [2.0, 3.0] and step.optimizers[0].t == 1


def test_a_non_finite_edge_model_stops_the_run() -> None:
    tasks = [Task()]
    step = ServerStep(tasks, client_edges=[0, 0, 1])
    with pytest.raises(Diverged) as info:
        step.models(fedavg(), tasks, [update(1, float("inf"), 0.0)], CONTEXT)
    assert info.value.divergence.where == "global_model" and info.value.divergence.clients == (1,)


def test_edges_refuse_a_model_whose_buffers_travel() -> None:
    with pytest.raises(ValueError, match="model.buffers: local"):
        ServerStep([Task(buffer_bytes=8)], client_edges=[0, 0, 1])
