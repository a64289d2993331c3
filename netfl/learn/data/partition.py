"""Split a data set's samples among FL clients.

How data is spread over clients (uniform, label-skewed, few classes each) is
one of the main knobs of FL experiments, so the standard schemes live here
and are all driven by an explicit ``numpy.random.Generator`` for
reproducibility: the same generator state gives the same partition.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from netfl.registry.partitions import PARTITION_KINDS, QUANTITY_SKEW_KINDS, SAMPLED_KINDS

#: Clients that alone hold some labels: ``(clients, labels)``, or a mapping with those keys.
ExclusiveGroup = tuple[Sequence[int], Sequence[int]] | Mapping[str, Sequence[int]]
#: Heavy clients: ``(fraction of the clients, share of the samples)``, or a mapping with ``clients`` and ``share``.
QuantitySkew = tuple[float, float] | Mapping[str, float]

__all__ = ["ClientParts", "natural_parts", "partition_indices", "sample_parts"]

#: Dirichlet draws retried before falling back to moving samples around.
_DIRICHLET_TRIES = 100

#: Rescaling rounds of the quantity-skew fit of kind "classes".
_FIT_ITERATIONS = 5000

#: How far (absolute) the heavy clients' share may fall from the asked one.
_SHARE_TOLERANCE = 0.01


class ClientParts:
    """Every client's sample indices in one array: client c holds ``indices[offsets[c]:offsets[c + 1]]``.

    One array, not one per client: a million clients' parts cost their indices and nothing per client. The
    indices are 32-bit where the data set allows it (torch indexes with them as with 64-bit ones): ten million
    phones holding 20 samples each keep 0.8 GB of indices, not 1.6 GB.
    """

    def __init__(self, indices: np.ndarray, offsets: np.ndarray):
        indices = np.asarray(indices)
        fits = indices.size == 0 or (indices.min() >= 0 and indices.max() < 2**31)
        self.indices = indices.astype(np.int32 if fits else np.int64, copy=False)
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
        return self.indices[self.offsets[client] : self.offsets[client + 1]]

    def __iter__(self):
        return (self[c] for c in range(len(self)))

    @property
    def sizes(self) -> np.ndarray:
        return np.diff(self.offsets)


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
    if kind not in SAMPLED_KINDS:
        raise ValueError(f"samples_per_client works with kinds {', '.join(SAMPLED_KINDS)}, not {kind!r}")
    if k < 1 or num_clients < 1 or n < 1:
        raise ValueError(f"need samples_per_client >= 1, clients >= 1 and samples >= 1, got {k}, {num_clients}, {n}")
    offsets = np.arange(num_clients + 1, dtype=np.int64) * k
    if kind == "iid":
        total = num_clients * k
        picks = rng.permutation(n)[:total] if total <= n else rng.integers(0, n, size=total)
        return ClientParts(picks, offsets)
    present = np.unique(labels)
    num_labels = len(present)
    if kind == "dirichlet":
        if alpha is None or not alpha > 0:
            raise ValueError("partition kind 'dirichlet' needs alpha (> 0)")
        mix = rng.dirichlet(np.full(num_labels, float(alpha)), size=num_clients)
    else:
        c = int(classes_per_client or 0)
        if not 1 <= c <= num_labels:
            raise ValueError(f"classes_per_client must be in 1..{num_labels}, got {classes_per_client}")
        chosen = np.argsort(rng.random((num_clients, num_labels)), axis=1)[:, :c]
        mix = np.zeros((num_clients, num_labels))
        np.put_along_axis(mix, chosen, 1.0 / c, axis=1)
    counts = rng.multinomial(k, mix / mix.sum(axis=1, keepdims=True))  # clients x labels
    slot_label = np.repeat(np.tile(np.arange(num_labels), num_clients), counts.ravel())  # client-major slots
    indices = np.empty(num_clients * k, dtype=np.int64)
    for position, label in enumerate(present):
        slots = np.flatnonzero(slot_label == position)
        pool = np.flatnonzero(labels == label)
        if len(slots) <= len(pool):
            indices[slots] = rng.permutation(pool)[: len(slots)]
        else:
            indices[slots] = pool[rng.integers(0, len(pool), size=len(slots))]
    return ClientParts(indices, offsets)


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
    if kind not in PARTITION_KINDS:
        raise ValueError(f"unknown partition kind {kind!r} (accepted: {', '.join(PARTITION_KINDS)})")
    if exclusive is not None and len(exclusive) > 0:
        if quantity_skew is not None:
            raise ValueError("quantity_skew cannot be combined with exclusive: give one of them")
        return _none_empty(_with_exclusive(labels, num_clients, kind, rng, alpha, classes_per_client, exclusive), kind)
    if quantity_skew is None:
        parts = _split(labels, num_clients, kind, rng, alpha, classes_per_client, None)
    else:
        share, heavy, weights = _skew_weights(num_clients, kind, rng, quantity_skew)
        parts = _split(labels, num_clients, kind, rng, alpha, classes_per_client, weights)
        _check_skew(labels, parts, kind, share, heavy)
    return _none_empty([np.sort(np.asarray(p, dtype=np.int64)) for p in parts], kind)


def _none_empty(parts: list[np.ndarray], kind: str) -> list[np.ndarray]:
    """``parts``, or a ValueError with the count and the fix if a client got no sample (it could not train)."""
    empty = [i for i, p in enumerate(parts) if len(p) == 0]
    if empty:
        shown = _describe_ints(empty[:10]) + (", ..." if len(empty) > 10 else "")
        raise ValueError(
            f"{kind} leaves {len(empty)} of {len(parts)} clients without a training sample (clients "
            f"{shown}), and a client without data cannot train; use fewer devices, more labels per "
            "client (classes_per_client), or samples_per_client (devices then share samples)"
        )
    return parts


def _split(
    labels: np.ndarray,
    num_clients: int,
    kind: str,
    rng: np.random.Generator,
    alpha: float | None,
    classes_per_client: int | None,
    weights: np.ndarray | None,
) -> list[np.ndarray]:
    """The kinds themselves, on positions 0..len(labels)-1 (unsorted parts)."""
    n = len(labels)
    if kind == "iid":
        if weights is None:
            return np.array_split(rng.permutation(n), num_clients)
        return np.split(rng.permutation(n), np.cumsum(_apportion(n, weights))[:-1])
    if kind == "dirichlet":
        if alpha is None:
            raise ValueError("partition kind 'dirichlet' needs alpha (> 0)")
        if not alpha > 0:
            raise ValueError(f"dirichlet alpha must be > 0, got {alpha}")
        return _dirichlet(labels, num_clients, float(alpha), rng)
    if kind == "classes":
        if classes_per_client is None:
            raise ValueError("partition kind 'classes' needs classes_per_client (>= 1)")
        return _classes(labels, num_clients, int(classes_per_client), rng, weights)
    return _by_label(labels, num_clients, rng)


def _field(obj: Any, name: str, position: int, what: str) -> Any:
    """``obj[name]`` or ``obj[position]``: the options come as pairs or mappings (the assemble layer makes pairs
    of the scenario's)."""
    if isinstance(obj, Mapping):
        if name not in obj:
            raise ValueError(f"{what}: missing {name!r}")
        return obj[name]
    if isinstance(obj, Sequence) and not isinstance(obj, str) and len(obj) == 2:
        return obj[position]
    raise ValueError(f"{what}: expected a pair or a mapping with {name!r}, got {obj!r}")


def _int_list(values: Any, what: str) -> list[int]:
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
        raise ValueError(f"{what} must be a list of integers, got {values!r}")
    out = []
    for v in values:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise ValueError(f"{what} must be a list of integers, got {v!r} in it")
        out.append(int(v))
    if not out:
        raise ValueError(f"{what} is empty")
    return out


def _with_exclusive(
    labels: np.ndarray,
    num_clients: int,
    kind: str,
    rng: np.random.Generator,
    alpha: float | None,
    classes_per_client: int | None,
    exclusive: Sequence[ExclusiveGroup],
) -> list[np.ndarray]:
    present = np.unique(labels)
    present_set = {int(c) for c in present}
    groups: list[tuple[list[int], list[int]]] = []
    client_group: dict[int, int] = {}
    label_group: dict[int, int] = {}
    for g, group in enumerate(exclusive):
        what = f"exclusive[{g}]"
        clients = _int_list(_field(group, "clients", 0, what), f"{what}.clients")
        group_labels = _int_list(_field(group, "labels", 1, what), f"{what}.labels")
        for c in clients:
            if not 0 <= c < num_clients:
                raise ValueError(
                    f"{what}.clients: client {c} is out of range: there are {num_clients} "
                    f"clients, numbered 0..{num_clients - 1}"
                )
            if c in client_group:
                where = (
                    "given twice in this group"
                    if client_group[c] == g
                    else f"also given in exclusive[{client_group[c]}]"
                )
                raise ValueError(f"{what}.clients: client {c} is {where}; a client is in at most one group")
            client_group[c] = g
        for c in group_labels:
            if c not in present_set:
                raise ValueError(
                    f"{what}.labels: label {c} is not in the data set (labels present: {_describe_ints(present)})"
                )
            if c in label_group:
                where = (
                    "given twice in this group" if label_group[c] == g else f"also given in exclusive[{label_group[c]}]"
                )
                raise ValueError(f"{what}.labels: label {c} is {where}; a label belongs to at most one group")
            label_group[c] = g
        groups.append((clients, group_labels))

    parts: list[np.ndarray] = [np.empty(0, dtype=np.int64)] * num_clients
    for g, (clients, group_labels) in enumerate(groups):
        idx = np.flatnonzero(np.isin(labels, group_labels))
        if len(idx) < len(clients):
            raise ValueError(
                f"exclusive[{g}]: labels {group_labels} have {len(idx)} samples for "
                f"{len(clients)} clients; every client needs at least one"
            )
        for client, chunk in zip(clients, np.array_split(rng.permutation(idx), len(clients))):
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
                f"exclusive: the groups take every label, so clients {_describe_ints(rest_clients)} "
                f"would hold nothing; put them in a group or give fewer labels to the groups"
            )
        rest_idx = np.flatnonzero(np.isin(labels, rest_labels))
        if len(rest_clients) > len(rest_idx):
            raise ValueError(
                f"exclusive: {len(rest_clients)} clients outside the groups but only "
                f"{len(rest_idx)} samples of the remaining labels"
            )
        try:
            sub = _split(labels[rest_idx], len(rest_clients), kind, rng, alpha, classes_per_client, None)
        except ValueError as exc:
            raise ValueError(
                f"{exc} (among the {len(rest_clients)} clients and {len(rest_labels)} labels "
                f"outside the exclusive groups)"
            ) from None
        for client, p in zip(rest_clients, sub):
            parts[client] = rest_idx[np.asarray(p, dtype=np.int64)]
    return [np.sort(np.asarray(p, dtype=np.int64)) for p in parts]


