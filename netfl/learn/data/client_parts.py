"""Every client's samples as one array of indices, and the two ways of making them that do not partition the
samples: each client drawing its own (:func:`sample_parts`, ``samples_per_client``) and each device holding one
real client of the data (:func:`natural_parts`, kind ``natural``).

The options are checked by the partition's declaration (:func:`netfl.registry.partitions.partition_spec`), which
the scenario validates ``dataset.partition`` with; what depends on the data (how many labels, how many clients)
is checked here.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from netfl.registry.partitions import partition_spec

__all__ = ["ClientParts", "index_dtype", "natural_parts", "sample_parts", "uniform_picks"]


def index_dtype(samples: int) -> np.dtype:
    """The narrowest of 16, 32 and 64 bits that holds the indices of a data set of ``samples`` samples."""
    return np.dtype(np.uint16 if samples <= 1 << 16 else np.int32 if samples <= 1 << 31 else np.int64)


class ClientParts:
    """Every client's sample indices in one array: client c holds ``indices[offsets[c]:offsets[c + 1]]``.

    One array, not one per client: a million clients' parts cost their indices and nothing per client. The
    indices are kept in the narrowest type that holds them (:func:`index_dtype`): ten million phones holding 20
    samples each of Fashion-MNIST's 60 000 keep 0.4 GB of indices, not 1.6 GB. A client's part reads as 32-bit
    indices at least (torch indexes with them as with 64-bit ones, not with 16-bit ones).
    """

    def __init__(self, indices: np.ndarray, offsets: np.ndarray):
        indices = np.asarray(indices)
        if indices.size == 0:
            kept = np.dtype(np.int32)
        elif indices.dtype.kind == "u" or indices.min() >= 0:
            kept = index_dtype(int(indices.max()) + 1)
        else:
            kept = np.dtype(np.int64)  # negative: kept as given, for the consumer to refuse
        self.indices = indices.astype(kept, copy=False)
        self.offsets = np.asarray(offsets, dtype=np.int64)
        if self.offsets[0] != 0 or self.offsets[-1] != len(self.indices) or np.any(np.diff(self.offsets) < 0):
            raise ValueError("offsets must rise from 0 to the number of indices")

    @classmethod
    def of(cls, parts: Sequence[np.ndarray]) -> ClientParts:
        sizes = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
        flat = np.concatenate([np.asarray(p, dtype=np.int64) for p in parts]) if parts else np.empty(0, np.int64)
        return cls(flat, np.concatenate([[0], np.cumsum(sizes)]))

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, client: int) -> np.ndarray:
        part = self.indices[self.offsets[client] : self.offsets[client + 1]]
        return part.astype(np.int32) if part.dtype.itemsize < 4 else part

    def __iter__(self):
        return (self[c] for c in range(len(self)))

    @property
    def sizes(self) -> np.ndarray:
        return np.diff(self.offsets)


#: Uniform picks drawn in one call of the generator (bounds the temporaries of ten million clients' picks).
_PICKS_PER_STEP = 1 << 22


def uniform_picks(rng: np.random.Generator, samples: int, count: int) -> np.ndarray:
    """``rng.integers(0, samples, size=count)`` -- the same values, leaving ``rng`` in the same state -- drawn a
    bounded step at a time into :func:`index_dtype`'s array: numpy draws an integer below 2**32 from the
    generator's next 32 bits whatever the output type, and the generator keeps an unused half of 64 bits from one
    call to the next, so the steps continue one stream."""
    if samples > 1 << 31:
        return rng.integers(0, samples, size=count)
    out = np.empty(count, dtype=index_dtype(samples))
    for first in range(0, count, _PICKS_PER_STEP):
        last = min(count, first + _PICKS_PER_STEP)
        out[first:last] = rng.integers(0, samples, size=last - first, dtype=np.int32)
    return out


def sample_parts(
    labels: np.ndarray,
    num_clients: int,
    samples_per_client: int,
    kind: str,
    rng: np.random.Generator,
    *,
    alpha: float | None = None,
    classes_per_client: int | None = None,
) -> ClientParts:
    """Give every client ``samples_per_client`` samples drawn from ``rng``, so clients may outnumber samples.

    ``"iid"``: uniformly; ``"dirichlet"``: each client's label mix ~ Dirichlet(``alpha``);
    ``"classes"``: each client's mix is uniform over ``classes_per_client`` random labels. A client's
    label counts are multinomial in its mix; each label's samples are then dealt to the clients that
    asked for them, without replacement while the label has enough samples for all of them (the
    clients' data are disjoint, as in a partition) and with replacement otherwise (devices outnumber
    samples: the data are shared).
    """
    labels = np.asarray(labels)
    n, k = len(labels), int(samples_per_client)
    partition_spec(
        kind=kind, samples_per_client=samples_per_client, alpha=alpha, classes_per_client=classes_per_client
    )  # the partition's rules: a kind that samples, its parameters
    if num_clients < 1 or n < 1:
        raise ValueError(f"need clients >= 1 and samples >= 1, got {num_clients}, {n}")
    offsets = np.arange(num_clients + 1, dtype=np.int64)
    offsets *= k
    if kind == "iid":
        total = num_clients * k
        picks = rng.permutation(n)[:total] if total <= n else uniform_picks(rng, n, total)
        return ClientParts(picks, offsets)
    present = np.unique(labels)
    num_labels = len(present)
    if kind == "dirichlet":
        mix = rng.dirichlet(np.full(num_labels, float(alpha)), size=num_clients)
    else:
        c = int(classes_per_client or 0)
        if not 1 <= c <= num_labels:
            raise ValueError(f"classes_per_client must be in 1..{num_labels}, got {classes_per_client}")
        chosen = np.argsort(rng.random((num_clients, num_labels)), axis=1)[:, :c]
        mix = np.zeros((num_clients, num_labels))
        np.put_along_axis(mix, chosen, 1.0 / c, axis=1)
    counts = rng.multinomial(k, mix / mix.sum(axis=1, keepdims=True))  # clients x labels
    positions = np.arange(num_labels, dtype=np.min_scalar_type(num_labels))  # narrow: one per sample of each client
    slot_label = np.repeat(np.tile(positions, num_clients), counts.ravel())  # client-major slots
    indices = np.empty(num_clients * k, dtype=index_dtype(n))
    for position, label in enumerate(present):
        slots = np.flatnonzero(slot_label == position)
        pool = np.flatnonzero(labels == label)
        if len(slots) <= len(pool):
            indices[slots] = rng.permutation(pool)[: len(slots)]
        else:
            indices[slots] = pool[rng.integers(0, len(pool), size=len(slots))]
    return ClientParts(indices, offsets)


def natural_parts(
    client: np.ndarray, num_devices: int, pick: str, rng: np.random.Generator
) -> tuple[ClientParts, np.ndarray]:
    """Each device holds one real client's training samples: ``client`` gives each sample's client id (0..C-1,
    every id holding samples). Returns the parts and the client each device holds.

    With as many devices as clients, device d holds client d. With fewer, ``pick`` chooses which clients take
    part (the rest are left out): ``random``, a draw from ``rng`` without replacement; ``first``, the lowest
    ids; ``largest``, those with the most samples (ties: the lower id). The chosen clients go to the devices in
    ascending id order. More devices than clients is refused (a device without samples cannot train, and
    copying a client onto two devices would make them twins).
    """
    client = np.asarray(client, dtype=np.int64)
    sizes = np.bincount(client)
    num_clients = len(sizes)
    if num_devices > num_clients:
        raise ValueError(
            f"{num_devices:,} devices but the data names {num_clients:,} clients: each device holds one real "
            f"client's samples; use at most {num_clients:,} devices, or a kind that splits the samples (iid, "
            "dirichlet, ...)"
        )
    pick = partition_spec(kind="natural", pick=pick).pick  # random, first or largest
    if pick == "random":
        chosen = np.sort(rng.choice(num_clients, size=num_devices, replace=False))
    elif pick == "first":
        chosen = np.arange(num_devices)
    else:  # largest
        chosen = np.sort(np.argsort(-sizes, kind="stable")[:num_devices])
    by_client = np.argsort(client, kind="stable")  # each client's samples together, in their original order
    starts = np.concatenate([[0], np.cumsum(sizes)])
    parts = [by_client[starts[c] : starts[c + 1]] for c in chosen]
    return ClientParts.of(parts), chosen
