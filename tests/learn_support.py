"""Learning test support: hand-written gradients, the minibatches the learner draws for a job, and strategies called
by hand (vectors, round contexts)."""

from __future__ import annotations

import torch

from netfl.backend import RoundContext
from netfl.learn.federation.algorithms import ALGORITHMS, ClientInfo
from netfl.learn.federation.task_model import TaskSetup
from netfl.learn.models.user import builtin_recipe
from netfl.learn.training.reference import minibatch_indices
from netfl.rng import RandomStreams

F64 = torch.float64


def vec(*values: float) -> torch.Tensor:
    """A float64 vector of ``values``."""
    return torch.tensor(values, dtype=F64)


def ctx(r: int, n: int = 0) -> RoundContext:
    """Round ``r`` at simulated second ``r``, ``n`` jobs delivered."""
    return RoundContext(round_index=r, sim_time_s=float(r), available=(), selected=(), delivered=tuple(range(n)))


def make(name: str, clients: ClientInfo, **params):
    """The strategy of algorithm ``name`` with ``params``."""
    cls = ALGORITHMS[name]
    return cls(cls.Params(**params), clients)


def linear_ce_gradient(w: torch.Tensor, x: torch.Tensor, y: torch.Tensor, classes: int) -> torch.Tensor:
    """d(mean cross-entropy)/d[W, b] of the linear model logits = x W^T + b, written out: (softmax - onehot) / n."""
    dim = x.shape[1]
    weight, bias = w[: classes * dim].view(classes, dim), w[classes * dim :]
    g = torch.softmax(x @ weight.T + bias, dim=1)
    g[torch.arange(len(y)), y] -= 1.0
    g /= len(y)
    return torch.cat([(g.T @ x).reshape(-1), g.sum(0)])


def job_minibatches(seed: int, client: int, job: int, part: torch.Tensor, batch: int, steps: int) -> torch.Tensor:
    """The minibatches (steps x batch, indices into the training set) the learner of a run with ``seed`` draws
    for ``job`` of ``client`` (whose samples are ``part``): its own generator, seeded by (seed, client, job)."""
    generator = torch.Generator().manual_seed(RandomStreams(seed).integer_seed("training", client, job))
    return part[minibatch_indices(len(part), batch, steps, generator)]


def task_setup(dataset, parts, model: str, hidden, local) -> TaskSetup:
    """A learner's task of a built-in model on ``dataset`` (the setup the assembly layer makes from a scenario)."""
    return TaskSetup(
        dataset, parts, builtin_recipe(model, dataset.input_shape, dataset.num_classes, hidden=tuple(hidden)), local
    )


def path_of(batched: bool) -> str | None:
    """The learner's training path: its own choice, or one job at a time by the reference (``batched=False``)."""
    return None if batched else "reference"


#: A user's MLP with BatchNorm1d, as a model file's source (one value per channel per sample).
BATCHNORM_MLP = '''
import torch
from torch import nn


class NormedMLP(nn.Module):
    """A Linear, BatchNorm1d (one value per channel per sample), ReLU, Linear."""

    def __init__(self, num_classes):
        super().__init__()
        self.hidden, self.bn, self.out = nn.Linear(64, 32), nn.BatchNorm1d(32), nn.Linear(32, num_classes)

    def forward(self, x):
        return self.out(torch.relu(self.bn(self.hidden(x.flatten(1)))))


class DotHeads(nn.Module):
    """Two 1-D weights, each a score through F.linear (a dot product per sample)."""

    def __init__(self, num_classes):
        super().__init__()
        self.a, self.b = nn.Parameter(torch.randn(64)), nn.Parameter(torch.randn(64))

    def forward(self, x):
        h = x.flatten(1)
        return torch.stack([nn.functional.linear(h, self.a), nn.functional.linear(h, self.b)], dim=1)
'''
