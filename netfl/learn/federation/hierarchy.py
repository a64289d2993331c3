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

import numpy as np
import torch


class EdgeModels:
    """Every edge's model of every task, each device's edge, and the edges' data sizes (the cloud's weights)."""

    def __init__(
        self,
        client_edges: Sequence[int],
        sizes_by_task: Sequence[Sequence[int]],
        initial: list[torch.Tensor],
        edge_count: int | None = None,
    ):
        """``edge_count``: the edge servers, those without devices included (default: the highest edge a client
        is under, plus one)."""
        self.client_edges = tuple(int(e) for e in client_edges)
        count = max(self.client_edges) + 1 if edge_count is None else edge_count
        if count <= max(self.client_edges):
            raise ValueError(f"a client is under edge {max(self.client_edges)} of {count}")
        self.vectors: list[list[torch.Tensor]] = [[v] * count for v in initial]  # task -> edge -> model
        self.sizes = [
            np.bincount(self.client_edges, weights=sizes, minlength=count).astype(float).tolist()
            for sizes in sizes_by_task
        ]
        #: Whether some edge applied an update since the last cloud round (else the cloud's model stays).
        self.fresh = False

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
