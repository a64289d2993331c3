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
import math
import numbers
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from netfl.backend import AGGREGATION_PLACE


def algorithm_columns(rows: Sequence[Any]) -> list[str]:
    """The header: the place columns (``edge`` only where some row has one), then every metric's name once."""
    names = [c for c in AGGREGATION_PLACE if c != "edge" or any(row.edge is not None for row in rows)]
    metrics = dict.fromkeys(name for row in rows for name in row.metrics)
    return names + list(metrics)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, numbers.Integral):
        return str(int(value))
    return repr(float(value))


def algorithm_frame(rows: Sequence[Any]) -> pd.DataFrame:
    """``rows`` as a table with algorithm.csv's columns (a metric a row lacks, and an edge-less row's edge: NaN or
    None); an empty table without a row."""
    columns = algorithm_columns(rows) if rows else []
    places = [_place(row) for row in rows]
    data = {
        c: [place[c] if c in AGGREGATION_PLACE else row.metrics.get(c, math.nan) for place, row in zip(places, rows)]
        for c in columns
    }
    return pd.DataFrame(data, columns=columns)


def _place(row: Any) -> dict[str, Any]:
    return {"sim_time_s": float(row.sim_time_s), "round": row.round, "task": row.task, "edge": row.edge}


def write_algorithm(path: Path, rows: Sequence[Any]) -> None:
    """Write ``rows`` (:class:`~netfl.learn.federation.strategy_metrics.AggregationMetrics`) to ``path``."""
    columns = algorithm_columns(rows)
    with Path(path).open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        for row in rows:
            place = _place(row)
            writer.writerow([_cell(place[c] if c in place else row.metrics.get(c)) for c in columns])
