"""SCAFFOLD (Karimireddy et al., Stochastic Controlled Averaging for Federated Learning): option II by hand.

Also the end-to-end check of the two client-objective algorithms (FedProx,
SCAFFOLD) on the digits quickstart: they run, and SCAFFOLD's messages are
twice FedAvg's on the simulated network.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from learn_support import path_of, task_setup

import netfl
from netfl.backend import RoundContext
from netfl.learn.data.datasets import Dataset
from netfl.learn.federation.algorithms import ALGORITHMS, ClientInfo, ClientUpdate
from netfl.learn.federation.learner import Learner
from netfl.registry.learning_params import LocalSpec
from netfl.rng import RandomStreams

F64 = torch.float64
LR = 0.1
PARTS = [np.arange(0, 16), np.arange(16, 32), np.arange(32, 48)]


def vec(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=F64)


def ctx(r: int, *clients: int) -> RoundContext:
    return RoundContext(r, float(r), clients, clients, tuple(range(len(clients))))


def scaffold(num_clients: int, **params):
    cls = ALGORITHMS["scaffold"]
    return cls(cls.Params(**params), ClientInfo((1,) * num_clients, local_lr=LR))


def update(strategy, client: int, delta: torch.Tensor, steps: int) -> ClientUpdate:
    """An update of a job that started now: it carries the correction the strategy gives it."""
    return ClientUpdate(client, 1, delta, 0, LR, steps, correction=strategy.correction(client, 0))


def test_scaffold_two_rounds_by_hand() -> None:
    """N = 4, eta_l = 0.1, eta_g = 2; option II: c_i+ = c_i - c + (x - y_i)/(K eta_l); c += (|S|/N) mean Delta c."""
    s = scaffold(4, server_lr=2.0)
    x0 = vec(1.0, 2.0)
    # round 0: c = c_i = 0, so plain SGD (no correction); clients 0 (K = 2) and 2 (K = 4) arrive
    first = [update(s, 0, vec(0.2, -0.4), 2), update(s, 2, vec(-0.8, 0.4), 4)]
    assert [u.correction for u in first] == [None, None]
    x1 = s.aggregate(x0, first, ctx(0, 0, 2)).vector
    assert torch.allclose(x1, vec(0.4, 2.0))  # x0 + 2 * mean(delta) = x0 + 2 * (-0.3, 0)
    assert torch.allclose(s.c_local[0], vec(-1.0, 2.0))  # -delta / (K eta_l) = -(0.2, -0.4) / 0.2
    assert torch.allclose(s.c_local[2], vec(2.0, -1.0))  # -(-0.8, 0.4) / 0.4
    assert torch.allclose(s.c, vec(0.25, 0.25))  # (2/4) * mean((-1, 2), (2, -1))
    assert set(s.c_local) == {0, 2}

    # round 1: jobs correct their gradients by c - c_i
    second = [update(s, 0, vec(0.1, 0.1), 1), update(s, 1, vec(0.3, -0.1), 3)]
    assert torch.allclose(second[0].correction.shift, vec(1.25, -1.75))  # c - c_0
    assert torch.allclose(second[1].correction.shift, vec(0.25, 0.25))  # c - 0
    assert second[0].correction.pull == 0.0
    x2 = s.aggregate(x1, second, ctx(1, 0, 1)).vector
    assert torch.allclose(x2, vec(0.8, 2.0))  # x1 + 2 * mean((0.1, 0.1), (0.3, -0.1))
    # c_0+ = (-1, 2) - (0.25, 0.25) - (0.1, 0.1)/0.1;  c_1+ = 0 - (0.25, 0.25) - (0.3, -0.1)/0.3
    assert torch.allclose(s.c_local[0], vec(-2.25, 0.75))
    assert torch.allclose(s.c_local[1], vec(-1.25, -0.25 + 1 / 3))
    # c + (2/4) mean(Delta c_0, Delta c_1) = (0.25, 0.25) + ((-1.25, -1.25) + (-1.25, 1/12)) / 4
    assert torch.allclose(s.c, vec(-0.375, 0.25 - 7 / 24))
    # c stays the mean over all N clients of their c_i (client 3's is zero)
    assert torch.allclose(s.c, (s.c_local[0] + s.c_local[1] + s.c_local[2]) / 4)

    # a round with no update changes nothing; a client that never arrived starts from c_i = 0
    assert torch.equal(s.aggregate(x2, [], ctx(2)).vector, x2)
    assert torch.allclose(s.correction(3, 0).shift, s.c)


def test_a_stale_job_keeps_the_control_variates_it_started_with() -> None:
    """N = 2, eta_l = 0.1: Delta c_i uses the c the job received, not the server's c when it arrives."""
    s = scaffold(2)
    s.aggregate(vec(0.0), [update(s, 0, vec(0.5), 1)], ctx(0, 0))  # c_0 = -0.5/0.1 = -5, c = -5/2 = -2.5
    stale = update(s, 1, vec(0.2), 2)  # starts now with c = -2.5, c_1 = 0; arrives two rounds later
    s.aggregate(vec(0.5), [update(s, 0, vec(0.1), 1)], ctx(1, 0))
    # Delta c_0 = -(-2.5) - 0.1/0.1 = 1.5: c_0 = -3.5, c = -2.5 + 1.5/2 = -1.75
    assert torch.allclose(s.c_local[0], vec(-3.5)) and torch.allclose(s.c, vec(-1.75))
    s.aggregate(vec(0.6), [stale], ctx(2, 1))
    # Delta c_1 = -(-2.5) - 0.2/(2 * 0.1) = 1.5 (with today's c it would be 0.75): c_1 = 1.5, c = -1.75 + 0.75
    assert torch.allclose(s.c_local[1], vec(1.5)) and torch.allclose(s.c, vec(-1.0))
    assert torch.allclose(s.c, (s.c_local[0] + s.c_local[1]) / 2)


