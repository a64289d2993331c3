"""A NaN or inf in training stops the run (Diverged) or, with on_divergence: skip_update, drops that update."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from learn_support import path_of, task_setup

from netfl.backend import Diverged, RoundContext
from netfl.learn.data.datasets import Dataset
from netfl.learn.federation.algorithms import ClientInfo
from netfl.learn.federation.algorithms.fedavg import FedAvg
from netfl.learn.federation.algorithms.mifa import MIFA
from netfl.learn.federation.divergence_watch import all_finite
from netfl.learn.federation.learner import Learner
from netfl.learn.federation.probes import UpdateNorm
from netfl.registry.learning_params import LocalSpec
from netfl.rng import RandomStreams

PARTS = [np.arange(0, 16), np.arange(16, 32), np.arange(32, 48)]
BAD_CLIENT = 1


def _dataset(poisoned: bool) -> Dataset:
    """48 samples of 3 classes; ``poisoned``: client 1's samples hold a NaN pixel, so its update is NaN."""
    g = torch.Generator().manual_seed(0)
    train_x = torch.rand(48, 1, 2, 2, generator=g)
    if poisoned:
        train_x[PARTS[BAD_CLIENT], 0, 0, 0] = math.nan
    test_x = torch.rand(12, 1, 2, 2, generator=g)
    return Dataset("toy", train_x, torch.arange(48) % 3, test_x, torch.arange(12) % 3, 3, (1, 2, 2))


def _learner(*, poisoned: bool = True, on_divergence: str = "stop", strategy=None, batched: bool = True) -> Learner:
    clients = ClientInfo(tuple(len(p) for p in PARTS), local_lr=0.1)
    strategy = strategy or FedAvg(FedAvg.Params(weighting="uniform"), clients)
    local = LocalSpec(steps=3, batch_size=4, lr=0.1)
    return Learner(
        [task_setup(_dataset(poisoned), PARTS, "logistic", [], local)],
        strategy=strategy,
        streams=RandomStreams(4),
        training_path=path_of(batched),
        on_divergence=on_divergence,
    )


def _round(learner: Learner, r: int, clients=(0, 1, 2), cancel=()) -> int:
    jobs = {c: learner.submit(c, r).job for c in clients}
    for c in cancel:
        learner.cancel(jobs[c])
    delivered = tuple(j for c, j in jobs.items() if c not in cancel)
    return learner.aggregate(RoundContext(r, float(r), clients, clients, delivered))


@pytest.mark.parametrize("batched", [True, False])
def test_a_non_finite_update_stops_with_its_round_and_client(batched: bool) -> None:
    learner = _learner(batched=batched)
    start = learner.global_vector.clone()
    with pytest.raises(Diverged) as caught:
        _round(learner, 0)
    d = caught.value.divergence
    assert (d.where, d.round_index, d.clients) == ("update", 0, (BAD_CLIENT,))
    assert "round 0: the update of client(s) 1 is not finite" in str(caught.value)
    assert torch.equal(learner.global_vector, start) and learner.version == 0  # the model was not touched


def test_skip_update_drops_the_bad_update_and_goes_on() -> None:
    skipping = _learner(on_divergence="skip_update")
    reference = _learner(poisoned=False)  # the same run in which client 1's update never arrived
    for r in range(3):
        assert _round(skipping, r) == 2  # two of three updates applied
        _round(reference, r, cancel=(BAD_CLIENT,))
        assert torch.equal(skipping.global_vector, reference.global_vector)
    assert skipping.updates_skipped == 3 and torch.isfinite(skipping.global_vector).all()


def test_a_skipped_update_never_reaches_a_stateful_strategy() -> None:
    clients = ClientInfo(tuple(len(p) for p in PARTS), local_lr=0.1)
    mifa = MIFA(MIFA.Params(), clients)
    learner = _learner(on_divergence="skip_update", strategy=mifa)
    _round(learner, 0)
    assert torch.isfinite(mifa.memory).all() and not mifa.seen[BAD_CLIENT] and mifa.seen[[0, 2]].all()


@pytest.mark.parametrize("on_divergence", ["stop", "skip_update"])
def test_a_non_finite_global_model_always_stops(on_divergence: str) -> None:
    clients = ClientInfo(tuple(len(p) for p in PARTS), local_lr=0.1)
    huge = FedAvg(FedAvg.Params.model_construct(server_lr=math.inf), clients)  # past validation, which refuses it
    learner = _learner(poisoned=False, on_divergence=on_divergence, strategy=huge)
    with pytest.raises(Diverged) as caught:
        _round(learner, 0)
    assert (caught.value.divergence.where, caught.value.divergence.clients) == ("global_model", (0, 1, 2))
    assert torch.isfinite(learner.global_vector).all()  # the last finite model stays


def test_a_non_finite_test_loss_stops() -> None:
    learner = _learner(poisoned=False)
    _round(learner, 0)
    learner.tasks[0].global_vector = torch.full_like(learner.global_vector, 3e38)  # finite, but logits overflow
    with pytest.raises(Diverged) as caught:
        learner.evaluate()
    d = caught.value.divergence
    assert (d.where, d.round_index, d.clients) == ("evaluation", 0, (0, 1, 2))


class AskAll(FedAvg):
    """Probes every client for its update norm, then has every client that reported upload its update."""

    probe = UpdateNorm()

    def assign(self, round_index, reports, participants, rng):
        self.reported = sorted(reports)
        return [(client, 0) for client in sorted(reports)]


@pytest.mark.parametrize("on_divergence", ["stop", "skip_update"])
def test_a_non_finite_probe_report_stops_or_is_skipped(on_divergence: str) -> None:
    strategy = AskAll(AskAll.Params(), ClientInfo(tuple(len(p) for p in PARTS), local_lr=0.1))
    learner = _learner(on_divergence=on_divergence, strategy=strategy)
    plan = learner.plan_round(0, [0, 1, 2])
    if on_divergence == "stop":
        with pytest.raises(Diverged, match="round 0: the update of client.s. 1 is not finite"):
            learner.plan_after_probe(0, [w.job for w in plan.work])
        return
    after = learner.plan_after_probe(0, [w.job for w in plan.work])
    assert strategy.reported == [0, 2] and [w.client for w in after.work] == [0, 2]
    assert learner.updates_skipped == 1
    learner.aggregate(RoundContext(0, 0.0, (0, 1, 2), (0, 2), tuple(w.job for w in after.work)))
    assert torch.isfinite(learner.global_vector).all()


def test_on_divergence_is_checked() -> None:
    with pytest.raises(ValueError, match="stop, skip_update"):
        _learner(on_divergence="ignore")


def test_all_finite_tells_overflow_from_nan_and_inf() -> None:
    big = torch.full((4,), 3e38)  # finite, but its float32 sum overflows
    vectors = [torch.ones(3), big, torch.tensor([1.0, math.nan]), torch.tensor([math.inf, -math.inf]), big * 10]
    assert all_finite(vectors) == [True, True, False, False, False]
    assert all_finite([]) == []
