"""Split a data set's samples among FL clients.

How data is spread over clients (uniform, label-skewed, few classes each) is
one of the main knobs of FL experiments, so the standard schemes live here
and are all driven by an explicit ``numpy.random.Generator`` for
reproducibility: the same generator state gives the same partition.
"""

from __future__ import annotations

import numpy as np

__all__ = ["PARTITION_KINDS", "partition_indices", "label_distribution"]

PARTITION_KINDS: tuple[str, ...] = ("iid", "dirichlet", "classes", "by_label")

#: Dirichlet draws retried before falling back to moving samples around.
_DIRICHLET_TRIES = 100


def partition_indices(
    labels: np.ndarray,
    num_clients: int,
    kind: str,
    rng: np.random.Generator,
    *,
    alpha: float | None = None,
    classes_per_client: int | None = None,
) -> list[np.ndarray]:
    """Return one sorted int64 array of sample indices per client.

    Kinds:

    - ``"iid"``: shuffle all samples and deal them out; sizes differ by ≤ 1.
    - ``"dirichlet"``: the usual label-skew split. For each class, draw client
      proportions from Dirichlet(``alpha``) and cut that class's shuffled
      samples accordingly; small ``alpha`` means each client sees few labels.
      Every client must get ≥ 1 sample (an empty client cannot train), so the
      whole draw is repeated up to 100 times; if some client is still empty,
      one sample is moved to it from the currently largest client.
    - ``"classes"``: each client holds ``classes_per_client`` distinct labels,
      assigned round-robin over a shuffled label list (so every label is used
      when ``num_clients * classes_per_client >= num_classes``); each label's
      samples are split evenly among the clients holding it. Samples of a
      label no client holds are left out.
    - ``"by_label"``: client i holds the samples of label ``i mod C`` (C the
      number of labels present), in order and without randomness in the
      assignment: Fed-CVaR-Avg's toy, where user i holds class i. Clients
      sharing a label split its shuffled samples evenly; labels >= the
      number of clients are left out.

    No index appears twice; ``"iid"`` and ``"dirichlet"`` use every sample.
    Raises ValueError for invalid arguments.
    """
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"labels must be 1-D, got shape {labels.shape}")
    n = len(labels)
    if num_clients < 1:
        raise ValueError(f"num_clients must be >= 1, got {num_clients}")
    if num_clients > n:
        raise ValueError(f"num_clients ({num_clients}) exceeds the number of samples ({n})")

    if kind == "iid":
        parts = np.array_split(rng.permutation(n), num_clients)
    elif kind == "dirichlet":
        if alpha is None:
            raise ValueError("partition kind 'dirichlet' needs alpha (> 0)")
        if not alpha > 0:
            raise ValueError(f"dirichlet alpha must be > 0, got {alpha}")
        parts = _dirichlet(labels, num_clients, float(alpha), rng)
    elif kind == "classes":
        if classes_per_client is None:
            raise ValueError("partition kind 'classes' needs classes_per_client (>= 1)")
        parts = _classes(labels, num_clients, int(classes_per_client), rng)
    elif kind == "by_label":
        parts = _by_label(labels, num_clients, rng)
    else:
        raise ValueError(
            f"unknown partition kind {kind!r} (accepted: {', '.join(PARTITION_KINDS)})"
        )
    return [np.sort(np.asarray(p, dtype=np.int64)) for p in parts]


def _dirichlet(
    labels: np.ndarray, num_clients: int, alpha: float, rng: np.random.Generator
) -> list[np.ndarray]:
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
    labels: np.ndarray, num_clients: int, k: int, rng: np.random.Generator
) -> list[np.ndarray]:
    classes = np.unique(labels)
    if not 1 <= k <= len(classes):
        raise ValueError(
            f"classes_per_client must be in 1..{len(classes)} (the number of labels), got {k}"
        )
    # Deal labels round-robin from a shuffled cycle: client i gets positions
    # i*k .. i*k+k-1 mod C, which are distinct because k <= C.
    order = rng.permutation(classes)
    held = [order[(np.arange(k) + i * k) % len(order)] for i in range(num_clients)]
    holders: dict[int, list[int]] = {int(c): [] for c in classes}
    for client, cs in enumerate(held):
        for c in cs:
            holders[int(c)].append(client)
    buckets: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
    for c, owners in holders.items():
        if not owners:
            continue
        idx = rng.permutation(np.flatnonzero(labels == c))
        for client, chunk in zip(owners, np.array_split(idx, len(owners))):
            buckets[client].append(chunk)
    return [np.concatenate(b) for b in buckets]


def _by_label(labels: np.ndarray, num_clients: int, rng: np.random.Generator) -> list[np.ndarray]:
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


def label_distribution(
    labels: np.ndarray, parts: list[np.ndarray], num_classes: int
) -> np.ndarray:
    """Return a num_clients × num_classes array of each client's label fractions.

    Rows sum to 1 (an empty client's row is all zeros). Used to describe the
    heterogeneity of a partition and to derive data-dependent participation
    probabilities.
    """
    labels = np.asarray(labels)
    if len(labels) and (labels.min() < 0 or labels.max() >= num_classes):
        raise ValueError(f"labels must be in 0..{num_classes - 1}")
    out = np.zeros((len(parts), num_classes), dtype=np.float64)
    for i, p in enumerate(parts):
        if len(p):
            counts = np.bincount(labels[np.asarray(p, dtype=np.int64)], minlength=num_classes)
            out[i] = counts / len(p)
    return out
