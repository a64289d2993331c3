"""The ways a data set can be split among the clients: the one list of partition kinds, and the partition's
parameters with their rules (``dataset.partition``).

The scenario's schema takes :class:`PartitionSpec` as its ``dataset.partition``, and
:mod:`netfl.learn.data.partition` (which does the splitting, and cannot import the scenario) checks the options
it is given through the same declaration (:func:`partition_spec`), so each rule and each kind is stated once.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from netfl.numbers import Strict
from netfl.problems import one_of, params_problems
from netfl.registry import registered
from netfl.units import Fraction

__all__ = [
    "LABEL_KINDS",
    "PARTITIONS",
    "PARTITION_KINDS",
    "QUANTITY_SKEW_KINDS",
    "SAMPLED_KINDS",
    "ExclusiveGroupSpec",
    "PartitionSpec",
    "QuantitySkewSpec",
    "partition_spec",
]
#: Each kind and what it does, for listings and error messages.
PARTITIONS: dict[str, str] = {
    "iid": "shuffle the samples and deal them out; sizes differ by at most one",
    "dirichlet": "label skew: each label's samples split by Dirichlet(alpha) shares over the clients",
    "classes": "each client holds classes_per_client labels, split evenly among the clients holding a label",
    "by_label": "each client holds one label (client i the i-th, cycling), split among its holders",
    "natural": "each device holds one real client's samples, from the data's per-sample client ids (LEAF users, "
    "an array's `client`); with fewer devices than clients, `pick` chooses which clients take part",
}

PARTITION_KINDS: tuple[str, ...] = tuple(PARTITIONS)

#: The kinds that accept ``samples_per_client``.
SAMPLED_KINDS: tuple[str, ...] = ("iid", "dirichlet", "classes")

#: The kinds that accept ``quantity_skew``.
QUANTITY_SKEW_KINDS: tuple[str, ...] = ("iid", "classes")

#: The kinds that split by label (so they need one label per sample, not one per token).
LABEL_KINDS: tuple[str, ...] = ("dirichlet", "classes", "by_label")


class ExclusiveGroupSpec(Strict):
    """Clients (0-based device indices, in device order) that alone hold some labels; shared iid among them."""

    clients: list[Annotated[int, Field(ge=0)]] = Field(min_length=1, description="device indices, e.g. [27, 28, 29]")
    labels: list[Annotated[int, Field(ge=0)]] = Field(min_length=1, description="labels they alone hold, e.g. [8, 9]")


class QuantitySkewSpec(Strict):
    """A fraction of the clients (drawn with the partition's generator) hold a given share of the samples."""

    clients: Fraction = Field(gt=0, lt=1, description="fraction of the clients that are heavy, e.g. 10%")
    share: Fraction = Field(gt=0, lt=1, description="fraction of the samples they hold together, e.g. 52.6%")


class PartitionSpec(Strict):
    """How the training samples are split among the devices (netfl.learn.data.partition.partition_indices).

    ``exclusive: [{clients: [27, 28, 29], labels: [8, 9]}]``: those clients alone hold those labels
    (shared iid among them); every other client gets its share of the remaining labels by ``kind``.
    ``quantity_skew: {clients: 10%, share: 52.6%}``: that fraction of the clients holds that share of
    the samples (kinds iid and classes).
    """

    kind: Annotated[str, BeforeValidator(registered(PARTITION_KINDS))] = Field(
        "iid",
        description="iid (dealt out evenly), dirichlet (label skew by alpha), classes (classes_per_client labels "
        "each), by_label (one label each) or natural (each device one real client of the data)",
    )
    alpha: float | None = Field(None, gt=0, description="Dirichlet concentration (dirichlet)")
    classes_per_client: int | None = Field(None, gt=0, description="labels per client (classes)")
    exclusive: list[ExclusiveGroupSpec] | None = Field(
        None,
        min_length=1,
        description="groups of clients that alone hold some labels; the other clients "
        "split the remaining labels by kind",
    )
    quantity_skew: QuantitySkewSpec | None = Field(
        None, description="a fraction of the clients holds a share of the samples (kinds iid, classes)"
    )
    pick: Literal["random", "first", "largest"] = Field(
        "random",
        description="natural: which clients the devices take when the data names more clients than there are "
        "devices (random: a seeded draw; first: in id order; largest: most samples)",
    )
    samples_per_client: int | None = Field(
        None,
        gt=0,
        description="each client draws this many samples (its label mix by kind: iid, dirichlet, "
        "classes); shared between clients when clients x samples exceed the data set",
    )

    @model_validator(mode="after")
    def _params_match_kind(self):
        if self.kind == "natural":
            others = [
                k
                for k in ("alpha", "classes_per_client", "exclusive", "quantity_skew", "samples_per_client")
                if getattr(self, k) is not None
            ]
            if others:
                raise ValueError(
                    f"kind natural keeps each real client's samples as they are: remove {', '.join(others)}"
                )
        elif "pick" in self.model_fields_set:
            raise ValueError("pick chooses clients of a natural partition (kind: natural)")
        if self.kind == "dirichlet" and self.alpha is None:
            raise ValueError("kind dirichlet needs alpha (e.g. alpha: 0.1)")
        if self.kind == "classes" and self.classes_per_client is None:
            raise ValueError("kind classes needs classes_per_client (e.g. classes_per_client: 2)")
        seen_clients: dict[int, int] = {}
        seen_labels: dict[int, int] = {}
        for g, group in enumerate(self.exclusive or []):
            for field, values, seen in (
                ("clients", group.clients, seen_clients),
                ("labels", group.labels, seen_labels),
            ):
                for v in values:
                    if v in seen:
                        where = "given twice in this group" if seen[v] == g else f"also given in exclusive[{seen[v]}]"
                        raise ValueError(
                            f"exclusive[{g}].{field}: {field[:-1]} {v} is {where}; "
                            f"each {field[:-1]} belongs to at most one group"
                        )
                    seen[v] = g
        if self.quantity_skew is not None:
            if self.kind not in QUANTITY_SKEW_KINDS:
                raise ValueError(f"quantity_skew works with kind {one_of(QUANTITY_SKEW_KINDS)}, not {self.kind!r}")
            if self.exclusive:
                raise ValueError("quantity_skew cannot be combined with exclusive: give one of them")
        if self.samples_per_client is not None:
            if self.kind not in SAMPLED_KINDS:
                raise ValueError(f"samples_per_client works with kind {one_of(SAMPLED_KINDS)}, not {self.kind!r}")
            if self.exclusive or self.quantity_skew is not None:
                raise ValueError(
                    "samples_per_client draws every client's data alike: it cannot be combined with "
                    "exclusive or quantity_skew"
                )
        return self


def partition_spec(**options: Any) -> PartitionSpec:
    """``options`` (the keys of ``dataset.partition``; None: not given) as a validated :class:`PartitionSpec`,
    for code that splits data without a scenario; ValueError naming each problem as ``netfl validate`` would."""
    given = {key: value for key, value in options.items() if value is not None}
    problems = params_problems(PartitionSpec, given)
    if problems:
        raise ValueError("; ".join(f"{path.lstrip('.')}: {message}" if path else message for path, message in problems))
    return PartitionSpec.model_validate(given)


def fit_problems(
    spec: PartitionSpec, *, clients: int | None = None, labels: int | None = None, data: str = "the data set"
) -> list[tuple[str, str]]:
    """What the partition names beyond the world or the data, as (sub-path, message) pairs: a client (device) of
    ``exclusive`` past the ``clients`` there are, or more ``classes_per_client`` or a label of ``exclusive``
    past ``data``'s ``labels`` (labels 0..labels-1). None: not known yet (a data set of the user's own has its
    labels once loaded)."""
    problems: list[tuple[str, str]] = []
    groups = list(enumerate(spec.exclusive or []))
    if clients is not None:
        problems += [
            (f".exclusive[{g}].clients", f"device {client} does not exist: devices are 0..{clients - 1}")
            for g, group in groups
            for client in group.clients
            if client >= clients
        ]
    if labels is not None:
        if spec.classes_per_client is not None and spec.classes_per_client > labels:
            problems.append((".classes_per_client", f"{data} has {labels} labels; got {spec.classes_per_client}"))
        problems += [
            (f".exclusive[{g}].labels", f"label {label} does not exist: {data} has labels 0..{labels - 1}")
            for g, group in groups
            for label in group.labels
            if label >= labels
        ]
    return problems
