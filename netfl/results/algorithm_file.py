"""algorithm.csv: the algorithm's own metrics of every aggregation (the strategy's, beside the new model).

One row per call of the strategy's rule (:mod:`netfl.learn.federation.strategy_metrics`): ``sim_time_s``,
``round`` (the ``round`` of the ``aggregate`` event in events.parquet), ``task`` (the model), ``edge`` (only in
a run with edge servers: the edge whose model it was, empty for the server's), then one column per metric in the
order the strategy first reported them. A count is written as an integer, any other number in the shortest form
that reads back to the same float (``nan`` where the metric is undefined that time); a metric a row lacks is
empty.
"""

from __future__ import annotations

import csv
import numbers
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def algorithm_columns(rows: Sequence[Any]) -> list[str]:
    """The header: the place columns (``edge`` only where some row has one), then every metric's name once."""
    names = ["sim_time_s", "round", "task"]
    if any(row.edge is not None for row in rows):
        names.append("edge")
    metrics = dict.fromkeys(name for row in rows for name in row.metrics)
    return names + list(metrics)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, numbers.Integral):
        return str(int(value))
    return repr(float(value))


def write_algorithm(path: Path, rows: Sequence[Any]) -> None:
    """Write ``rows`` (:class:`~netfl.learn.federation.strategy_metrics.AggregationMetrics`) to ``path``."""
    columns = algorithm_columns(rows)
    with Path(path).open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        for row in rows:
            place = {"sim_time_s": float(row.sim_time_s), "round": row.round, "task": row.task, "edge": row.edge}
            writer.writerow([_cell(place[c] if c in place else row.metrics.get(c)) for c in columns])