def _describe_ints(values: Any) -> str:
    """Sorted integers with runs of three or more shortened: ``0, 2..29``."""
    values = sorted(int(v) for v in values)
    runs: list[list[int]] = []
    for v in values:
        if runs and v == runs[-1][-1] + 1:
            runs[-1].append(v)
        else:
            runs.append([v])
    return ", ".join(f"{r[0]}..{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def _skew_weights(
    num_clients: int, kind: str, rng: np.random.Generator, quantity_skew: QuantitySkew
) -> tuple[float, np.ndarray, np.ndarray]:
    """(share, sorted heavy client indices, per-client weights summing to 1)."""
    if kind not in QUANTITY_SKEW_KINDS:
        raise ValueError(
            f"quantity_skew is supported for kinds {', '.join(QUANTITY_SKEW_KINDS)}, not {kind!r}"
            + (" (its client sizes already vary with alpha)" if kind == "dirichlet" else "")
        )
    fraction = float(_field(quantity_skew, "clients", 0, "quantity_skew"))
    share = float(_field(quantity_skew, "share", 1, "quantity_skew"))
    if not 0 < fraction < 1:
        raise ValueError(f"quantity_skew.clients must be a fraction of the clients in (0, 1), got {fraction:g}")
    if not 0 < share < 1:
        raise ValueError(f"quantity_skew.share must be a fraction of the samples in (0, 1), got {share:g}")
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


