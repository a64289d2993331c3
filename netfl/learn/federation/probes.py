"""Probes: what the server asks every eligible client before it decides who trains what.

A strategy that assigns work from the clients' own numbers (MMFL's optimal
sampling) sets ``Strategy.probe`` to a :class:`Probe`. The learner runs any
probe the same way: each eligible client downloads every task's model,
trains one job per task if the probe ``trains`` (a client later assigned
that task only uploads the job, it does not train again), computes
``flops`` more per task, and uploads one number per task, ``report``; the
strategy's ``assign`` decides from the reports. A new kind of probe is a new
subclass; the learner does not change.

``report`` and ``flops`` receive the task's model as a :class:`TaskView`
(the learner's ``TaskModel``: the global model, the client's data, analytic
costs), so a probe can compute whatever a client could from the model it
downloaded and its local data.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar, Protocol

import torch
from torch import nn

from netfl.learn.models.params import ParamLayout


class TaskView(Protocol):
    """What a probe may use of one task (the learner's TaskModel)."""

    model: nn.Module  # a recipe: run it with ``functional_call(model, layout.unflatten(w), ...)``
    layout: ParamLayout
    global_vector: torch.Tensor  # the global model (and any strategy extras at its end)

    def client_data(self, client: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The client's local samples and labels."""

    def local_loss(self, client: int) -> float:
        """Mean cross-entropy of the global model on the client's data."""

    def loss_flops(self, client: int) -> float:
        """FLOPs of a forward pass over the client's data."""


class TrainedJob(Protocol):
    """What a probe that trains sees of a job (a ClientUpdate)."""

    delta: torch.Tensor  # y - x
    lr: float | None  # the client lr it trained with


class Probe(ABC):
    #: True: the client trains one job per task from the global model for its report (its ``update``)
    trains: ClassVar[bool] = False

    def flops(self, task: TaskView, client: int) -> float:
        """Compute the report costs the client on one task, beyond any training job."""
        return 0.0

    @abstractmethod
    def report(self, task: TaskView, client: int, update: TrainedJob | None) -> float:
        """The number the client reports for one task (``update``: its job's, if the probe trains)."""


class UpdateNorm(Probe):
    """``||y - x|| / lr`` of a job trained from the global model (MMFL's ``norms: update``)."""

    trains = True

    def report(self, task: TaskView, client: int, update: TrainedJob | None) -> float:
        return float(torch.linalg.vector_norm(update.delta)) / update.lr


class LocalLoss(Probe):
    """The global model's mean loss on the client's data: forward passes only (MMFL's ``norms: loss``)."""

    def flops(self, task: TaskView, client: int) -> float:
        return task.loss_flops(client)

    def report(self, task: TaskView, client: int, update: TrainedJob | None) -> float:
        return task.local_loss(client)
