"""Reading device logs, streamed one device at a time, whatever the format.

The format is told by the path: ``.json`` is FLASH's file (:mod:`netfl.fleet_logs.flash`), ``.csv`` (or
``.csv.gz``) and ``.parquet`` (or ``.pq``) the long table (:mod:`netfl.fleet_logs.table`); a folder holds
such files, read in name order as one log set (a device in one file only).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from netfl.fleet_logs.checks import checked_block, checked_log
from netfl.fleet_logs.flash import iter_entries, parse_block, parse_device
from netfl.fleet_logs.records import DeviceLog, LogBlock, LogError
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
    for block in iter_log_blocks(path, origin):
        yield from block.logs()


def iter_log_blocks(path: str | Path, origin: str | np.datetime64 | None = None) -> Iterator[LogBlock]:
    """The log set as blocks of consecutive devices (:class:`LogBlock`; a table's batch, a FLASH file's device),
    checked as :func:`iter_device_logs` checks them: for code that works on many devices at once."""
    start = None if origin is None else np.datetime64(origin, "us")
    seen: set[str] = set()
    state = {"origin": start}
    for file in log_files(path):
        fmt = detect_format(file)
        blocks = _flash(file, state) if fmt == "flash" else _table(file, fmt, state)
        for block in blocks:
            again = seen.intersection(block.devices)
            if again:
                raise LogError(
                    str(file),
                    next(d for d in block.devices if d in again),
                    0,
                    "appears twice in the log set; accepted: each device once (rows grouped by device)",
                )
            seen.update(block.devices)
            yield block


#: FLASH records parsed together (a block), and the characters of messages that close one early.
FLASH_BLOCK_DEVICES = 2048
FLASH_BLOCK_CHARS = 1 << 24


def _flash(file: Path, state: dict) -> Iterator[LogBlock]:
    """Blocks of records parsed together; a block with any problem parsed again record by record, which names it
    (the first of its records with a problem: the same one-line message as from a file of that record alone)."""
    source = str(file)
    pending: list[tuple[str, object, int]] = []
    chars = 0
    for entry in iter_entries(file):
        pending.append(entry)
        record = entry[1]
        chars += (
            len(record.get("messages", ""))
            if isinstance(record, dict) and isinstance(record.get("messages"), str)
            else 0
        )
        if len(pending) >= FLASH_BLOCK_DEVICES or chars >= FLASH_BLOCK_CHARS:
            yield from _flash_block(source, pending, state)
            pending, chars = [], 0
    if pending:
        yield from _flash_block(source, pending, state)


def _flash_block(source: str, entries: list[tuple[str, object, int]], state: dict) -> Iterator[LogBlock]:
    parsed = parse_block(entries, state["origin"])
    if parsed is not None:
        devices, offsets, times, kinds, values, lines, origin = parsed
        try:
            block = checked_block(source, devices, offsets, times, kinds, values, lines)
        except LogError:
            pass  # said again below, with the message's number
        else:
            state["origin"] = origin
            yield block
            return
    for key, record, line in entries:
        device, times, kinds, values, lines, state["origin"] = parse_device(source, key, record, line, state["origin"])
        yield LogBlock.of(checked_log(source, device, times, kinds, values, lines, numbered=True))


def _table(file: Path, fmt: str, state: dict) -> Iterator[LogBlock]:
    """Blocks of the devices each batch completes; the batch's last device is carried to the next one."""
    source = str(file)
    table = TableDevices(source, state["origin"])
    batches = csv_batches(file) if fmt == "csv" else parquet_batches(file)
    carry: tuple[np.ndarray, ...] | None = None
    done: set[str] = set()
    for batch in batches:
        if not batch.num_rows:
            continue
        first_line = table.line(0)
        devices, cuts, *columns = table.columns(batch)
        state["origin"] = table.origin
        lines = np.arange(first_line, first_line + batch.num_rows, dtype=np.int64)
        rows = (devices, *columns, lines)
        if carry is not None:
            held = len(carry[0])
            cuts = np.concatenate([[held] if carry[0][-1] != devices[0] else [], cuts + held]).astype(np.int64)
            rows = tuple(np.concatenate([c, r]) for c, r in zip(carry, rows))
        last = int(cuts[-1]) if len(cuts) else 0
        carry = tuple(column[last:] for column in rows)
        if last:
            yield _block(source, tuple(column[:last] for column in rows), cuts[:-1], done)
    if carry is not None:
        yield _block(source, carry, np.zeros(0, dtype=np.int64), done)


def _block(source: str, rows: tuple[np.ndarray, ...], cuts: np.ndarray, done: set[str]) -> LogBlock:
    devices, times, kinds, values, lines = rows
    starts = np.concatenate(([0], cuts)).astype(np.int64)
    ids = devices[starts].tolist()
    if len(set(ids)) < len(ids) or not done.isdisjoint(ids):
        seen = set(done)
        for start, device in zip(starts.tolist(), ids):
            if device in seen:
                raise LogError(
                    source,
                    device,
                    int(lines[start]),
                    "rows are not together; accepted: rows grouped by device (sort by device, then time)",
                )
            seen.add(device)
    done.update(ids)
    offsets = np.append(starts, len(devices))
    return checked_block(source, ids, offsets, times, kinds, values, lines)
