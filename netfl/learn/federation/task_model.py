"""One model the federation trains (a task of ``tasks:``): its data and split, its global state and snapshots,
what its jobs cost in FLOPs and bytes, and its evaluation.

A task's module may be any ``torch.nn.Module``: its trainable parameters
are the vector strategies aggregate, and any strategy extras (Fed-CVaR-Avg's
threshold t) ride at the end of that vector; its buffers (BatchNorm's
running statistics) follow the task's rule, averaged or kept on each
device (see :class:`TaskModel`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from netfl.backend import BYTES_PER_VALUE, Evaluation
from netfl.errors import NetflWarning
from netfl.learn.data.client_parts import ClientParts
from netfl.learn.data.datasets import Dataset
from netfl.learn.models.builtin import forward_flops_per_sample
from netfl.learn.models.flat_model import Network
from netfl.learn.models.token_inputs import check_token_inputs
from netfl.learn.models.user import ModelRecipe, check_model
from netfl.learn.training.objective import ExtraScalars
from netfl.learn.training.reference import num_local_steps
from netfl.learn.training.replicas import Evaluator
from netfl.learn.training.runtime import parallel_map
from netfl.learn.training.trainer import Trainer
from netfl.registry.learning_params import LocalSpec


@dataclass(frozen=True)
class TaskSetup:
    """What one task is made of: its data, how it is split over the clients, its model and local recipe."""

    dataset: Dataset
    parts: ClientParts | Sequence[np.ndarray]
    model: ModelRecipe
    local: LocalSpec  # task.local as declared


class TaskModel:
    """One model the federation trains: its global state and snapshots, how its jobs train, what it costs.

    The state is the global vector (the module's trainable parameters, then any strategy extras) and the
    global buffers (BatchNorm's running statistics; empty for most models). Buffers follow the task's rule
    (``model.buffers``): ``average`` -- they travel with the model both ways (counted in the bytes) and the
    new global buffers are the sample-weighted mean of those the aggregated updates carried (a round without
    an update keeps them); ``local`` -- each device keeps the buffers of its last update that reached the
    server (FedBN's statistics; nothing travels), starting from the initial ones, and the test uses their
    sample-weighted mean over the devices that have some.
    """

    def __init__(
        self,
        setup: TaskSetup,
        *,
        init_seed: int,
        extras: ExtraScalars | None,
        max_test_samples: int | None,
        device: torch.device,
        training_path: str | None = None,
    ):
        torch.manual_seed(init_seed)  # initialised on the CPU, so every device starts from the same model
        recipe = setup.model
        dataset = setup.dataset
        module = recipe.build()
        check_token_inputs(module, recipe, dataset.name, {"x": dataset.train_x, "x_test": dataset.test_x})
        with warnings.catch_warnings():  # a model not finite from the start: the run says so as it diverges
            warnings.simplefilter("ignore", NetflWarning)
            check_model(module, recipe, dataset.train_x, dataset.train_y, dataset.num_classes)
        self.network = Network(module.to(device))
        self.model, self.layout = self.network.module, self.network.params  # what probes see (TaskView)
        self.recipe = recipe
        if device.type != "cpu":
            dataset = replace(
                dataset,
                train_x=dataset.train_x.to(device),
                train_y=dataset.train_y.to(device),
                test_x=dataset.test_x.to(device),
                test_y=dataset.test_y.to(device),
            )
        self.dataset = dataset
        parts = setup.parts if isinstance(setup.parts, ClientParts) else ClientParts.of(setup.parts)
        self._parts = parts  # every client's samples, client after client, in one array
        self._offsets = parts.offsets  # an array, not a list: ten million clients' offsets as 80 MB, not 400
        self.local = setup.local
        self.num_classes = dataset.num_classes
        limit = len(dataset.test_x) if max_test_samples is None else max_test_samples
        self.test_x, self.test_y = dataset.test_x[:limit], dataset.test_y[:limit]
        self.extra = len(extras) if extras is not None else 0
        self.buffers_rule = recipe.buffers
        # what travels: parameters and extras (the strategy may multiply them: SCAFFOLD's control variates),
        # and, under the average rule, the buffers
        self.model_bytes = BYTES_PER_VALUE * (self.layout.size + self.extra)
        self.buffer_bytes = BYTES_PER_VALUE * self.network.buffers.size if recipe.buffers == "average" else 0
        guard = recipe.guard  # a module of the user's file runs fenced: its errors name the file and line
        if recipe.flops_per_sample is not None:  # the user's figure: nothing to count
            self._train_flops, self._forward_flops = recipe.flops_per_sample, recipe.flops_per_sample / 3
        else:
            with guard():
                forward = forward_flops_per_sample(self.model, dataset.train_x[:1])
            self._train_flops, self._forward_flops = 3 * forward, forward
        vector = self.network.initial_params()
        if extras is not None:
            vector = torch.cat([vector, extras.initial.to(vector)])
        self.global_vector = vector
        self.global_buffers = self.network.initial_buffers()
        self.snapshots: dict[int, tuple[torch.Tensor, torch.Tensor]] = {0: (self.global_vector, self.global_buffers)}
        self.device_buffers: dict[int, torch.Tensor] = {}  # the local rule's per-device buffers
        self.trainer = Trainer(
            self.network, dataset.train_x, dataset.train_y, device=device, extras=extras, path=training_path,
            guard=guard,
        )  # fmt: skip
        self.evaluator = Evaluator(
            self.network, self.num_classes, device, channels_last=self.trainer.channels_last, guard=guard
        )

    def client_size(self, client: int) -> int:
        return int(self._offsets[client + 1] - self._offsets[client])

    def part(self, client: int) -> torch.Tensor:
        """The client's sample indices into the training set."""
        return torch.from_numpy(self._parts[client])

    def steps_of(self, client: int) -> int:
        return num_local_steps(self.client_size(client), self.local.batch_size, self.local.steps, self.local.epochs)

    def job_flops(self, client: int, steps: int) -> float:
        return float(self._train_flops * steps * min(self.local.batch_size, self.client_size(client)))

    def loss_flops(self, client: int) -> float:
        """A forward pass over the client's whole local data (a ``loss`` probe)."""
        return float(self._forward_flops * self.client_size(client))

    def model_part(self, vector: torch.Tensor) -> torch.Tensor:
        return vector[: self.layout.size] if self.extra else vector

    def client_data(self, client: int) -> tuple[torch.Tensor, torch.Tensor]:
        idx = self.part(client)
        return self.dataset.train_x[idx], self.dataset.train_y[idx]

    def job_buffers(self, client: int) -> torch.Tensor | None:
        """The buffers a client's job starts from: its own under the local rule, else those of the model."""
        return self.device_buffers.get(client) if self.buffers_rule == "local" else None

    def test_buffers(self) -> torch.Tensor:
        """The buffers the global model is tested with (see the class docstring)."""
        if self.buffers_rule != "local" or not self.device_buffers:
            return self.global_buffers
        clients = sorted(self.device_buffers)
        mean = sample_weighted_mean([self.device_buffers[c] for c in clients], [self.client_size(c) for c in clients])
        return mean.to(self.global_buffers)

    def local_loss(self, client: int) -> float:
        """Mean cross-entropy of the global model on the client's local data."""
        x, y = self.client_data(client)
        buffers = self.job_buffers(client)
        w = self.model_part(self.global_vector)
        return self.evaluator(w, buffers if buffers is not None else self.global_buffers, x, y)[1]

    def evaluate(self, vector: torch.Tensor | None = None) -> Evaluation:
        """The test set's accuracy and loss of ``vector``'s model part (default: the global vector's)."""
        vector = self.global_vector if vector is None else vector
        acc, loss, per_class = self.evaluator(
            self.model_part(vector), self.test_buffers(), self.test_x, self.test_y, parallel_map
        )
        return Evaluation(acc, loss, tuple(per_class))

    def new_buffers(self, updates: Sequence[tuple[int, int, torch.Tensor | None]]) -> None:
        """Take the buffers of the aggregated updates ``(client, samples, buffers)`` by the task's rule."""
        carried = [(c, n, b) for c, n, b in updates if b is not None and b.numel()]
        if not carried:
            return
        if self.buffers_rule == "local":
            for client, _, buffers in carried:
                self.device_buffers[client] = buffers
            return
        mean = sample_weighted_mean([b for _, _, b in carried], [n for _, n, _ in carried])
        self.global_buffers = mean.to(self.global_buffers)


def sample_weighted_mean(vectors: Sequence[torch.Tensor], samples: Sequence[float]) -> torch.Tensor:
    """The mean of ``vectors`` weighted by ``samples``, in float64, on the vectors' device (a GPU run's buffers
    live on the GPU: weights made on the CPU would not multiply them)."""
    stacked = torch.stack(list(vectors)).to(torch.float64)
    weights = torch.tensor([float(n) for n in samples], dtype=torch.float64, device=stacked.device)
    return (weights / weights.sum()) @ stacked
