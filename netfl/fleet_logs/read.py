"""Reading device logs, streamed one device at a time, whatever the format.

The format is told by the path: ``.json`` is FLASH's file (:mod:`netfl.fleet_logs.flash`), ``.csv`` (or
``.csv.gz``) and ``.parquet`` (or ``.pq``) the long table (:mod:`netfl.fleet_logs.table`); a folder holds
such files, read in name order as one log set (a device in one file only).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from netfl.fleet_logs.checks import checked_log
from netfl.fleet_logs.flash import iter_entries, parse_device
from netfl.fleet_logs.records import DeviceLog, LogError
from netfl.fleet_logs.table import TableDevices, csv_batches, parquet_batches

SUFFIXES = {".json": "flash", ".csv": "csv", ".csv.gz": "csv", ".parquet": "parquet", ".pq": "parquet"}
FORMATS = ("flash", "csv", "parquet")
ACCEPTED_PATHS = "a FLASH .json file, a .csv or .parquet table (device, time, state, value), or a folder of them"


def detect_format(path: str | Path) -> str:
    """``"flash"``, ``"csv"`` or ``"parquet"`` from the file's name; a LogError for anything else."""
    name = Path(path).name.lower()
    for suffix in sorted(SUFFIXES, key=len, reverse=True):
        if name.endswith(suffix):
            return SUFFIXES[suffix]
    raise LogError(str(path), None, 0, f"unknown device-log format; accepted: {ACCEPTED_PATHS}")


def log_files(path: str | Path) -> list[Path]:
    """The files of a log set: the file itself, or a folder's log files in name order."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and _known(p))
        if not files:
            raise LogError(str(path), None, 0, f"folder holds no device logs; accepted: {ACCEPTED_PATHS}")
        return files
    detect_format(path)
    if not path.exists():
        raise LogError(str(path), None, 0, f"no such file; accepted: {ACCEPTED_PATHS}")
    return [path]


def _known(path: Path) -> bool:
    try:
        detect_format(path)
    except LogError:
        return False
    return True


def iter_device_logs(path: str | Path, origin: str | np.datetime64 | None = None) -> Iterator[DeviceLog]:
    """Each device's log in turn, checked (a LogError names the file, device and line of the first problem).

    ``origin``: the moment of time 0 for timestamped logs (a date or time, e.g. ``"2020-01-02"``); by default
    midnight of the first event's day in the log set. Logs timed in seconds are taken as they are.
    """
    start = None if origin is None else np.datetime64(origin, "us")
    seen: set[str] = set()
    state = {"origin": start}
    for file in log_files(path):
        fmt = detect_format(file)
        logs = _flash(file, state) if fmt == "flash" else _table(file, fmt, state)
        for log in logs:
            if log.device in seen:
                raise LogError(
                    str(file),
                    log.device,
                    0,
                    "appears twice in the log set; accepted: each device once (rows grouped by device)",
                )
            seen.add(log.device)
            yield log


def _flash(file: Path, state: dict) -> Iterator[DeviceLog]:
    source = str(file)
    for key, record, line in iter_entries(file):
        device, times, kinds, values, lines, state["origin"] = parse_device(source, key, record, line, state["origin"])
        yield checked_log(source, device, times, kinds, values, lines, numbered=True)


def _table(file: Path, fmt: str, state: dict) -> Iterator[DeviceLog]:
    source = str(file)
    table = TableDevices(source, state["origin"])
    batches = csv_batches(file) if fmt == "csv" else parquet_batches(file)
    current: str | None = None
    parts: list[tuple[np.ndarray, ...]] = []
    done: set[str] = set()
    for batch in batches:
        if not batch.num_rows:
            continue
        first_line = table.line(0)
        devices, times, kinds, values = table.columns(batch)
        state["origin"] = table.origin
        lines = np.arange(first_line, first_line + len(devices), dtype=np.int64)
        cuts = np.flatnonzero(devices[1:] != devices[:-1]) + 1
        starts = np.concatenate(([0], cuts))
        ends = np.concatenate((cuts, [len(devices)]))
        for a, b in zip(starts.tolist(), ends.tolist()):
            device = devices[a]
            if device != current:
                if current is not None:
                    yield _finish(source, current, parts)
                    done.add(current)
                if device in done:
                    raise LogError(
                        source,
                        device,
                        int(lines[a]),
                        "rows are not together; accepted: rows grouped by device (sort by device, then time)",
                    )
                current, parts = device, []
            parts.append((times[a:b], kinds[a:b], values[a:b], lines[a:b]))
    if current is not None:
        yield _finish(source, current, parts)


def _finish(source: str, device: str, parts: list[tuple[np.ndarray, ...]]) -> DeviceLog:
    times, kinds, values, lines = (np.concatenate(column) for column in zip(*parts))
    return checked_log(source, device, times, kinds, values, lines)