# ------------------------------------------------------------------ through the learner


def _dataset(side: int) -> Dataset:
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


class Seen:
    """Keeps the updates the strategy aggregated (mixed into a strategy class)."""

    def aggregate(self, x, updates, context):
        self.updates = getattr(self, "updates", []) + list(updates)
        return super().aggregate(x, updates, context)


def _learner(name: str, *, model: str = "logistic", steps: int = 1, batched: bool = True, **params) -> Learner:
    cls = type("Seen" + ALGORITHMS[name].__name__, (Seen, ALGORITHMS[name]), {})
    strategy = cls(cls.Params(**params), ClientInfo(tuple(len(p) for p in PARTS), local_lr=LR))
    local = LocalSpec(steps=steps, batch_size=4, lr=LR)
    return Learner(
        [task_setup(_dataset(8 if model == "lenet5" else 2), PARTS, model, [8], local)],
        strategy=strategy,
        streams=RandomStreams(3),
        training_path=path_of(batched),
    )


def _round(learner: Learner, r: int, clients) -> list[ClientUpdate]:
    jobs = tuple(learner.submit(c, r).job for c in clients)
    before = len(getattr(learner.strategy, "updates", []))
    learner.aggregate(RoundContext(r, float(r), tuple(clients), tuple(clients), jobs))
    return learner.strategy.updates[before:]


@pytest.mark.parametrize("model", ["logistic", "mlp", "lenet5"])
def test_scaffolds_first_round_is_fedavgs_bit_for_bit(model: str) -> None:
    s, f = _learner("scaffold", model=model, steps=3), _learner("fedavg", model=model, steps=3, weighting="uniform")
    _round(s, 0, (0, 1, 2))
    _round(f, 0, (0, 1, 2))
    assert torch.equal(s.global_vector, f.global_vector)
    _round(s, 1, (0, 1, 2))
    _round(f, 1, (0, 1, 2))
    assert (s.global_vector - f.global_vector).abs().max() > 1e-4  # then the control variates act


