"""Scenario -> the learner: each task's data split over the devices, the strategy, the learner itself.

Data is loaded here (torch); the simulated world never sees it, only the
:class:`~netfl.backend.TrainingBackend` the learner implements.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from netfl.config.budget import MAX_JOB_SAMPLES
from netfl.config.data import resolve_data_dir
from netfl.config.schema import Scenario
from netfl.errors import ScenarioError
from netfl.learn.algorithms import ClientInfo, build_strategy
from netfl.learn.datasets import load_dataset
from netfl.learn.learner import Learner, LocalConfig, TaskSetup
from netfl.learn.partition import ClientParts, partition_indices, sample_parts
from netfl.rng import RandomStreams


def _stream_keys(task: int) -> tuple[int, ...]:
    """Task 0 keeps the stream names single-task scenarios always had; task s > 0 adds its index."""
    return (task,) if task else ()


def build_task(scenario: Scenario, task: int, streams: RandomStreams, data_dir: Path | None) -> TaskSetup:
    """Load task ``task``'s data set and split it over the devices."""
    spec = scenario.tasks[task]
    keys = _stream_keys(task)
    where = "task" if len(scenario.tasks) == 1 else f"tasks[{task}]"
    dataset = load_dataset(
        spec.dataset.name,
        data_dir=resolve_data_dir(scenario, data_dir, task),
        test_fraction=spec.dataset.test_fraction,
        seed=streams.integer_seed("test_split", *keys),
    )
    if spec.dataset.max_train_samples is not None and spec.dataset.max_train_samples < len(dataset.train_y):
        keep = np.sort(
            streams.numpy("train_subset", *keys).choice(
                len(dataset.train_y), spec.dataset.max_train_samples, replace=False
            )
        )
        dataset = replace(dataset, train_x=dataset.train_x[keep], train_y=dataset.train_y[keep])
    part = spec.dataset.partition
    labels, rng = dataset.train_y.numpy(), streams.numpy("partition", *keys)
    try:
        if part.samples_per_client is not None:
            parts = sample_parts(
                labels,
                scenario.num_devices,
                part.samples_per_client,
                part.kind,
                rng,
                alpha=part.alpha,
                classes_per_client=part.classes_per_client,
            )
        else:
            parts = ClientParts.of(
                partition_indices(
                    labels,
                    scenario.num_devices,
                    part.kind,
                    rng,
                    alpha=part.alpha,
                    classes_per_client=part.classes_per_client,
                    exclusive=part.exclusive,
                    quantity_skew=part.quantity_skew,
                )
            )
    except ValueError as exc:
        hint = (
            "; give dataset.partition.samples_per_client to let devices share samples"
            if scenario.num_devices > len(labels)
            else ""
        )
        raise ScenarioError(
            str(scenario.source or scenario.name), [(f"{where}.dataset.partition", f"{exc}{hint}")]
        ) from None
    largest = int(parts.sizes.max())
    if spec.local.epochs is not None and spec.local.epochs * largest > MAX_JOB_SAMPLES:  # validate saw the mean
        raise ScenarioError(
            str(scenario.source or scenario.name),
            [
                (
                    f"{where}.local.epochs",
                    f"the largest client holds {largest:,} samples: a job of {spec.local.epochs:g} "
                    f"epochs would train on {spec.local.epochs * largest:.3g}, more than the "
                    f"{MAX_JOB_SAMPLES:.0e} netfl accepts per job",
                )
            ],
        )
    local = LocalConfig(
        spec.local.steps,
        spec.local.epochs,
        spec.local.batch_size,
        spec.local.lr,
        spec.local.weight_decay,
        spec.local.lr_schedule,
    )
    return TaskSetup(dataset, parts, spec.model.name, spec.model.hidden, local)


def build_learner(
    scenario: Scenario,
    tasks: Sequence[TaskSetup],
    streams: RandomStreams,
    participation: Sequence[float | None],
    device: str,
) -> Learner:
    """The learner of ``tasks`` with the scenario's strategy; ``participation``: each device's p (None: unknown)."""
    sizes = tuple(tuple(t.parts.sizes.tolist()) for t in tasks)
    local = scenario.task.local
    try:
        strategy = build_strategy(
            scenario.server.algorithm,
            ClientInfo(sizes[0], local.lr, tuple(participation), lr_schedule=local.lr_schedule, task_sizes=sizes),
        )
    except ValueError as exc:  # e.g. an algorithm that needs p_i with a policy that has none
        raise ScenarioError(str(scenario.source or scenario.name), [("server.algorithm", str(exc))]) from None
    return Learner(
        tasks,
        strategy=strategy,
        streams=streams,
        participants=scenario.server.round.asked,
        max_test_samples=scenario.eval.max_test_samples,
        device=device,
        on_divergence=scenario.server.on_divergence,
    )
