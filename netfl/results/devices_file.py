"""devices.parquet (one row per device) and timeline.parquet (one row per reading and device group), written a
row group at a time; and the Parquet settings every file of a run shares."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from netfl.results.row_table import RowTable

#: Rows of a row group in devices.parquet and timeline.parquet: pyarrow's default, so that writing a row group at a
#: time gives the bytes of one whole-table write while only that group's columns are made.
ROW_GROUP_ROWS = 1024 * 1024
#: No statistics or creation metadata that could vary: the same run gives the same bytes.
PARQUET = {"compression": "zstd", "write_statistics": False, "store_schema": True}


def write_timeline(path: Path, columns: dict[str, Any]) -> None:
    """timeline.parquet: one row per reading and device group (netfl/sim/timeline.py); battery levels of a group
    on mains power are nulls."""
    write_devices(path, columns)


def write_devices(path: Path, columns: Mapping[str, Any]) -> None:
    """One row per device (devices.parquet); absent battery levels (mains power) are nulls. ``columns``: name -> one
    value per row; a :class:`~netfl.results.row_table.RowTable` is read a row group at a time, so that its
    derived columns are never made whole."""
    if isinstance(columns, RowTable):
        count, part = columns.count, columns.part
    else:
        whole = {name: v if isinstance(v, pd.Categorical) else np.asarray(v) for name, v in columns.items()}
        count = len(next(iter(whole.values()))) if whole else 0

        def part(start: int, stop: int) -> dict[str, Any]:
            return {name: values[start:stop] for name, values in whole.items()}

    if count <= ROW_GROUP_ROWS:
        pq.write_table(_arrow_table(part(0, count)), path, **PARQUET)
        return
    first = _arrow_table(part(0, ROW_GROUP_ROWS))
    with pq.ParquetWriter(path, first.schema, **PARQUET) as writer:
        writer.write_table(first)
        del first
        for start in range(ROW_GROUP_ROWS, count, ROW_GROUP_ROWS):
            writer.write_table(_arrow_table(part(start, min(count, start + ROW_GROUP_ROWS))))


def _arrow_table(columns: dict[str, Any]) -> pa.Table:
    """Columns as Arrow: a categorical as its strings, NaN in a float column as null."""
    arrays = {}
    for name, values in columns.items():
        if isinstance(values, pd.Categorical):  # written as the strings: devices.parquet's group column
            codes = pa.array(values.codes, type=pa.int32())
            arrays[name] = pa.DictionaryArray.from_arrays(codes, list(values.categories)).dictionary_decode()
            continue
        values = np.asarray(values)
        arrays[name] = pa.array(values, mask=np.isnan(values)) if values.dtype.kind == "f" else pa.array(values)
    return pa.table(arrays)
