"""The strategy's metrics of every aggregation, in the order they were made: what the run writes to algorithm.csv.

Each call of the strategy's ``aggregate`` (once per task per round; with edge servers, once per edge that heard
updates) returns its metrics beside the next vector (:class:`~netfl.learn.federation.strategy.Aggregate`);
the server step records them here with where they come from. A checkpoint keeps the rows
(:mod:`netfl.learn.federation.learner_state`), so a resumed run writes those of a run that never stopped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from netfl.backend import RoundContext


@dataclass(frozen=True)
class AggregationMetrics:
    """One aggregation's metrics: at ``sim_time_s``, in round (or, asynchronous, model version) ``round`` -- the
    ``round`` of its ``aggregate`` event in events.parquet --, of task ``task``'s model, at edge server ``edge``
    (None: the server's own model)."""

    sim_time_s: float
    round: int
    task: int
    edge: int | None
    metrics: Mapping[str, float]


class StrategyMetrics:
    """The rows recorded so far (``rows``), one per call of the strategy's ``aggregate``."""

    def __init__(self) -> None:
        self.rows: list[AggregationMetrics] = []

    def record(self, context: RoundContext, task: int, metrics: Mapping[str, float], edge: int | None = None) -> None:
        self.rows.append(AggregationMetrics(context.sim_time_s, context.round_index, task, edge, dict(metrics)))
