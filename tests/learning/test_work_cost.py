"""What the engine is told a job costs, by hand: logistic regression on 2x2 inputs and 3 classes is 15 values
(60 bytes); its FLOPs are the recipe's 300 a training sample (100 a forward pass)."""

from __future__ import annotations

import numpy as np
import torch

from netfl.learn.data.datasets import Dataset
from netfl.learn.federation.algorithms import ALGORITHMS, ClientInfo
from netfl.learn.federation.compression import CompressionSettings, CompressorSettings
from netfl.learn.federation.jobs import Job
from netfl.learn.federation.model_transfer import ModelTransfer
from netfl.learn.federation.probes import LocalLoss, UpdateNorm
from netfl.learn.federation.strategy_calls import StrategyCalls
from netfl.learn.federation.task_model import TaskModel, TaskSetup
from netfl.learn.federation.work_cost import WorkCost
from netfl.learn.models.user import builtin_recipe
from netfl.registry.learning_params import LocalSpec
from netfl.rng import RandomStreams

PARTS = [np.arange(0, 10), np.arange(10, 12)]  # 10 samples, 2 samples
SIZES = tuple(len(p) for p in PARTS)


def task() -> TaskModel:
    g = torch.Generator().manual_seed(0)
    data = Dataset(
        "toy",
        torch.rand(12, 1, 2, 2, generator=g),
        torch.arange(12) % 3,
        torch.rand(3, 1, 2, 2),
        torch.arange(3),
        3,
        (1, 2, 2),
    )
    recipe = builtin_recipe("logistic", data.input_shape, 3, hidden=(), flops_per_sample=300.0)
    local = LocalSpec(steps=5, batch_size=4, lr=0.1)
    return TaskModel(
        TaskSetup(data, PARTS, recipe, local),
        init_seed=0,
        extras=None,
        max_test_samples=None,
        device=torch.device("cpu"),
    )


def strategy(name: str = "fedavg"):
    cls = ALGORITHMS[name]
    return StrategyCalls(cls(cls.Params(), ClientInfo(SIZES, local_lr=0.1)))


def test_a_training_job_sends_the_model_both_ways() -> None:
    """Client 0: 300 x 5 steps x batch 4 = 6000 FLOPs; client 1 holds 2 samples: batches of 2, 3000 FLOPs."""
    tasks = [task()]
    cost = WorkCost(tasks, ModelTransfer(None, RandomStreams(0)))
    work = cost.train(strategy(), 7, Job(0, 0, 0, 5, 0.1, None))
    assert (work.client, work.job, work.download_bytes, work.flops, work.upload_bytes) == (0, 7, 60, 6000.0, 60)
    assert work.task is None and work.steps == 5  # one task: none named in the event log
    assert cost.train(strategy(), 8, Job(1, 0, 0, 5, 0.1, None)).flops == 3000.0
    assert cost.train(strategy("scaffold"), 9, Job(1, 0, 0, 5, 0.1, None)).upload_bytes == 120  # y and c
    assert WorkCost(tasks * 2, ModelTransfer(None, RandomStreams(0))).task_label(1) == 1


def test_compressed_links_send_fewer_bytes() -> None:
    """Top-10 % of 15 values: k = 2, 8 bytes each (value and index) = 16 up. QSGD with 16 levels: one float32 norm
    and 15 x (1 sign + 5 level) bits = 90 bits, 12 bytes: 16 down."""
    settings = CompressionSettings(CompressorSettings("topk", fraction=0.1), CompressorSettings("qsgd", levels=16))
    cost = WorkCost([task()], ModelTransfer(settings, RandomStreams(0)))
    work = cost.train(strategy(), 0, Job(0, 0, 0, 5, 0.1, None))
    assert (work.download_bytes, work.upload_bytes) == (16.0, 16.0)
    assert cost.upload_only(strategy(), 3, Job(0, 0, 0, 5, 0.1, None), 4).upload_bytes == 16.0


def test_a_probe_costs_its_jobs_its_compute_and_a_number_a_task() -> None:
    """A loss probe: the model down (60 bytes), a forward pass over the 10 samples (1000 FLOPs), 4 bytes up. An
    update-norm probe trains first: 6000 FLOPs more, and the strategy's download."""
    tasks = [task()]
    cost = WorkCost(tasks, ModelTransfer(None, RandomStreams(0)))
    asks_loss, asks_norm = strategy(), strategy()
    asks_loss.strategy.probe, asks_norm.strategy.probe = LocalLoss(), UpdateNorm()
    work = cost.probe(asks_loss, 2, 0, [])
    assert (work.download_bytes, work.flops, work.upload_bytes, work.note, work.report) == (
        60,
        1000.0,
        4,
        "probe",
        True,
    )
    work = cost.probe(asks_norm, 2, 0, [Job(0, 0, 0, 5, 0.1, None)])
    assert (work.download_bytes, work.flops) == (60, 6000.0)
