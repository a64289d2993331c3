"""The job book alone: ids, each job's steps and lr, cutting, and lazy training checked against one SGD step
written out by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from learn_support import job_minibatches, linear_ce_gradient

from netfl.learn.data.datasets import Dataset
from netfl.learn.federation.jobs import JobBook
from netfl.learn.federation.task_model import TaskModel, TaskSetup
from netfl.learn.models.user import builtin_recipe
from netfl.learn.training.objective import Correction
from netfl.registry.learning_params import LocalSpec
from netfl.rng import RandomStreams

SEED = 3
PARTS = [np.arange(0, 10), np.arange(10, 24)]


def book(schedule: str = "constant") -> JobBook:
    g = torch.Generator().manual_seed(0)
    data = Dataset(
        "toy", torch.rand(24, 1, 2, 2, generator=g), torch.arange(24) % 3, torch.rand(3, 1, 2, 2), torch.arange(3), 3,
        (1, 2, 2),
    )  # fmt: skip
    recipe = builtin_recipe("logistic", data.input_shape, 3, hidden=())
    local = LocalSpec(steps=5, batch_size=4, lr=0.1, lr_schedule=schedule)
    task = TaskModel(
        TaskSetup(data, PARTS, recipe, local), init_seed=0, extras=None, max_test_samples=None,
        device=torch.device("cpu"), training_path="reference",
    )  # fmt: skip
    return JobBook([task], RandomStreams(SEED), lambda t, v, c: task.snapshots[v], lambda client: -1)


def test_ids_steps_and_lr() -> None:
    """Jobs and probes share ids; a job takes the task's steps unless told, and the lr of its round's schedule."""
    jobs = book("inverse_round")
    assert jobs.new(0, 0, 0, 0, None, None) == 0 and jobs.take_id() == 1 and jobs.new(1, 0, 0, 3, None, 2) == 2
    assert (jobs.jobs[0].steps, jobs.jobs[0].lr) == (5, 0.1)
    assert (jobs.jobs[2].steps, jobs.jobs[2].lr) == (2, pytest.approx(0.1 / 4))  # gamma / (t + 1) in round 3
    assert jobs.versions_in_use() == {0}


def test_a_job_is_cut_before_it_trains_only() -> None:
    jobs = book()
    job = jobs.new(0, 0, 0, 0, None, None)
    for steps in (0, 6):
        with pytest.raises(ValueError, match="cannot be cut"):
            jobs.cut(job, steps)
    jobs.cut(job, 1)
    jobs.train([job])
    assert jobs.jobs[job].steps == 1 and jobs.versions_in_use() == set()
    with pytest.raises(ValueError, match="cannot be cut"):
        jobs.cut(job, 1)


def test_one_step_by_hand_and_the_same_update_however_jobs_are_grouped() -> None:
    """One step: delta = -gamma grad, the cross-entropy gradient on the job's own minibatch of 4 written out;
    a job trained with others (another client, a proximal pull) gets the update it gets alone."""
    jobs = book()
    task = jobs.tasks[0]
    alone = jobs.new(0, 0, 0, 0, None, 1)
    jobs.train([alone])
    batch = job_minibatches(SEED, 0, alone, task.part(0), 4, 1)[0]
    x, y = task.dataset.train_x[batch].flatten(1), task.dataset.train_y[batch]
    expected = -0.1 * linear_ce_gradient(task.global_vector, x, y, 3)
    torch.testing.assert_close(jobs.jobs[alone].delta, expected, rtol=1e-5, atol=1e-7)
    update = jobs.update(alone)
    assert (update.client, update.num_samples, update.steps, update.lr) == (0, 10, 1, 0.1)
    assert update.start is task.global_vector and update.delta is jobs.jobs[alone].delta

    grouped = book()  # the same job 0, trained with a longer job and a pulled one, listed last
    assert grouped.new(0, 0, 0, 0, None, 1) == alone
    others = [grouped.new(1, 0, 0, 0, None, 3), grouped.new(1, 0, 0, 0, Correction(pull=0.5), 2)]
    grouped.train([*reversed(others), alone])
    torch.testing.assert_close(grouped.jobs[alone].delta, jobs.jobs[alone].delta)
    assert all(grouped.jobs[j].delta is not None for j in others)
