"""The edge tier of hierarchical FL on the learner's side (Liu, Zhang, Song & Letaief, Client-Edge-Cloud
Hierarchical Federated Learning, ICC 2020, HierFAVG).

Each edge server keeps its own model of each task. A device's job starts
from its edge's model; every round each edge applies the algorithm's rule
(FedAvg's weighted mean of its own devices' updates, FedProx's, FedNova's)
to its model; every ``cloud_every`` rounds the cloud averages the models of
the edges that reached it, weighted by the edges' data (the samples of all
the devices under each), and those edges take the result:

    edge round:   x_l <- rule(x_l, updates of the devices under edge l)
    cloud round:  x <- sum_l (N_l / sum_k N_k) x_l  over the edges l that are up;  x_l <- x for those l

The global model (what is evaluated) is the cloud's, which changes at cloud
rounds only.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


class EdgeModels:
    """Every edge's model of every task, each device's edge, and the edges' data sizes (the cloud's weights)."""

    def __init__(
        self, client_edges: Sequence[int], sizes_by_task: Sequence[Sequence[int]], initial: list[torch.Tensor]
    ):
        self.client_edges = tuple(int(e) for e in client_edges)
        count = max(self.client_edges) + 1
        self.vectors: list[list[torch.Tensor]] = [[v] * count for v in initial]  # task -> edge -> model
        self.sizes = [
            [float(sum(n for n, e in zip(sizes, self.client_edges) if e == edge)) for edge in range(count)]
            for sizes in sizes_by_task
        ]

    def edge(self, client: int) -> int:
        return self.client_edges[client]

    def start(self, task: int, client: int) -> torch.Tensor:
        """The model a job of ``client`` on ``task`` starts from: its edge's."""
        return self.vectors[task][self.edge(client)]

    def average(self, task: int, edges: Sequence[int], current: torch.Tensor) -> torch.Tensor:
        """The cloud's model from the edges ``edges``: their models weighted by their data (``current`` if none)."""
        weights = [self.sizes[task][e] for e in edges]
        total = sum(weights)
        if not total:
            return current
        out = torch.zeros_like(current)
        for e, w in zip(edges, weights):
            out.add_(self.vectors[task][e], alpha=w / total)
        return out
