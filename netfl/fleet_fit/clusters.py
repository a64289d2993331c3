"""Devices grouped by how alike their days are: k-means on a few standardised features, seeded.

The features are a device's share of time in use and eligible, its idle drain, and its nightly charger's
plug-in and plug-out times as points on the 24-hour circle (so that 23:50 and 00:10 are close). The start is
k-means++ from the seed's stream, so one seed gives one grouping.
"""

from __future__ import annotations

import math

import numpy as np

from netfl.fleet_fit.estimate import circular_mean_sd
from netfl.fleet_fit.statistics import DAY, DeviceStats
from netfl.rng import RandomStreams

__all__ = ["features", "kmeans", "cluster"]

ITERATIONS = 50


def features(stats: list[DeviceStats]) -> np.ndarray:
    """One row per device (see the module docstring), standardised column by column."""
    rows = []
    for s in stats:
        row = [s.use_fraction, s.eligible_fraction]
        for times in (s.plug_ins, s.plug_outs):
            angle = 2 * math.pi * circular_mean_sd(times)[0] / DAY if len(times) else 0.0
            weight = 1.0 if len(times) else 0.0
            row += [weight * math.cos(angle), weight * math.sin(angle)]
        rows.append(row)
    x = np.asarray(rows, dtype=float)
    spread = x.std(axis=0)
    return (x - x.mean(axis=0)) / np.where(spread > 0, spread, 1.0)


def kmeans(x: np.ndarray, k: int, seed: int) -> np.ndarray:
    """Each row's cluster (0..k-1, renumbered by first appearance), Lloyd's iterations from k-means++."""
    n = len(x)
    k = min(k, n)
    rng = RandomStreams(seed).numpy("fleet_fit", "kmeans")
    centres = [x[rng.integers(n)]]
    for _ in range(1, k):
        d2 = np.min([((x - c) ** 2).sum(axis=1) for c in centres], axis=0)
        total = d2.sum()
        centres.append(x[rng.choice(n, p=d2 / total)] if total > 0 else x[rng.integers(n)])
    centres = np.array(centres)
    labels = np.zeros(n, dtype=np.int64)
    for _ in range(ITERATIONS):
        d2 = ((x[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)
        new = d2.argmin(axis=1)
        if _ and np.array_equal(new, labels):
            break
        labels = new
        for j in range(k):
            mine = labels == j
            if mine.any():
                centres[j] = x[mine].mean(axis=0)
    _, first = np.unique(labels, return_index=True)
    order = np.argsort(np.argsort(first))  # clusters renumbered in order of their first device
    return order[np.searchsorted(np.unique(labels), labels)]


def cluster(stats: list[DeviceStats], k: int | None, seed: int) -> list[list[DeviceStats]]:
    """The devices in groups: ``k`` k-means clusters, or one group per device when ``k`` is None."""
    if k is None:
        return [[s] for s in stats]
    labels = kmeans(features(stats), k, seed)
    return [[s for s, label in zip(stats, labels) if label == j] for j in range(labels.max() + 1)]
