"""The partition kinds that split the samples by their labels, each a function of the labels, the number of
clients and the generator: :data:`SPLITS` is their registry (the kinds of :mod:`netfl.registry.partitions` but
``natural``, which :func:`~netfl.learn.data.client_parts.natural_parts` implements)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from netfl.registry.partitions import PartitionSpec

__all__ = ["SPLITS", "apportion", "split"]

#: Dirichlet draws retried before falling back to moving samples around.
_DIRICHLET_TRIES = 100

#: Rescaling rounds of the quantity-skew fit of kind "classes".
_FIT_ITERATIONS = 5000


def split(
    labels: np.ndarray, num_clients: int, spec: PartitionSpec, rng: np.random.Generator, weights: np.ndarray | None
) -> list[np.ndarray]:
    """Split positions 0..len(labels)-1 by ``spec.kind`` (unsorted parts); ``weights``: each client's share of the
    samples (quantity skew), for the kinds that take it. The spec is a checked one (``partition_spec``)."""
    return SPLITS[spec.kind](
        labels, num_clients, rng, alpha=spec.alpha, classes_per_client=spec.classes_per_client, weights=weights
    )


def _iid(
    labels: np.ndarray, num_clients: int, rng: np.random.Generator, *, weights=None, **_options
) -> list[np.ndarray]:
    n = len(labels)
    if weights is None:
        return np.array_split(rng.permutation(n), num_clients)
    return np.split(rng.permutation(n), np.cumsum(apportion(n, weights))[:-1])


def _dirichlet(
    labels: np.ndarray, num_clients: int, rng: np.random.Generator, *, alpha: float, **_options
) -> list[np.ndarray]:
    alpha = float(alpha)
    classes = np.unique(labels)
    by_class = [np.flatnonzero(labels == c) for c in classes]
    for _ in range(_DIRICHLET_TRIES):
        buckets: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
        for idx in by_class:
            idx = rng.permutation(idx)
            props = rng.dirichlet(np.full(num_clients, alpha))
            cuts = (np.cumsum(props)[:-1] * len(idx)).astype(np.int64)
            for client, chunk in enumerate(np.split(idx, cuts)):
                buckets[client].append(chunk)
        parts = [np.concatenate(b) for b in buckets]
        if min(len(p) for p in parts) >= 1:
            return parts
    # Fallback: give each empty client one sample from the largest client.
    for i in range(num_clients):
        if len(parts[i]) == 0:
            donor = max(range(num_clients), key=lambda j: len(parts[j]))
            parts[i] = parts[donor][-1:]
            parts[donor] = parts[donor][:-1]
    return parts


def _classes(
    labels: np.ndarray,
    num_clients: int,
    rng: np.random.Generator,
    *,
    classes_per_client: int,
    weights: np.ndarray | None = None,
    **_options,
) -> list[np.ndarray]:
    k = int(classes_per_client)
    classes = np.unique(labels)
    if not 1 <= k <= len(classes):
        raise ValueError(f"classes_per_client must be in 1..{len(classes)} (the number of labels), got {k}")
    # Deal labels round-robin from a shuffled cycle: client i gets positions
    # i*k .. i*k+k-1 mod C, which are distinct because k <= C.
    order = rng.permutation(classes)
    held = [order[(np.arange(k) + i * k) % len(order)] for i in range(num_clients)]
    holders: dict[int, list[int]] = {int(c): [] for c in classes}
    for client, cs in enumerate(held):
        for c in cs:
            holders[int(c)].append(client)
    share = None
    if weights is not None:  # quantity skew: each label's cut follows the clients' fitted factors
        share = _fit_shares(labels, num_clients, holders, weights)
    buckets: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
    for c, owners in holders.items():
        if not owners:
            continue
        idx = rng.permutation(np.flatnonzero(labels == c))
        if share is None:
            chunks = np.array_split(idx, len(owners))
        else:
            chunks = np.split(idx, np.cumsum(apportion(len(idx), share[owners, c]))[:-1])
        for client, chunk in zip(owners, chunks):
            buckets[client].append(chunk)
    return [np.concatenate(b) for b in buckets]


def _fit_shares(labels: np.ndarray, num_clients: int, holders: dict[int, list[int]], weights: np.ndarray) -> np.ndarray:
    """Real-valued samples per (client, label), zero where the client does not hold the label, with
    every label's total its sample count and every client's total ``weights[i]`` times the held samples:
    iterative proportional fitting (alternately rescale clients and labels) from the even split, so
    a label is cut among its holders in proportion to per-client factors. Returns a
    num_clients × (max label + 1) array; if the label assignment cannot give those totals, the
    closest fit (``partition_indices`` checks the heavy clients' share afterwards)."""
    size = int(max(holders)) + 1
    counts = np.zeros(size)
    held = np.zeros((num_clients, size), dtype=bool)
    for c, owners in holders.items():
        if owners:
            counts[c] = np.count_nonzero(labels == c)
            held[owners, c] = True
    target = np.asarray(weights, dtype=np.float64) / float(np.sum(weights)) * counts.sum()
    fit = held * (counts / np.maximum(held.sum(axis=0), 1))[None, :]
    for _ in range(_FIT_ITERATIONS):
        fit *= (target / fit.sum(axis=1))[:, None]
        col = fit.sum(axis=0)
        fit *= np.divide(counts, col, out=np.zeros_like(counts), where=col > 0)[None, :]
        if np.max(np.abs(fit.sum(axis=1) - target) / target) < 1e-9:
            break
    return fit


def _by_label(labels: np.ndarray, num_clients: int, rng: np.random.Generator, **_options) -> list[np.ndarray]:
    classes = np.unique(labels)
    owners: dict[int, list[int]] = {}
    for client in range(num_clients):
        owners.setdefault(int(classes[client % len(classes)]), []).append(client)
    parts: list[np.ndarray] = [np.empty(0, dtype=np.int64)] * num_clients
    for c, clients in owners.items():
        idx = np.flatnonzero(labels == c)
        if len(clients) > 1:
            idx = rng.permutation(idx)
        for client, chunk in zip(clients, np.array_split(idx, len(clients))):
            if len(chunk) == 0:
                raise ValueError(f"by_label: label {c} has {len(idx)} samples for {len(clients)} clients")
            parts[client] = chunk
    return parts


def apportion(total: int, weights: np.ndarray) -> np.ndarray:
    """Integer sizes summing to ``total`` in proportion to ``weights`` (largest remainder; ties: lower index)."""
    exact = np.asarray(weights, dtype=np.float64) / float(np.sum(weights)) * total
    sizes = np.floor(exact).astype(np.int64)
    short = total - int(sizes.sum())
    if short > 0:
        order = np.argsort(-(exact - sizes), kind="stable")
        sizes[order[:short]] += 1
    return sizes


#: Each label-splitting kind and its function: ``f(labels, num_clients, rng, *, alpha, classes_per_client,
#: weights)``, each taking the options it needs (weights: quantity skew, iid and classes only).
SPLITS: dict[str, Callable[..., list[np.ndarray]]] = {
    "iid": _iid,
    "dirichlet": _dirichlet,
    "classes": _classes,
    "by_label": _by_label,
}
