"""Update compression: what a device sends instead of its update, and how many bytes that is on the air.

Two compressors (``server.compression``), each a function of a flat vector
and the exact size of what it sends:

* **top-k** (Stich, Cordonnier & Jaggi, "Sparsified SGD with Memory",
  NeurIPS 2018): the k = ceil(fraction x d) coordinates of largest magnitude,
  the rest zero. Sent: k float32 values and k int32 indices, 8k bytes.
* **QSGD** (Alistarh, Grubic, Li, Tomioka & Vojnovic, NeurIPS 2017), s
  levels: for each bucket v of the vector (the whole vector by default),
  ``l_i = floor(|v_i| s / ||v||)``, ``xi_i = (l_i + 1) / s`` with probability
  ``|v_i| s / ||v|| - l_i``, else ``l_i / s``, and ``Q(v)_i = ||v|| sign(v_i) xi_i``:
  unbiased, ``E[Q(v)] = v``. Sent: a float32 norm per bucket and, per
  coordinate, a sign bit and ceil(log2(s + 1)) bits for the level, packed
  into whole bytes at the end (the paper's Elias coding of the levels, which
  is smaller, is not what is counted).

**Error feedback** (Stich et al.; Karimireddy et al., EF-SGD, ICML 2019): the
device keeps the memory e of what it has not sent yet, compresses
``p = Delta + e`` and keeps ``e <- p - C(p)``. The memory lives on the device
(here: a vector per client, kept in checkpoints) and changes when its update
reaches the server: a lost upload leaves it as it was, the device committing
its new memory on the server's acknowledgement, as SCAFFOLD's control
variates do.

On the uplink the device compresses its update and the server uses the
decompressed vector in place of the update. On the downlink (QSGD only) the
server quantises each new global model once, one draw per model version, as
a broadcast every device hears alike; devices train from the dequantised
model, and their updates are taken from it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from netfl.registry.compression import COMPRESSORS

#: Bytes of one value or index on the air (float32, int32).
VALUE_BYTES = 4


def topk_count(d: int, fraction: float) -> int:
    """k = ceil(fraction x d), at least 1 (rounded to 9 decimals first: 1% of 1000 is 10, not 11)."""
    return max(1, min(d, math.ceil(round(fraction * d, 9))))


def topk(v: torch.Tensor, k: int) -> torch.Tensor:
    """The k coordinates of ``v`` largest in magnitude; the others zero."""
    out = torch.zeros_like(v)
    idx = torch.topk(v.abs(), k, sorted=False).indices
    out[idx] = v[idx]
    return out


def level_bits(levels: int) -> int:
    """Bits of one QSGD level in 0..s: ceil(log2(s + 1))."""
    return max(1, math.ceil(math.log2(levels + 1)))


def qsgd(v: torch.Tensor, levels: int, generator: torch.Generator, bucket: int | None = None) -> torch.Tensor:
    """QSGD's stochastic quantisation of ``v`` to ``levels`` levels, per bucket of ``bucket`` coordinates."""
    d = v.numel()
    size = d if bucket is None else min(bucket, d)  # a bucket larger than the vector is the whole vector
    pad = -d % size
    flat = torch.cat([v.reshape(-1), v.new_zeros(pad)]) if pad else v.reshape(-1)
    rows = flat.view(-1, size)
    norms = torch.linalg.vector_norm(rows, dim=1, keepdim=True)
    scaled = torch.where(norms > 0, rows.abs() * levels / torch.where(norms > 0, norms, 1), 0)
    lower = torch.floor(scaled)
    # drawn on the CPU (the same numbers whatever the device), then moved where the vector is
    u = torch.rand(rows.shape, generator=generator, dtype=torch.float64).to(rows)
    xi = (lower + (u < scaled - lower).to(rows.dtype)) / levels
    return (norms * torch.sign(rows) * xi).reshape(-1)[:d].view_as(v)


@dataclass(frozen=True)
class CompressorSettings:
    """One direction's compressor as plain values (the assemble layer copies ``server.compression``'s into it):
    ``topk`` keeps the ``fraction`` of the coordinates largest in magnitude; ``qsgd`` quantises to ``levels`` levels
    per ``bucket`` coordinates (None: the whole vector); ``error_feedback``: the device's memory e (uplink only)."""

    kind: str  # a name of netfl.registry.compression.COMPRESSORS: "topk" or "qsgd"
    fraction: float | None = None
    levels: int | None = None
    bucket: int | None = None
    error_feedback: bool = False

    def __post_init__(self):
        if self.kind not in COMPRESSORS:
            raise ValueError(f"a compressor's kind is {' or '.join(COMPRESSORS)}, not {self.kind!r}")
        needed = IMPLEMENTATIONS[self.kind].needs
        if getattr(self, needed) is None:
            raise ValueError(f"a {self.kind} compressor needs its {needed}")


@dataclass(frozen=True)
class CompressionSettings:
    """What is compressed on the air: the update on the uplink, the model on the downlink (None: sent whole)."""

    uplink: CompressorSettings | None = None
    downlink: CompressorSettings | None = None


class Compressor:
    """One direction's compressor: ``apply`` to a vector, ``bytes`` of what it sends."""

    def __init__(self, settings: CompressorSettings):
        self.kind = settings.kind
        self.fraction = settings.fraction
        self.levels = settings.levels
        self.bucket = settings.bucket
        self.error_feedback = settings.error_feedback

    def apply(self, v: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        return IMPLEMENTATIONS[self.kind].apply(self, v, generator)

    def bytes(self, d: int) -> int:
        """Bytes on the air for a vector of d values."""
        return IMPLEMENTATIONS[self.kind].bytes(self, d)


@dataclass(frozen=True)
class Implementation:
    """A compressor's rule: the setting it needs, the compressed vector, and the bytes it sends for d values."""

    needs: str
    apply: Callable[[Compressor, torch.Tensor, torch.Generator], torch.Tensor]
    bytes: Callable[[Compressor, int], int]


def _topk_apply(c: Compressor, v: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    return topk(v, topk_count(v.numel(), c.fraction))


def _topk_bytes(c: Compressor, d: int) -> int:
    return 2 * VALUE_BYTES * topk_count(d, c.fraction)


def _qsgd_apply(c: Compressor, v: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    return qsgd(v, c.levels, generator, c.bucket)


def _qsgd_bytes(c: Compressor, d: int) -> int:
    buckets = 1 if c.bucket is None else -(-d // c.bucket)
    return VALUE_BYTES * buckets + math.ceil(d * (1 + level_bits(c.levels)) / 8)


#: Each compressor of :data:`netfl.registry.compression.COMPRESSORS` (names, papers, what each sends), by name.
IMPLEMENTATIONS: dict[str, Implementation] = {
    "topk": Implementation("fraction", _topk_apply, _topk_bytes),
    "qsgd": Implementation("levels", _qsgd_apply, _qsgd_bytes),
}


class Uplink:
    """The devices' side of uplink compression: each client's error memory, and its compressed updates."""

    def __init__(self, compressor: Compressor):
        self.compressor = compressor
        self.memory: dict[int, torch.Tensor] = {}  # e of each client that has sent a compressed update

    def send(self, client: int, delta: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """What the server receives for ``delta`` from ``client`` (its memory committed when it arrives)."""
        if not self.compressor.error_feedback:
            return self.compressor.apply(delta, generator)
        memory = self.memory.get(client)
        p = delta if memory is None else delta + memory
        sent = self.compressor.apply(p, generator)
        self.memory[client] = p - sent
        return sent
