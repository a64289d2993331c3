"""Per-client vectors a strategy keeps across rounds (SCAFFOLD's c_i, FedDyn's h_i, MIFA's latest updates), held only
for the clients that have one, so that what a run holds grows with the devices that ever trained, not with the fleet:
a million devices of which ten thousand trained hold ten thousand vectors.

A client without a vector reads as ``default`` (zero, by default: ``get(client, like=x)``). The store is a plain
attribute of the strategy, so the default :meth:`~netfl.learn.federation.strategy.Strategy.state` checkpoints it.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping

import torch

__all__ = ["ClientStates"]


class ClientStates(MutableMapping[int, torch.Tensor]):
    """client -> its vector, for the clients that have one; ``nbytes``: what they hold."""

    def __init__(self) -> None:
        self._vectors: dict[int, torch.Tensor] = {}

    def __getitem__(self, client: int) -> torch.Tensor:
        return self._vectors[int(client)]

    def __setitem__(self, client: int, vector: torch.Tensor) -> None:
        if not isinstance(vector, torch.Tensor):
            raise TypeError(f"client {client}'s state must be a torch.Tensor, not {type(vector).__name__}")
        self._vectors[int(client)] = vector

    def __delitem__(self, client: int) -> None:
        del self._vectors[int(client)]

    def __iter__(self) -> Iterator[int]:
        return iter(self._vectors)

    def __len__(self) -> int:
        return len(self._vectors)

    def get(self, client: int, default: torch.Tensor | None = None, *, like: torch.Tensor | None = None):
        """The client's vector; else ``default``, or zeros shaped, typed and placed like ``like`` (not stored)."""
        found = self._vectors.get(int(client))
        if found is not None:
            return found
        if like is not None:
            return torch.zeros_like(like)
        return default

    @property
    def nbytes(self) -> int:
        """Bytes the stored vectors hold."""
        return sum(v.element_size() * v.numel() for v in self._vectors.values())

    def __repr__(self) -> str:
        return f"ClientStates({len(self)} clients, {self.nbytes:,} bytes)"
