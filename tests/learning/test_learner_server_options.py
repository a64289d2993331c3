"""The learner's side of the baselines: a job cut to its first steps (partial work), the server optimiser on the
strategy's aggregate, and compression on the air (bytes, what the strategy sees, the memory in the state)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from learn_support import task_setup

from netfl.assemble.learning import compression_settings, server_optimizer_choice
from netfl.backend import RoundContext
from netfl.config.schema import CompressionSpec, ServerOptimizerSpec
from netfl.learn.data.datasets import Dataset
from netfl.learn.federation.algorithms import ALGORITHMS, ClientInfo
from netfl.learn.federation.learner import Learner
from netfl.registry.learning_params import LocalSpec
from netfl.rng import RandomStreams

PARTS = [np.arange(0, 10), np.arange(10, 26), np.arange(26, 48)]
SIZE = 4 * 3 + 3  # logistic regression on 2x2 inputs, 3 classes


def dataset() -> Dataset:
    g = torch.Generator().manual_seed(0)
    x, xt = torch.rand(48, 1, 2, 2, generator=g), torch.rand(12, 1, 2, 2, generator=g)
    return Dataset("toy", x, torch.arange(48) % 3, xt, torch.arange(12) % 3, 3, (1, 2, 2))


class Seen(ALGORITHMS["fedavg"]):
    """FedAvg that keeps the updates it aggregated."""

    def __init__(self, params, clients):
        super().__init__(params, clients)
        self.seen = []

    def aggregate(self, x, updates, context):
        self.seen.append(updates)
        return super().aggregate(x, updates, context)


def learner(*, steps: int = 5, optimizer: dict | None = None, compression: dict | None = None) -> Learner:
    local = LocalSpec(steps=steps, batch_size=4, lr=0.2)
    return Learner(
        [task_setup(dataset(), PARTS, "logistic", [], local)],
        strategy=Seen(Seen.Params(), ClientInfo(tuple(len(p) for p in PARTS), local_lr=0.2)),
        streams=RandomStreams(9),
        training_path="reference",
        server_optimizer=server_optimizer_choice(ServerOptimizerSpec(**optimizer)) if optimizer else None,
        compression=compression_settings(CompressionSpec(**compression)) if compression else None,
    )


def round_of(lrn: Learner, clients=(0, 1, 2), index: int = 0) -> None:
    jobs = [lrn.submit(c, index).job for c in clients]
    lrn.aggregate(RoundContext(index, 0.0, clients, clients, tuple(jobs)))


def test_a_cut_job_is_the_job_of_its_first_steps() -> None:
    """Cut to 2 of 5 steps, a job trains the first 2 minibatches it would have drawn: the 2-step job, bit for bit;
    its update says 2 steps (FedNova's tau_i)."""
    cut, whole = learner(steps=5), learner(steps=2)
    job = cut.submit(1, 0).job
    assert cut.submit(2, 0).steps == 5
    cut.cut(job, 2)
    cut.aggregate(RoundContext(0, 0.0, (1,), (1,), (job,)))
    round_of(whole, clients=(1,))
    assert torch.equal(cut.global_vector, whole.global_vector)
    assert cut.strategy.seen[0][0].steps == 2
    with pytest.raises(ValueError, match="cannot be cut"):
        cut.cut(cut.submit(0, 1).job, 6)


def test_the_server_optimizer_steps_on_the_strategys_aggregate_minus_x() -> None:
    plain, sgd = learner(), learner(optimizer={"name": "sgd", "lr": 2.0})
    x0 = plain.global_vector.clone()
    round_of(plain)
    round_of(sgd)
    torch.testing.assert_close(sgd.global_vector, x0 + 2.0 * (plain.global_vector - x0), rtol=0, atol=1e-6)
    before = sgd.global_vector
    sgd.aggregate(RoundContext(1, 0.0, (), (), ()))  # nothing arrived: no step, no count
    assert torch.equal(sgd.global_vector, before) and sgd.state()["server_optimizers"][0].t == 1


def test_compressed_bytes_and_what_the_strategy_sees() -> None:
    """15 parameters: top-10% sends k = 2 values and indices (16 bytes); QSGD with 16 levels sends a norm and 15 x 6
    bits (4 + 12 bytes). The strategy sees 2-sparse updates; each client's error memory is in the state."""
    lrn = learner(compression={"uplink": {"topk": 0.1, "error_feedback": True}, "downlink": {"qsgd": {"levels": 16}}})
    work = lrn.submit(0, 0)
    assert (work.upload_bytes, work.download_bytes) == (16.0, 16.0)
    lrn.cancel(work.job)
    x0 = lrn.global_vector.clone()
    round_of(lrn)
    assert [int((u.delta != 0).sum()) for u in lrn.strategy.seen[0]] == [2, 2, 2]
    memory = lrn.state()["error_memory"]
    assert sorted(memory) == [0, 1, 2] and all(int((e != 0).sum()) == SIZE - 2 for e in memory.values())
    # the downlink: every client started from the same quantised model, on QSGD's grid, not the model itself
    starts = [u.start for u in lrn.strategy.seen[0]]
    assert all(torch.equal(s, starts[0]) for s in starts) and not torch.equal(starts[0], x0)
    levels = starts[0].abs() * 16 / torch.linalg.vector_norm(x0)
    torch.testing.assert_close(levels, levels.round(), rtol=0, atol=1e-4)
    restored = learner(compression={"uplink": {"topk": 0.1, "error_feedback": True}})
    restored.restore(lrn.state())
    assert all(torch.equal(restored.state()["error_memory"][c], memory[c]) for c in memory)