@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("model", ["logistic", "mlp", "lenet5"])  # fused, fused, functional kernel when batched
def test_scaffold_corrects_each_local_step_by_c_minus_c_i(model: str, batched: bool) -> None:
    """One local step from the same x: SCAFFOLD's update is FedAvg's minus lr (c - c_i), with c and c_i by hand."""
    s = _learner("scaffold", model=model, batched=batched)
    f = _learner("fedavg", model=model, batched=batched, weighting="uniform")
    first = _round(s, 0, (0, 1))  # clients 0 and 1 arrive in round 0, client 2 does not
    _round(f, 0, (0, 1))
    c_i = {u.client: -u.delta.double() / LR for u in first}  # option II with K = 1 and c = c_i = 0
    c = (c_i[0] + c_i[1]) / 3  # (|S|/N) mean_S Delta c_i, N = 3
    torch.testing.assert_close(s.strategy.c.double(), c, rtol=1e-5, atol=1e-6)

    second = {u.client: u for u in _round(s, 1, (0, 1, 2))}
    plain = {u.client: u for u in _round(f, 1, (0, 1, 2))}
    for client in (0, 1, 2):
        own = c_i.get(client, torch.zeros_like(c))
        expected = plain[client].delta.double() - LR * (c - own)
        torch.testing.assert_close(second[client].delta.double(), expected, rtol=0, atol=2e-5)
        # and the client's new control variate: c_i - c + (x - y_i) / (K lr)
        torch.testing.assert_close(
            s.strategy.c_local[client].double(), own - c - second[client].delta.double() / LR, rtol=1e-5, atol=1e-4
        )


def test_scaffold_moves_twice_the_models_bytes() -> None:
    s, f = _learner("scaffold"), _learner("fedavg")
    mine, theirs = s.submit(0, 0), f.submit(0, 0)
    assert (mine.download_bytes, mine.upload_bytes) == (2 * theirs.download_bytes, 2 * theirs.upload_bytes)
    assert mine.flops == theirs.flops


# ------------------------------------------------------------------ end to end

QUICKSTART = Path(__file__).resolve().parents[2] / "topologies" / "quickstart.yaml"


def _upload_bytes(events) -> list[float]:
    return events[events.kind == "upload_start"].bytes.tolist()


def test_fedprox_and_scaffold_run_end_to_end_and_scaffolds_uploads_are_twice_fedavgs() -> None:
    """The digits quickstart for 4 rounds without a deadline: every selected job arrives whatever its size."""
    data = yaml.safe_load(QUICKSTART.read_text())
    data["stop"] = {"rounds": 4}
    data["server"]["round"] = {"participants": 8}
    runs = {}
    for algorithm in ({"name": "fedavg"}, {"name": "fedprox", "mu": 0.01}, {"name": "scaffold"}):
        data["server"]["algorithm"] = algorithm
        runs[algorithm["name"]] = netfl.run(data)
    fedavg, fedprox, scaffold_run = runs["fedavg"], runs["fedprox"], runs["scaffold"]
    for result in runs.values():
        assert result.summary["rounds"] == 4 and result.summary["updates_applied"] > 0
        assert result.summary["final_test_accuracy"] > 0.3  # 10 classes: chance is 0.1
    assert scaffold_run.summary["algorithm"] == "scaffold" and fedprox.summary["algorithm"] == "fedprox"

    plain = _upload_bytes(fedavg.events)
    assert plain and len(set(plain)) == 1
    assert _upload_bytes(fedprox.events) == plain  # the proximal term travels nowhere
    assert _upload_bytes(scaffold_run.events) == [2 * b for b in plain]  # Delta y and Delta c
    for key in ("bytes_up", "bytes_down"):
        assert scaffold_run.summary[key] == 2 * fedavg.summary[key] > 0
        assert fedprox.summary[key] == fedavg.summary[key]
    assert scaffold_run.summary["updates_applied"] == fedavg.summary["updates_applied"]
