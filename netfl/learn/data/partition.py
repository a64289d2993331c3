"""Split a data set's samples among FL clients.

How data is spread over clients (uniform, label-skewed, few classes each) is
one of the main knobs of FL experiments, so the standard schemes live here
and are all driven by an explicit ``numpy.random.Generator`` for
reproducibility: the same generator state gives the same partition.

The kinds are :mod:`~netfl.learn.data.split_kinds`' (by label) and
:func:`~netfl.learn.data.client_parts.natural_parts` (each device a real
client); the options :mod:`~netfl.learn.data.partition_options`'. Every
rule about the options is the partition's declaration's
(:class:`netfl.registry.partitions.PartitionSpec`, which the scenario
validates ``dataset.partition`` with), asked here through
:func:`~netfl.registry.partitions.partition_spec`: what this module checks
depends on the data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from netfl.learn.data.client_parts import ClientParts, natural_parts, sample_parts
from netfl.learn.data.partition_options import check_skew, describe_ints, skew_weights, with_exclusive
from netfl.learn.data.split_kinds import SPLITS, split
from netfl.registry.partitions import fit_problems, partition_spec

#: Clients that alone hold some labels: ``(clients, labels)``, or a mapping with those keys.
ExclusiveGroup = tuple[Sequence[int], Sequence[int]] | Mapping[str, Sequence[int]]
#: Heavy clients: ``(fraction of the clients, share of the samples)``, or a mapping with ``clients`` and ``share``.
QuantitySkew = tuple[float, float] | Mapping[str, float]

__all__ = ["NOT_SPLIT_HERE", "ClientParts", "natural_parts", "partition_indices", "sample_parts"]

#: The registered kinds that :func:`partition_indices` does not split, and where they are made.
NOT_SPLIT_HERE = {
    "natural": "each device holds one real client's samples; natural_parts makes them, from each sample's client id",
}


def partition_indices(
    labels: np.ndarray,
    num_clients: int,
    kind: str,
    rng: np.random.Generator,
    *,
    alpha: float | None = None,
    classes_per_client: int | None = None,
    exclusive: Sequence[ExclusiveGroup] | None = None,
    quantity_skew: QuantitySkew | None = None,
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

    Options (both absent: the kinds above, unchanged draw for draw):

    - ``exclusive``: groups of clients that hold some labels exclusively, a
      sequence of ``(clients, labels)`` pairs (or mappings with
      ``clients`` and ``labels``). Group by group, in the order given, all
      samples of the group's labels are shuffled and dealt out evenly
      (sizes differ by ≤ 1) to the group's clients, in the order listed.
      Every other client then gets a share of the remaining labels' samples
      by ``kind``, exactly as if those were the whole data set and those
      clients all the clients (for ``"iid"``: an iid share; for
      ``"classes"``, ``classes_per_client`` counts remaining labels; for
      ``"by_label"``, C is the number of remaining labels). Fed-CVaR-Avg's
      Fashion-MNIST setup (K = 30, the three rarest users hold labels 8
      and 9): ``kind="iid", exclusive=[([27, 28, 29], [8, 9])]``. Refused: a
      client index outside 0..num_clients-1, a label not present in
      ``labels``, a client or a label given twice, an empty group, a group
      with more clients than samples, all clients in groups while some
      labels remain, or no label left for the other clients.
    - ``quantity_skew``: a ``(clients, share)`` pair (or a mapping with
      those keys), both fractions in (0, 1): ``round(clients *
      num_clients)`` clients (at least 1, at most num_clients - 1), drawn
      uniformly without replacement from ``rng`` before anything else, hold
      together ``share`` of the samples; the heavy clients have equal
      weights ``share / m``, the others ``(1 - share) / (num_clients - m)``.
      ``"iid"``: the shuffled samples are cut into exactly those sizes
      (largest-remainder rounding; ties go to the lower client index), so
      the heavy clients hold ``round(share * n)`` samples up to one sample
      each. ``"classes"``: labels are assigned as without the option, then
      each label's shuffled samples are cut among its holders (same
      rounding) in proportion to per-client factors, fitted (iterative
      proportional fitting, no randomness) so that every client's total is
      its weight times the held samples; a client's samples are spread
      over its labels in proportion to those labels' sizes. Whether such
      factors exist depends on the label assignment (with 10 clients of 3
      labels, one heavy client can hold at most its 3 labels, 30 %): if the
      heavy clients' share ends up more than 1 percentage point (plus one
      sample per cut) from ``share``, ValueError. MMFL's "10 % of the
      clients hold 52.6 % of the data": ``(0.1, 0.526)``. Refused for
      ``"dirichlet"`` and ``"by_label"``, together with ``exclusive``, or
      when a client would end up with no sample.

    No index appears twice; ``"iid"`` and ``"dirichlet"`` use every sample.
    Raises ValueError for invalid arguments, worded as ``netfl validate``
    words them for ``dataset.partition``; kind ``"natural"`` is refused
    (:func:`natural_parts` makes it, from each sample's client).
    """
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"labels must be 1-D, got shape {labels.shape}")
    n = len(labels)
    if num_clients < 1:
        raise ValueError(f"num_clients must be >= 1, got {num_clients}")
    if num_clients > n:
        raise ValueError(f"num_clients ({num_clients}) exceeds the number of samples ({n})")
    spec = partition_spec(  # the partition's rules, as the scenario states them
        kind=kind,
        alpha=alpha,
        classes_per_client=classes_per_client,
        exclusive=[_pair(group, ("clients", "labels"), f"exclusive[{g}]") for g, group in enumerate(exclusive or [])]
        or None,
        quantity_skew=None if quantity_skew is None else _pair(quantity_skew, ("clients", "share"), "quantity_skew"),
    )
    if kind not in SPLITS:
        raise ValueError(f"kind {kind}: {NOT_SPLIT_HERE[kind]}")
    for path, message in fit_problems(spec, clients=num_clients):
        raise ValueError(f"{path.lstrip('.')}: {message}")
    if spec.exclusive is not None:
        return _none_empty(with_exclusive(labels, num_clients, spec, rng), kind)
    if spec.quantity_skew is None:
        parts = split(labels, num_clients, spec, rng, None)
    else:
        share, heavy, weights = skew_weights(num_clients, spec.quantity_skew, rng)
        parts = split(labels, num_clients, spec, rng, weights)
        check_skew(labels, parts, kind, share, heavy)
    return _none_empty([np.sort(np.asarray(p, dtype=np.int64)) for p in parts], kind)