def _check_skew(labels: np.ndarray, parts: list[np.ndarray], kind: str, share: float, heavy: np.ndarray) -> None:
    sizes = np.array([len(p) for p in parts])
    empty = np.flatnonzero(sizes == 0).tolist()
    if empty:
        raise ValueError(
            f"quantity_skew leaves client(s) {_describe_ints(empty)} with no sample; use fewer "
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


def _apportion(total: int, weights: np.ndarray) -> np.ndarray:
    """Integer sizes summing to ``total`` in proportion to ``weights`` (largest remainder; ties: lower index)."""
    exact = np.asarray(weights, dtype=np.float64) / float(np.sum(weights)) * total
    sizes = np.floor(exact).astype(np.int64)
    short = total - int(sizes.sum())
    if short > 0:
        order = np.argsort(-(exact - sizes), kind="stable")
        sizes[order[:short]] += 1
    return sizes


def _dirichlet(labels: np.ndarray, num_clients: int, alpha: float, rng: np.random.Generator) -> list[np.ndarray]:
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
    k: int,
    rng: np.random.Generator,
    weights: np.ndarray | None = None,
) -> list[np.ndarray]:
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
            chunks = np.split(idx, np.cumsum(_apportion(len(idx), share[owners, c]))[:-1])
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
    if pick == "random":
        chosen = np.sort(rng.choice(num_clients, size=num_devices, replace=False))
    elif pick == "first":
        chosen = np.arange(num_devices)
    elif pick == "largest":
        chosen = np.sort(np.argsort(-sizes, kind="stable")[:num_devices])
    else:
        raise ValueError(f"pick must be random, first or largest, got {pick!r}")
    by_client = np.argsort(client, kind="stable")  # each client's samples together, in their original order
    starts = np.concatenate([[0], np.cumsum(sizes)])
    parts = [by_client[starts[c] : starts[c + 1]] for c in chosen]
    return ClientParts.of(parts), chosen
