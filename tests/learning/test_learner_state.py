"""The learner's checkpoint state alone: a learner restored from another's state goes on exactly as that one
does, and a state whose model no longer fits is named (ModelChanged), not a reshape error."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from learn_support import task_setup

from netfl.backend import RoundContext
from netfl.errors import ModelChanged
from netfl.learn.data.datasets import Dataset
from netfl.learn.federation.algorithms import ALGORITHMS, ClientInfo
from netfl.learn.federation.compression import CompressionSettings, CompressorSettings
from netfl.learn.federation.learner import Learner
from netfl.learn.federation.learner_state import learner_state, restore_learner
from netfl.learn.federation.server_optimizers import ServerOptimizerChoice
from netfl.registry.learning_params import LocalSpec
from netfl.rng import RandomStreams

PARTS = [np.arange(0, 8), np.arange(8, 20), np.arange(20, 30)]


def learner(hidden: tuple[int, ...] = ()) -> Learner:
    g = torch.Generator().manual_seed(0)
    x, test_x = torch.rand(30, 1, 2, 2, generator=g), torch.rand(6, 1, 2, 2, generator=g)
    data = Dataset("toy", x, torch.arange(30) % 3, test_x, torch.arange(6) % 3, 3, (1, 2, 2))
    cls = ALGORITHMS["fedavg"]
    return Learner(
        [
            task_setup(
                data, PARTS, "mlp" if hidden else "logistic", list(hidden), LocalSpec(steps=3, batch_size=4, lr=0.2)
            )
        ],
        strategy=cls(cls.Params(), ClientInfo(tuple(len(p) for p in PARTS), local_lr=0.2)),
        streams=RandomStreams(4),
        participants=2,
        server_optimizer=ServerOptimizerChoice("adam", {"lr": 0.05}),
        compression=CompressionSettings(uplink=CompressorSettings("topk", fraction=0.5, error_feedback=True)),
        training_path="reference",
    )


def one_round(lrn: Learner, index: int) -> None:
    plan = lrn.plan_round(index, [0, 1, 2])
    jobs = tuple(w.job for w in plan.work)
    lrn.aggregate(RoundContext(index, 0.0, (0, 1, 2), tuple(w.client for w in plan.work), jobs))


def test_a_restored_learner_goes_on_as_the_original() -> None:
    """Two rounds, a job left in flight; the state, restored into a fresh learner: the same selection, jobs,
    server optimiser moments and error memory, hence the same model two rounds later."""
    original = learner()
    one_round(original, 0)
    one_round(original, 1)
    in_flight = original.submit(2, 2)
    state = learner_state(original)
    assert state["next_job"] == in_flight.job + 1 and list(state["jobs"]) == [in_flight.job]
    assert state["server_optimizers"][0].t == 2 and set(state["error_memory"]) <= {0, 1, 2}
    restored = learner()
    restore_learner(restored, state)
    for lrn in (original, restored):
        lrn.aggregate(RoundContext(2, 0.0, (0, 1, 2), (2,), (in_flight.job,)))
        one_round(lrn, 3)
    assert torch.equal(original.global_vector, restored.global_vector) and restored.version == original.version


def test_a_state_of_another_model_is_named() -> None:
    state = learner().state()
    with pytest.raises(ModelChanged, match=r"parameter 1.weight was \(3, 4\) there and is \(5, 4\) now"):
        learner(hidden=(5,)).restore(state)
    with pytest.raises(ValueError, match="the state has 2 models, this learner 1"):
        learner().restore({**state, "tasks": state["tasks"] * 2})
