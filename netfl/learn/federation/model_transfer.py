"""What the server and the devices exchange, as the learner applies it (compression:
:mod:`netfl.learn.federation.compression`).

On the downlink (QSGD only) the server quantises each new global model once,
one draw per model version and sender (the server, or each edge server), as a
broadcast every device hears alike; devices train from the dequantised model.
On the uplink each device compresses its update, with its own error memory,
and the server uses the decompressed vector in place of the update. The
draws come from the scenario's streams (``downlink`` by task, version and
edge; ``compression`` by client and job), so they do not depend on the order
in which jobs are trained.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import torch

from netfl.learn.federation.algorithms import ClientUpdate
from netfl.learn.federation.compression import CompressionSettings, Compressor, Uplink
from netfl.rng import RandomStreams


class ModelTransfer:
    """The downlink's quantised broadcasts (kept while a job may start from them) and the uplink's compressed
    updates with each device's error memory."""

    def __init__(self, settings: CompressionSettings | None, streams: RandomStreams):
        up = settings.uplink if settings is not None else None
        down = settings.downlink if settings is not None else None
        self.uplink = Uplink(Compressor(up)) if up is not None else None
        self.downlink = Compressor(down) if down is not None else None
        self._streams = streams
        self._broadcasts: dict[tuple[int, int, int], torch.Tensor] = {}  # (task, version, edge) -> model quantised

    @property
    def uplink_compressor(self) -> Compressor | None:
        return self.uplink.compressor if self.uplink is not None else None

    def received(self, vector: torch.Tensor, task: int, version: int, edge: int) -> torch.Tensor:
        """``vector`` (version ``version`` of task ``task``, from edge server ``edge``, -1 for the server) as a
        device receives it: as it is, or quantised for the downlink, one draw per version and sender."""
        if self.downlink is None:
            return vector
        key = (task, version, edge)
        if key not in self._broadcasts:
            seed = self._streams.integer_seed("downlink", task, version, *((edge,) if edge >= 0 else ()))
            self._broadcasts[key] = self.downlink.apply(vector, generator=torch.Generator().manual_seed(seed))
        return self._broadcasts[key]

    def sent(self, jobs: Sequence[int], updates: list[ClientUpdate]) -> list[ClientUpdate]:
        """The updates as the server decompresses them from what the devices sent, each device's error memory
        taken in job order (the order it sent them in)."""
        if self.uplink is None:
            return updates
        out = list(updates)
        for i in sorted(range(len(jobs)), key=lambda i: jobs[i]):
            u = updates[i]
            generator = torch.Generator().manual_seed(self._streams.integer_seed("compression", u.client, jobs[i]))
            out[i] = replace(u, delta=self.uplink.send(u.client, u.delta, generator))
        return out

    def forget(self, needed: set[int], older_than: int | None = None) -> None:
        """Drop the broadcasts of versions no job needs any longer, and, given ``older_than``, those of every
        earlier version (edge models change every round: an older broadcast is never heard again)."""
        for key in [
            k for k in self._broadcasts if k[1] not in needed or (older_than is not None and k[1] < older_than)
        ]:
            del self._broadcasts[key]
