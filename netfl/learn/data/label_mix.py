"""Each client's label shares: how skewed a partition is, and what data-dependent participation reads.

A clients x classes array, computed a bounded step of clients at a time; :class:`LabelMix` computes it only
when first read, so a world of ten million phones whose policies never ask for it does not keep it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from netfl.learn.data.client_parts import ClientParts

__all__ = ["LabelMix", "label_distribution"]


def label_distribution(labels: np.ndarray, parts: Sequence[np.ndarray] | ClientParts, num_classes: int) -> np.ndarray:
    """Return a num_clients × num_classes array of each client's label fractions.

    Rows sum to 1 (an empty client's row is all zeros). Used to describe the
    heterogeneity of a partition and to derive data-dependent participation
    probabilities. With a label per token (labels N x T), a client's fractions
    count its tokens; labels of -100 (ignored positions) are not counted.
    """
    labels = np.asarray(labels)
    parts = parts if isinstance(parts, ClientParts) else ClientParts.of(parts)
    return _label_shares(labels, parts, num_classes, 0, len(parts))


#: Clients whose label counts are taken in one vectorised step (bounds the temporary arrays to a few dozen MB).
_CLIENTS_PER_STEP = 1 << 18


def _label_shares(labels: np.ndarray, parts: ClientParts, num_classes: int, start: int, stop: int) -> np.ndarray:
    """:func:`label_distribution`'s rows for clients ``start..stop``, a bounded step of clients at a time."""
    out = np.zeros((stop - start, num_classes))
    for first in range(start, stop, _CLIENTS_PER_STEP):
        last = min(stop, first + _CLIENTS_PER_STEP)
        offsets = parts.offsets[first : last + 1]
        owner = np.repeat(np.arange(last - first), np.diff(offsets))
        held = labels[parts.indices[offsets[0] : offsets[-1]]]
        if held.ndim == 2:  # one label per token: every token counts for its sample's client
            owner, held = np.repeat(owner, held.shape[1]), held.reshape(-1)
        counted = held != -100
        owner, held = owner[counted], held[counted]
        if len(held) and (held.min() < 0 or held.max() >= num_classes):
            raise ValueError(f"labels must be in 0..{num_classes - 1}")
        counts = np.bincount(owner * num_classes + held, minlength=(last - first) * num_classes).reshape(
            last - first, num_classes
        )
        totals = counts.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[first - start : last - start] = np.where(
                totals[:, None] > 0, counts / np.maximum(totals, 1)[:, None], 0.0
            )
    return out


class LabelMix:
    """:func:`label_distribution` (clients x classes), computed when first read: a world of ten million phones
    whose policies never ask for it does not keep 0.8 GB of it. Reads as the array (``np.asarray``, indexing);
    a contiguous slice of clients stays lazy (a device group's rows)."""

    def __init__(
        self, labels: np.ndarray, parts: ClientParts, num_classes: int, start: int = 0, stop: int | None = None
    ):
        self._labels, self._classes = np.asarray(labels), num_classes
        self._parts = parts if isinstance(parts, ClientParts) else ClientParts.of(parts)
        self._start, self._stop = start, len(parts) if stop is None else stop
        self._array: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return (self._stop - self._start, self._classes)

    def __len__(self) -> int:
        return self._stop - self._start

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        if self._array is None:
            self._array = _label_shares(self._labels, self._parts, self._classes, self._start, self._stop)
        return self._array if dtype is None else self._array.astype(dtype, copy=False)

    def __getitem__(self, key):
        if isinstance(key, slice) and key.step in (None, 1) and self._array is None:
            start, stop, _ = key.indices(len(self))
            return LabelMix(
                self._labels, self._parts, self._classes, self._start + start, self._start + max(start, stop)
            )
        return np.asarray(self)[key]
