"""What a strategy may change in a client's local objective, in a form the training kernels apply.

Two pieces, both optional and both owned by the strategy
(:class:`~netfl.learn.federation.strategy.Strategy`):

* :class:`Correction` -- a term added to every local gradient, linear in
  the parameters: ``a (w - w0) + b``, with w0 the global vector the job
  started from. FedProx's proximal term (gradient of mu/2 ||w - w0||^2:
  a = mu) and SCAFFOLD's control-variate correction (b = c - c_i) are both
  of this form, so one hook in every kernel serves them and costs nothing
  for jobs without one.
* :class:`ExtraScalars` -- trainable scalars a client optimises beside the
  model (Fed-CVaR-Avg's threshold t), with the loss that uses them and
  their own step size. They ride at the end of the flat vector.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Correction:
    """``pull * (w - w0) + shift``, added to each local gradient of the model's parameters (not to extras).

    ``pull`` (a scalar) pulls w back towards the start w0; ``shift`` (a vector of the model's size, or None)
    is a constant per job. A strategy may subclass this to carry what it needs back at aggregation
    (the job's :class:`~netfl.learn.federation.strategy.ClientUpdate` holds the correction it trained with).
    """

    pull: float = 0.0
    shift: torch.Tensor | None = None

    def term(self, w: torch.Tensor, w0: torch.Tensor) -> torch.Tensor:
        """The correction at ``w`` for a job that started from ``w0``."""
        if self.shift is None:
            return self.pull * (w - w0)
        return self.pull * (w - w0) + self.shift if self.pull else self.shift


class ExtraScalars(ABC):
    """Trainable scalars appended to the model's flat vector (model first, extras last).

    They travel with the model (download, upload, aggregation); evaluation uses the model part only.
    A job trains both on ``objective`` by SGD: the model at the job's lr, the extras at ``lr(job lr)``.
    """

    def __init__(self, initial: Sequence[float]):
        self.initial = torch.tensor(list(initial), dtype=torch.float32)

    def __len__(self) -> int:
        return int(self.initial.numel())

    def lr(self, model_lr: float) -> float:
        """The extras' SGD step size in a job that trains the model at ``model_lr``."""
        return model_lr

    @abstractmethod
    def objective(self, loss: torch.Tensor, extra: torch.Tensor) -> torch.Tensor:
        """A client's minibatch objective from the task's minibatch loss (mean cross-entropy) and the extras."""
