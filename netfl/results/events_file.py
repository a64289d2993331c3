"""events.parquet: the event log as typed columns, and the same table as a DataFrame for code that reads a run in
memory (netfl.api, the tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from netfl.events import EVENT_FIELDS
from netfl.results.devices_file import PARQUET

_ARROW = {int: pa.int64(), float: pa.float64(), str: pa.string()}
EVENT_SCHEMA = pa.schema(
    [
        ("sim_time_s", pa.float64()),
        ("round", pa.int64()),
        ("device", pa.int64()),
        ("kind", pa.string()),
        *((name, _ARROW[t]) for name, t in EVENT_FIELDS.items()),
        ("detail", pa.string()),
    ]
)


def events_frame(columns: dict[str, Any]) -> pd.DataFrame:
    """The event log (:meth:`EventRecorder.columns`) as a DataFrame: typed columns whole, integers as pandas'
    nullable ``Int64``, null floats NaN, null strings missing -- the dtypes ``pd.read_parquet`` gives for
    events.parquet (through the same Arrow table, so a string column with no value at all reads alike too)."""
    return _events_table(columns).to_pandas()


def _events_table(columns: dict[str, Any]) -> pa.Table:
    n = len(columns["kind"])
    data: dict[str, Any] = {name: columns[name] for name in ("sim_time_s", "round", "device", "kind")}
    for name, kind in EVENT_FIELDS.items():
        rows, values = columns[name]
        rows = np.asarray(rows, dtype=np.int64)
        if kind is str:
            full = np.full(n, None, dtype=object)
            full[rows] = values
            data[name] = full
        elif kind is int:
            full, mask = np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool)
            full[rows], mask[rows] = np.asarray(values, dtype=np.int64), False
            data[name] = pd.arrays.IntegerArray(full, mask)
        else:
            full = np.full(n, np.nan)
            full[rows] = np.asarray(values, dtype=np.float64)
            data[name] = full
    data["detail"] = columns["detail"]
    return pa.Table.from_pandas(pd.DataFrame(data), schema=EVENT_SCHEMA, preserve_index=False)


def write_events(path: Path, columns: dict[str, Any]) -> None:
    """events.parquet; with pandas' metadata, so ``pd.read_parquet`` gives back :func:`events_frame`'s dtypes."""
    pq.write_table(_events_table(columns), path, **PARQUET)
