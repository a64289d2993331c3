"""The learner: real torch training and aggregation behind the engine's
:class:`~netfl.backend.TrainingBackend` interface.

Jobs are lazy: ``submit`` only records (client, global version); the
training runs when ``aggregate`` needs the update. A strategy with
``extra_params > 0`` (Fed-CVaR-Avg's threshold t) gets those scalars
appended to the flat vector: clients train them with the strategy's
``local_loss``, the strategy aggregates the extended vectors, and evaluation
uses the model part only. Each job's randomness
comes from its own torch generator seeded by (scenario seed, client, job),
so results do not depend on the order in which jobs are computed -- which
is what lets a later version batch them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from netfl.backend import Evaluation, RoundContext
from netfl.learn.algorithms import ClientUpdate, Strategy
from netfl.learn.datasets import Dataset
from netfl.learn.models import build_model, model_num_bytes, training_flops_per_sample
from netfl.learn.params import ParamLayout
from netfl.learn.training import evaluate, local_sgd, local_sgd_extended, num_local_steps, scheduled_lr
from netfl.rng import RandomStreams


@dataclass(frozen=True)
class LocalConfig:
    steps: int | None
    epochs: float | None
    batch_size: int
    lr: float
    weight_decay: float = 0.0
    lr_schedule: str = "constant"  # "constant" or "inverse_round" (lr / (round + 1))


@dataclass(frozen=True)
class _Job:
    client: int
    version: int
    steps: int
    round_index: int = 0


class Learner:
    def __init__(self, *, dataset: Dataset, parts: list[np.ndarray], model_name: str, hidden: list[int],
                 local: LocalConfig, strategy: Strategy, streams: RandomStreams,
                 max_test_samples: int | None = None):
        torch.manual_seed(streams.integer_seed("model_init"))
        self.model = build_model(model_name, dataset.input_shape, dataset.num_classes, hidden=tuple(hidden))
        self.layout = ParamLayout.of(self.model)
        self.dataset = dataset
        self.parts = [torch.as_tensor(p, dtype=torch.long) for p in parts]
        self.local = local
        self.strategy = strategy
        self.streams = streams
        self.num_classes = dataset.num_classes
        limit = len(dataset.test_x) if max_test_samples is None else max_test_samples
        self.test_x, self.test_y = dataset.test_x[:limit], dataset.test_y[:limit]
        self.extra = int(strategy.extra_params)
        self.model_bytes = model_num_bytes(self.model) + 4 * self.extra  # the extras travel with the model
        self._flops_per_sample = training_flops_per_sample(self.model, dataset.input_shape)
        self.global_vector = self.layout.flatten(self.model)
        if self.extra:
            initial = strategy.initial_extra().to(self.global_vector.dtype).reshape(-1)
            if initial.numel() != self.extra:
                raise ValueError(f"{strategy.name}: initial_extra() has {initial.numel()} values, "
                                 f"extra_params is {self.extra}")
            self.global_vector = torch.cat([self.global_vector, initial])
        self.version = 0
        self._snapshots: dict[int, torch.Tensor] = {0: self.global_vector}
        self._jobs: dict[int, _Job] = {}
        self._next_job = 0

    # ------------------------------------------------------- engine interface

    def client_size(self, client: int) -> int:
        return len(self.parts[client])

    def steps_of(self, client: int) -> int:
        return num_local_steps(self.client_size(client), self.local.batch_size, self.local.steps, self.local.epochs)

    def job_flops(self, client: int, steps: int | None = None) -> float:
        samples = (self.steps_of(client) if steps is None else steps) * min(self.local.batch_size,
                                                                             self.client_size(client))
        return float(self._flops_per_sample * samples)

    def submit(self, client: int, round_index: int, steps: int | None = None) -> int:
        job = self._next_job
        self._next_job += 1
        self._jobs[job] = _Job(client, self.version, self.steps_of(client) if steps is None else steps,
                               round_index=round_index)
        return job

    def cancel(self, job: int) -> None:
        self._jobs.pop(job, None)
        self._forget_unused_snapshots()

    def aggregate(self, context: RoundContext) -> int:
        updates = [self._train(job) for job in context.delivered]
        for job in context.delivered:
            del self._jobs[job]
        self.global_vector = self.strategy.aggregate(self.global_vector, updates, context)
        self.version += 1
        self._snapshots[self.version] = self.global_vector
        self._forget_unused_snapshots()
        return len(updates)

    def evaluate(self) -> Evaluation:
        acc, loss, per_class = evaluate(self.model, self.layout, self.model_vector, self.test_x, self.test_y,
                                        self.num_classes)
        return Evaluation(acc, loss, tuple(per_class))

    @property
    def model_vector(self) -> torch.Tensor:
        """The global model's parameters (the global vector without any strategy extras)."""
        return self.global_vector[:self.layout.size] if self.extra else self.global_vector

    @property
    def extra_vector(self) -> torch.Tensor:
        """The strategy's extra scalars in the global vector (empty for most strategies)."""
        return self.global_vector[self.layout.size:]

    # -------------------------------------------------------------- internals

    def _train(self, job_id: int) -> ClientUpdate:
        job = self._jobs[job_id]
        start = self._snapshots[job.version]
        idx = self.parts[job.client]
        generator = torch.Generator().manual_seed(self.streams.integer_seed("training", job.client, job_id))
        lr = scheduled_lr(self.local.lr, self.local.lr_schedule, job.round_index)
        if self.extra:
            end = local_sgd_extended(self.model, self.layout, start, self.dataset.train_x[idx],
                                     self.dataset.train_y[idx], steps=job.steps, batch_size=self.local.batch_size,
                                     lr=lr, extra_lr=self.strategy.extra_lr(lr), weight_decay=self.local.weight_decay,
                                     generator=generator, loss_fn=self.strategy.local_loss)
        else:
            end = local_sgd(self.model, self.layout, start, self.dataset.train_x[idx], self.dataset.train_y[idx],
                            steps=job.steps, batch_size=self.local.batch_size, lr=lr,
                            weight_decay=self.local.weight_decay, generator=generator)
        return ClientUpdate(job.client, len(idx), end - start, job.version, lr, job.steps)

    def _forget_unused_snapshots(self) -> None:
        needed = {j.version for j in self._jobs.values()} | {self.version}
        for version in [v for v in self._snapshots if v not in needed]:
            del self._snapshots[version]
