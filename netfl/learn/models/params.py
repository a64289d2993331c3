"""A model's state as flat vectors: its trainable parameters, and its buffers.

Updates, memories and aggregation are plain vector arithmetic on a flat
float32 tensor; ``ParamLayout`` turns it back into the named tensors that
``torch.func.functional_call`` needs. Keeping the module itself stateless
is also what lets many clients' vectors be stacked and trained together.

Buffers (BatchNorm's running statistics) are state too, but no gradient
moves them, so they are kept apart (:class:`BufferLayout`): an algorithm
aggregates parameter updates, and the learner handles buffers by the task's
rule (``model.buffers``). Parameters a module freezes (``requires_grad =
False``) are neither: they stay in the module as it was built.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class ParamLayout:
    """The trainable parameters (``requires_grad``), in ``named_parameters`` order, as one flat vector."""

    names: tuple[str, ...]
    shapes: tuple[torch.Size, ...]
    numels: tuple[int, ...]

    @classmethod
    def of(cls, model: nn.Module) -> ParamLayout:
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        return cls(tuple(n for n, _ in named), tuple(p.shape for _, p in named), tuple(p.numel() for _, p in named))

    @property
    def size(self) -> int:
        return sum(self.numels)

    def flatten(self, model: nn.Module) -> torch.Tensor:
        params = dict(model.named_parameters())
        return torch.cat([params[n].detach().reshape(-1) for n in self.names]).clone()

    def unflatten(self, vector: torch.Tensor) -> dict[str, torch.Tensor]:
        """Named views into ``vector`` (gradients flow back to it)."""
        return {
            name: chunk.view(shape)
            for name, chunk, shape in zip(self.names, torch.split(vector, self.numels), self.shapes)
        }


@dataclass(frozen=True)
class BufferLayout:
    """The module's buffers, in ``named_buffers`` order, as one float32 vector (integer buffers such as
    BatchNorm's ``num_batches_tracked`` count exactly up to 2^24 there, and are rounded back)."""

    names: tuple[str, ...]
    shapes: tuple[torch.Size, ...]
    numels: tuple[int, ...]
    dtypes: tuple[torch.dtype, ...]

    @classmethod
    def of(cls, model: nn.Module) -> BufferLayout:
        named = list(model.named_buffers())
        return cls(
            tuple(n for n, _ in named),
            tuple(b.shape for _, b in named),
            tuple(b.numel() for _, b in named),
            tuple(b.dtype for _, b in named),
        )

    @property
    def size(self) -> int:
        return sum(self.numels)

    def __bool__(self) -> bool:
        return bool(self.names)

    def flatten(self, model: nn.Module) -> torch.Tensor:
        return self.pack(dict(model.named_buffers()))

    def pack(self, buffers: dict[str, torch.Tensor]) -> torch.Tensor:
        """The flat float32 vector of ``buffers`` (named as in the module)."""
        if not self.names:
            return torch.zeros(0)
        return torch.cat([buffers[n].detach().reshape(-1).to(torch.float32) for n in self.names])

    def unflatten(self, vector: torch.Tensor) -> dict[str, torch.Tensor]:
        """Named tensors of each buffer's own dtype: views into ``vector`` for float32 buffers (so a module that
        updates its buffers in place, as BatchNorm does in training, writes into ``vector``), copies otherwise
        (write those back with :meth:`pack`)."""
        out = {}
        for name, chunk, shape, dtype in zip(self.names, torch.split(vector, self.numels), self.shapes, self.dtypes):
            view = chunk.view(shape)
            if dtype == torch.float32:
                out[name] = view
            elif dtype.is_floating_point:
                out[name] = view.to(dtype)
            else:
                out[name] = view.round().to(dtype)
        return out
