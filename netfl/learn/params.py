"""A model's parameters as one flat vector.

Updates, memories and aggregation are plain vector arithmetic on a flat
float32 tensor; ``ParamLayout`` turns it back into the named tensors that
``torch.func.functional_call`` needs. Keeping the model itself stateless
is also what lets many clients' vectors be stacked and trained together.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class ParamLayout:
    names: tuple[str, ...]
    shapes: tuple[torch.Size, ...]
    numels: tuple[int, ...]

    @classmethod
    def of(cls, model: nn.Module) -> ParamLayout:
        named = list(model.named_parameters())
        return cls(tuple(n for n, _ in named), tuple(p.shape for _, p in named), tuple(p.numel() for _, p in named))

    @property
    def size(self) -> int:
        return sum(self.numels)

    def flatten(self, model: nn.Module) -> torch.Tensor:
        return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).clone()

    def unflatten(self, vector: torch.Tensor) -> dict[str, torch.Tensor]:
        """Named views into ``vector`` (gradients flow back to it)."""
        return {
            name: chunk.view(shape)
            for name, chunk, shape in zip(self.names, torch.split(vector, self.numels), self.shapes)
        }
