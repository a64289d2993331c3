"""The jobs in flight and their lazy training.

Jobs are lazy: a job only records (client, task, global version, steps);
the training runs when an aggregation (or a probe's report) needs the
updates, all of them at once, by the path the task's module allows
(:mod:`netfl.learn.training.trainer`): a fused kernel for MLPs, per-thread replicas
of any other module on a CPU, jobs stacked with ``torch.func`` on a GPU.
Each job's minibatches come from its own torch generator seeded by
(scenario seed, client, job), so a job trains on the same samples however
jobs are grouped or ordered, and whatever the thread count; every path
agrees with one-by-one training up to float rounding.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from netfl.learn.federation.algorithms import ClientUpdate
from netfl.learn.federation.task_model import TaskModel
from netfl.learn.training.objective import Correction
from netfl.learn.training.reference import minibatch_indices, scheduled_lr
from netfl.learn.training.trainer import TrainJob
from netfl.rng import RandomStreams

#: (task, version, client) -> the vector and buffers of that version as the client receives them.
Received = Callable[[int, int, int], tuple[torch.Tensor, torch.Tensor]]


@dataclass
class Job:
    client: int
    task: int
    version: int
    steps: int
    lr: float  # the client lr of the round the job started in
    correction: Correction | None  # the strategy's gradient correction, fixed when the job started
    delta: torch.Tensor | None = None  # its update y - x, once trained
    buffers: torch.Tensor | None = None  # the buffers it ended with, once trained (models with buffers)


@dataclass
class ProbeJobs:
    client: int
    jobs: tuple[int, ...]  # one training job per task if the probe trains, else none


class JobBook:
    """Every job and probe in flight by id (ids are shared: a probe takes one too), trained when needed.

    ``received`` says what a job starts from (the global model or its edge's, as the downlink delivers it);
    ``edge_of`` each client's edge server (-1: none), so that jobs of different edges are trained apart.
    """

    def __init__(
        self, tasks: Sequence[TaskModel], streams: RandomStreams, received: Received, edge_of: Callable[[int], int]
    ):
        self.tasks = tasks
        self._streams = streams
        self._received = received
        self._edge_of = edge_of
        self.jobs: dict[int, Job] = {}
        self.probes: dict[int, ProbeJobs] = {}
        self.next_id = 0

    def take_id(self) -> int:
        job, self.next_id = self.next_id, self.next_id + 1
        return job

    def new(
        self, client: int, task: int, version: int, round_index: int, correction: Correction | None, steps: int | None
    ) -> int:
        """A job of ``client`` on ``task`` from global ``version``: ``steps`` local steps (None: the task's), at the
        client lr of ``round_index``, with the strategy's ``correction``."""
        job = self.take_id()
        model = self.tasks[task]
        self.jobs[job] = Job(
            client,
            task,
            version,
            model.steps_of(client) if steps is None else steps,
            scheduled_lr(model.local.lr, model.local.lr_schedule, round_index),
            correction,
        )
        return job

    def cut(self, job: int, steps: int) -> None:
        """The job runs only its first ``steps`` local steps (its minibatches are the first ``steps`` of those it
        would have drawn); refused once it has trained, or for more steps than it has."""
        record = self.jobs[job]
        if record.delta is not None or not 1 <= steps <= record.steps:
            raise ValueError(f"job {job} cannot be cut to {steps} of its {record.steps} steps")
        record.steps = steps

    def versions_in_use(self) -> set[int]:
        """The global versions that jobs not trained yet start from."""
        return {j.version for j in self.jobs.values() if j.delta is None}

    def update(self, job_id: int) -> ClientUpdate:
        """The trained job's update, as the strategy sees it."""
        job = self.jobs[job_id]
        task = self.tasks[job.task]
        return ClientUpdate(
            job.client,
            task.client_size(job.client),
            job.delta,
            job.version,
            job.lr,
            job.steps,
            task=job.task,
            correction=job.correction,
            start=self._received(job.task, job.version, job.client)[0] if job.version in task.snapshots else None,
        )

    def train(self, job_ids: Sequence[int]) -> None:
        """Compute the updates y - x (and final buffers) of the jobs not trained yet, by the task's trainer.

        Jobs that start from the same model of the same task with the same minibatch size, lr and correction
        pull go to the trainer together (:mod:`netfl.learn.training.trainer`: fused or stacked chunks, or
        replicas in the worker threads), whatever their numbers of steps. Each job draws its minibatches from
        its own generator, so grouping and order change nothing but float rounding.
        """
        groups: dict[tuple, list[int]] = defaultdict(list)
        for job_id in sorted(set(job_ids)):
            job = self.jobs[job_id]
            if job.delta is None:
                model = self.tasks[job.task]
                batch = min(model.local.batch_size, model.client_size(job.client))
                pull = job.correction.pull if job.correction is not None else 0.0
                groups[(job.task, job.version, self._edge_of(job.client), batch, job.lr, pull)].append(job_id)
        for (task, version, _, batch, lr, _), members in groups.items():
            model = self.tasks[task]
            start, start_buffers = self._received(task, version, self.jobs[members[0]].client)
            jobs = [
                TrainJob(
                    self._minibatches(job_id, batch),
                    self._streams.integer_seed("job_random", self.jobs[job_id].client, job_id),
                    self.jobs[job_id].correction,
                    model.job_buffers(self.jobs[job_id].client),
                )
                for job_id in members
            ]
            ends = model.trainer.train(
                start, jobs, lr=lr, weight_decay=model.local.weight_decay, start_buffers=start_buffers
            )
            for job_id, (end, buffers) in zip(members, ends):
                self.jobs[job_id].delta = end.sub_(start) if end is not start else end - start
                self.jobs[job_id].buffers = buffers

    def _minibatches(self, job_id: int, batch: int) -> torch.Tensor:
        """The job's minibatches (steps x batch) as indices into its task's whole training set, drawn from the
        job's own generator."""
        job = self.jobs[job_id]
        part = self.tasks[job.task].part(job.client)
        generator = torch.Generator().manual_seed(self._streams.integer_seed("training", job.client, job_id))
        return part[minibatch_indices(len(part), batch, job.steps, generator)]
