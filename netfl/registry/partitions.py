"""The ways a data set can be split among the clients: the one list of partition kinds.

The scenario checks ``dataset.partition`` against it and
:mod:`netfl.learn.data.partition` (which does the splitting) takes its kinds from
it, so a new kind is added in one place.
"""

from __future__ import annotations

__all__ = ["LABEL_KINDS", "PARTITIONS", "PARTITION_KINDS", "QUANTITY_SKEW_KINDS", "SAMPLED_KINDS"]

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
