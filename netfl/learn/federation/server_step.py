"""The server's step once a round's updates are in: the strategy's rule, then the server optimiser (if any); with
edge servers (hierarchical FL, :mod:`netfl.learn.federation.hierarchy`), each edge's rule every round and the
cloud's average every few. Every call of the strategy's rule records its metrics
(:mod:`netfl.learn.federation.strategy_metrics`).

Without edges, task s's next global vector is the strategy's aggregate of its updates, or, with a server optimiser
(:mod:`netfl.learn.federation.server_optimizers`), the optimiser's step on that aggregate minus the current vector (the
pseudo-gradient) when some update was applied. With edges, each edge's model takes the strategy's rule on its own
devices' updates, and the cloud's round makes the global model the data-weighted mean of the edges that reached it
(through the optimiser, if any), which those edges then take.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from netfl.backend import CloudContext, RoundContext
from netfl.learn.federation.divergence_watch import require_finite
from netfl.learn.federation.hierarchy import EdgeModels
from netfl.learn.federation.server_optimizers import ServerOptimizer, ServerOptimizerChoice, build_server_optimizer
from netfl.learn.federation.strategy import ClientUpdate
from netfl.learn.federation.strategy_calls import StrategyCalls
from netfl.learn.federation.strategy_metrics import StrategyMetrics
from netfl.learn.federation.task_model import TaskModel


class ServerStep:
    """A server optimiser per task (or none), the edge servers' models (or none), and the strategy's metrics of
    every aggregation (``metrics``)."""

    def __init__(
        self,
        tasks: Sequence[TaskModel],
        optimizer: ServerOptimizerChoice | None = None,
        client_edges: Sequence[int] | None = None,
        edge_count: int | None = None,
    ):
        """``client_edges``: each client's edge server among ``edge_count`` (None: no edges)."""
        self.optimizers: list[ServerOptimizer] | None = (
            [build_server_optimizer(optimizer) for _ in tasks] if optimizer is not None else None
        )
        self.edges: EdgeModels | None = None
        self.metrics = StrategyMetrics()
        if client_edges is not None:
            if any(t.buffer_bytes for t in tasks):
                raise ValueError(
                    "hierarchical aggregation averages a model's parameters at the edges and the cloud; a model with "
                    "buffers (BatchNorm's statistics) there needs model.buffers: local"
                )
            sizes = [[t.client_size(c) for c in range(len(client_edges))] for t in tasks]
            self.edges = EdgeModels(client_edges, sizes, [t.global_vector for t in tasks], edge_count)

    def edge_of(self, client: int) -> int:
        """The client's edge server, -1 without edges (the server itself sends it the model)."""
        return self.edges.edge(client) if self.edges is not None else -1

    def start(self, task: int, client: int, vector: torch.Tensor) -> torch.Tensor:
        """The model a client's job starts from: its edge's, or the global ``vector``."""
        return self.edges.start(task, client) if self.edges is not None else vector

    def models(
        self, strategy: StrategyCalls, tasks: Sequence[TaskModel], updates: list[ClientUpdate], context: RoundContext
    ) -> list[torch.Tensor]:
        """Each task's next global vector after a round's updates (with edges: the edges' models move, the global
        one stays); Diverged if an edge's model is not finite."""
        if self.edges is None:
            return [self._step(strategy, s, task, updates, context) for s, task in enumerate(tasks)]
        clients = tuple(sorted({u.client for u in updates}))
        for s, edges in enumerate(self.edges.vectors):
            for edge in sorted({self.edges.edge(u.client) for u in updates if u.task == s}):
                mine = [u for u in updates if u.task == s and self.edges.edge(u.client) == edge]
                edges[edge] = self._rule(strategy, edges[edge], mine, context, s, edge)
                self.edges.fresh = True
                require_finite([edges[edge]], context.round_index, clients)
        return [task.global_vector for task in tasks]

    def _step(
        self, strategy: StrategyCalls, s: int, task: TaskModel, updates: list[ClientUpdate], context: RoundContext
    ) -> torch.Tensor:
        mine = [u for u in updates if u.task == s]
        model = self._rule(strategy, task.global_vector, mine, context, s)
        if self.optimizers is None or not mine:
            return model
        return self.optimizers[s].step(task.global_vector, model - task.global_vector)

    def _rule(
        self,
        strategy: StrategyCalls,
        x: torch.Tensor,
        updates: list[ClientUpdate],
        context: RoundContext,
        task: int,
        edge: int | None = None,
    ) -> torch.Tensor:
        """The strategy's next vector from ``x`` and ``updates`` (fenced and checked), its metrics recorded."""
        result = strategy.aggregate(x, updates, context, task, edge)
        self.metrics.record(context, task, result.metrics, edge)
        return result.vector

    def cloud(self, tasks: Sequence[TaskModel], context: CloudContext, version: int) -> None:
        """Hierarchical FL's cloud round: each task's global model (and its snapshot ``version``) becomes the
        data-weighted mean of the models of the edges that reached the cloud, through the server optimiser if any,
        and those edges take it. With an optimiser, a cloud round after which no edge applied an update leaves
        the model and the optimiser's state as they are (as a round in which nothing arrived does without edges)."""
        fresh, self.edges.fresh = self.edges.fresh, False
        for s, task in enumerate(tasks):
            model = self.edges.average(s, context.edges, task.global_vector)
            if self.optimizers is not None:
                if not fresh:
                    model = task.global_vector
                else:
                    model = self.optimizers[s].step(task.global_vector, model - task.global_vector)
            require_finite([model], context.round_index, ())
            task.global_vector = model
            task.snapshots[version] = (model, task.global_buffers)
            for edge in context.edges:
                self.edges.vectors[s][edge] = model
