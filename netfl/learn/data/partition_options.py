"""The partition's two options over a kind: ``exclusive`` groups of clients that alone hold some labels, and
``quantity_skew``, a fraction of the clients holding a share of the samples.

Their rules (which kinds take them, not both, no client or label in two groups, fractions in (0, 1), no client
past the clients there are) are the partition's declaration's (:mod:`netfl.registry.partitions`); what depends on
the data (a label it lacks, too few samples) is checked here.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from netfl.learn.data.split_kinds import split
from netfl.registry.partitions import PartitionSpec, QuantitySkewSpec

__all__ = ["check_skew", "describe_ints", "skew_weights", "with_exclusive"]

#: How far (absolute) the heavy clients' share may fall from the asked one.
_SHARE_TOLERANCE = 0.01


def with_exclusive(
    labels: np.ndarray, num_clients: int, spec: PartitionSpec, rng: np.random.Generator
) -> list[np.ndarray]:
    """The groups of ``spec.exclusive``: their labels dealt out evenly within each group, then the other clients'
    share of the other labels by ``spec.kind`` (sorted parts; see
    :func:`~netfl.learn.data.partition.partition_indices`)."""
    exclusive = spec.exclusive
    present = np.unique(labels)
    present_set = {int(c) for c in present}
    client_group: dict[int, int] = {}
    label_group: dict[int, int] = {}
    for g, group in enumerate(exclusive):
        for c in group.clients:  # each < num_clients (fit_problems)
            client_group[c] = g
        for c in group.labels:
            if c not in present_set:
                raise ValueError(
                    f"exclusive[{g}].labels: label {c} is not in the data set "
                    f"(labels present: {describe_ints(present)})"
                )
            label_group[c] = g

    parts: list[np.ndarray] = [np.empty(0, dtype=np.int64)] * num_clients
    for g, group in enumerate(exclusive):
        idx = np.flatnonzero(np.isin(labels, group.labels))
        if len(idx) < len(group.clients):
            raise ValueError(
                f"exclusive[{g}]: labels {group.labels} have {len(idx)} samples for "
                f"{len(group.clients)} clients; every client needs at least one"
            )
        for client, chunk in zip(group.clients, np.array_split(rng.permutation(idx), len(group.clients))):
            parts[client] = chunk

    rest_clients = [c for c in range(num_clients) if c not in client_group]
    rest_labels = [c for c in present.tolist() if c not in label_group]
    if not rest_clients:
        if rest_labels:
            raise ValueError(
                f"exclusive: every client is in a group, so labels {rest_labels} would be held by "
                f"nobody; leave some clients out of the groups or give those labels to a group"
            )
    else:
        if not rest_labels:
            raise ValueError(
                f"exclusive: the groups take every label, so clients {describe_ints(rest_clients)} "
                f"would hold nothing; put them in a group or give fewer labels to the groups"
            )
        rest_idx = np.flatnonzero(np.isin(labels, rest_labels))
        if len(rest_clients) > len(rest_idx):
            raise ValueError(
                f"exclusive: {len(rest_clients)} clients outside the groups but only "
                f"{len(rest_idx)} samples of the remaining labels"
            )
        try:
            sub = split(labels[rest_idx], len(rest_clients), spec, rng, None)
        except ValueError as exc:
            raise ValueError(
                f"{exc} (among the {len(rest_clients)} clients and {len(rest_labels)} labels "
                f"outside the exclusive groups)"
            ) from None
        for client, p in zip(rest_clients, sub):
            parts[client] = rest_idx[np.asarray(p, dtype=np.int64)]
    return [np.sort(np.asarray(p, dtype=np.int64)) for p in parts]


def describe_ints(values: Any) -> str:
    """Sorted integers with runs of three or more shortened: ``0, 2..29``."""
    values = sorted(int(v) for v in values)
    runs: list[list[int]] = []
    for v in values:
        if runs and v == runs[-1][-1] + 1:
            runs[-1].append(v)
        else:
            runs.append([v])
    return ", ".join(f"{r[0]}..{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def skew_weights(
    num_clients: int, skew: QuantitySkewSpec, rng: np.random.Generator
) -> tuple[float, np.ndarray, np.ndarray]:
    """(share, sorted heavy client indices, per-client weights summing to 1)."""
    fraction, share = skew.clients, skew.share
    m = math.floor(fraction * num_clients + 0.5)
    if not 1 <= m <= num_clients - 1:
        raise ValueError(
            f"quantity_skew.clients: {fraction:.3g} of {num_clients} clients rounds to {m} "
            f"client(s); it must give between 1 and {num_clients - 1}"
        )
    heavy = rng.choice(num_clients, size=m, replace=False)
    weights = np.full(num_clients, (1.0 - share) / (num_clients - m))
    weights[heavy] = share / m
    return share, np.sort(heavy), weights


def check_skew(labels: np.ndarray, parts: list[np.ndarray], kind: str, share: float, heavy: np.ndarray) -> None:
    sizes = np.array([len(p) for p in parts])
    empty = np.flatnonzero(sizes == 0).tolist()
    if empty:
        raise ValueError(
            f"quantity_skew leaves client(s) {describe_ints(empty)} with no sample; use fewer "
            f"clients, a share closer to their fraction of the clients, or more data"
        )
    got = sizes[heavy].sum() / sizes.sum()
    chunks = len(heavy) * (len(np.unique(labels)) if kind == "classes" else 1)  # each rounds by < 1 sample
    if abs(got - share) > _SHARE_TOLERANCE + chunks / sizes.sum():
        raise ValueError(
            f"quantity_skew: the labels dealt to the clients (with this seed) do not let the heavy "
            f"clients hold {share:.1%} of the samples; the closest fit gives them {got:.1%} (a label's "
            f"samples go only to the clients holding it); use more clients, more classes_per_client, "
            f"or kind iid"
        )