def _none_empty(parts: list[np.ndarray], kind: str) -> list[np.ndarray]:
    """``parts``, or a ValueError with the count and the fix if a client got no sample (it could not train)."""
    empty = [i for i, p in enumerate(parts) if len(p) == 0]
    if empty:
        shown = describe_ints(empty[:10]) + (", ..." if len(empty) > 10 else "")
        raise ValueError(
            f"{kind} leaves {len(empty)} of {len(parts)} clients without a training sample (clients "
            f"{shown}), and a client without data cannot train; use fewer devices, more labels per "
            "client (classes_per_client), or samples_per_client (devices then share samples)"
        )
    return parts


def _pair(obj: Any, names: tuple[str, str], what: str) -> dict[str, Any]:
    """An option given as a pair or a mapping (the assemble layer makes pairs of the scenario's), as the mapping
    the partition's declaration reads."""
    if isinstance(obj, Mapping):
        missing = [name for name in names if name not in obj]
        if missing:
            raise ValueError(f"{what}: missing {missing[0]!r}")
        return dict(obj)
    if isinstance(obj, Sequence) and not isinstance(obj, str) and len(obj) == 2:
        return dict(zip(names, obj))
    raise ValueError(f"{what}: expected a pair or a mapping with {names[0]!r}, got {obj!r}")
