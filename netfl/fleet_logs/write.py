"""Writing device logs in each format, streamed and atomically: the output is written to a temporary file
beside it and renamed only once complete, so a failure never leaves half a file under the name.

What each format stores (read back by :func:`netfl.fleet_logs.read.iter_device_logs` to the same logs):

- ``flash``: FLASH's JSON (keys ``"0"``, ``"1"``, ...; ``guid`` the device; ``messages`` the lines
  ``YYYY-MM-DD HH:MM:SS<TAB>state``), timestamps from ``origin`` (default 2020-01-02, FLASH's reference
  day). FLASH's own reader takes whole seconds; a fractional time is written with its microseconds.
  Reading it back measures time from midnight of the first event's day, so it gives the same times when the
  first device's first event lies on day 0 (or when the reader is given the same origin).
- ``csv`` / ``parquet``: the long table ``device, time, state, value``, time in seconds since the origin.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

from netfl.fleet_logs.read import FORMATS
from netfl.fleet_logs.records import DeviceLog
from netfl.fleet_logs.states import BATTERY, CHARGER, KIND_NAMES, LOCK, NETWORK, NETWORK_NAMES, SCREEN

ROWS_PER_GROUP = 1 << 20
_WORDS = {
    (SCREEN, 1.0): "screen_on",
    (SCREEN, 0.0): "screen_off",
    (LOCK, 1.0): "screen_lock",
    (LOCK, 0.0): "screen_unlock",
    (CHARGER, 1.0): "battery_charged_on",
    (CHARGER, 0.0): "battery_charged_off",
    **{(NETWORK, float(v)): ("unknown" if v == 0 else name) for v, name in NETWORK_NAMES.items()},
}
_SCHEMA = pa.schema([("device", pa.string()), ("time", pa.float64()), ("state", pa.string()), ("value", pa.float64())])
_KIND_NAME_ARRAY = np.array([""] + [KIND_NAMES[k] for k in sorted(KIND_NAMES)], dtype=object)


def write_device_logs(logs: Iterable[DeviceLog], path: str | Path, fmt: str, origin: str = "2020-01-02") -> Path:
    """Write ``logs`` to ``path`` in ``fmt`` (``"flash"``, ``"csv"`` or ``"parquet"``); returns the path."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown device-log format {fmt!r}; accepted: {', '.join(FORMATS)}")
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        if fmt == "flash":
            _write_flash(logs, temporary, np.datetime64(origin, "us"))
        else:
            _write_table(logs, temporary, fmt)
        os.replace(temporary, path)
    finally:
        if temporary.exists():
            temporary.unlink()
    return path


def _write_flash(logs: Iterable[DeviceLog], path: Path, origin: np.datetime64) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write("{")
        for n, log in enumerate(logs):
            record = {"guid": log.device, "messages": _messages(log, origin)}
            f.write(("," if n else "") + "\n" + json.dumps(str(n)) + ": " + json.dumps(record))
        f.write("\n}\n")


def _messages(log: DeviceLog, origin: np.datetime64) -> str:
    micros = np.round(log.times * 1e6).astype(np.int64)
    unit = "s" if not (micros % 1_000_000).any() else "us"
    stamps = np.datetime_as_string(origin + micros.astype("timedelta64[us]"), unit=unit)
    lines = []
    for stamp, kind, value in zip(stamps.tolist(), log.kinds.tolist(), log.values.tolist()):
        word = _percent(value) if kind == BATTERY else _WORDS[(kind, value)]
        lines.append(stamp.replace("T", " ") + "\t" + word)
    return "\n".join(lines)


def _percent(value: float) -> str:
    return (str(int(value)) if float(value).is_integer() else repr(float(value))) + "%"


def _batches(logs: Iterable[DeviceLog]) -> Iterator[pa.RecordBatch]:
    """The logs as table batches of about ROWS_PER_GROUP rows (whole devices each)."""
    parts: list[DeviceLog] = []
    rows = 0
    for log in logs:
        parts.append(log)
        rows += len(log)
        if rows >= ROWS_PER_GROUP:
            yield _batch(parts)
            parts, rows = [], 0
    if parts:
        yield _batch(parts)


def _batch(parts: list[DeviceLog]) -> pa.RecordBatch:
    devices = np.repeat(np.array([p.device for p in parts], dtype=object), [len(p) for p in parts])
    kinds = np.concatenate([p.kinds for p in parts]).astype(np.int64)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(devices, pa.string()),
            pa.array(np.concatenate([p.times for p in parts]), pa.float64()),
            pa.array(_KIND_NAME_ARRAY[kinds], pa.string()),
            pa.array(np.concatenate([p.values for p in parts]), pa.float64()),
        ],
        schema=_SCHEMA,
    )


def _write_table(logs: Iterable[DeviceLog], path: Path, fmt: str) -> None:
    if fmt == "csv":
        import pyarrow.csv as pacsv

        with pacsv.CSVWriter(path, _SCHEMA) as writer:
            for batch in _batches(logs):
                writer.write_batch(batch)
    else:
        import pyarrow.parquet as pq

        with pq.ParquetWriter(path, _SCHEMA) as writer:
            for batch in _batches(logs):
                writer.write_table(pa.Table.from_batches([batch]), row_group_size=ROWS_PER_GROUP)
