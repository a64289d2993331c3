"""The long table of device logs: one row per state change, columns ``device, time, state, value``, rows
grouped by device and in time order within a device (CSV or parquet).

``state`` is a kind's name (``screen``, ``lock``, ``charger``, ``network``, ``battery``; any case) and
``value`` its number (see :mod:`netfl.fleet_logs.states`). ``time`` is either seconds since the log set's
origin (a number) or a timestamp (ISO 8601, ``2020-01-02 07:30:00`` or ``2020-01-02T07:30:00``, naive: the
device's local clock), then measured from midnight of the first row's day unless an origin is given.

Read in batches (a CSV in blocks, a parquet file by row groups), so a table of 10^8 rows is never held whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from netfl.fleet_logs.records import LogError
from netfl.fleet_logs.states import KIND_BY_NAME

COLUMNS = ("device", "time", "state", "value")
BATCH_ROWS = 1 << 18
_NAMES = pa.array(list(KIND_BY_NAME))
_DICTIONARY = pa.dictionary(pa.int32(), pa.string())  # a table's device and state columns, read by their codes
_KIND_OF_INDEX = np.array(list(KIND_BY_NAME.values()), dtype=np.int8)
ACCEPTED_STATES = ", ".join(KIND_BY_NAME)


def csv_batches(path: Path) -> Iterator[pa.RecordBatch]:
    import pyarrow.csv as pacsv

    try:
        reader = pacsv.open_csv(
            path,
            read_options=pacsv.ReadOptions(block_size=1 << 22),
            convert_options=pacsv.ConvertOptions(
                column_types={name: _DICTIONARY if name in ("device", "state") else pa.string() for name in COLUMNS},
                include_columns=list(COLUMNS),
            ),
        )
    except (pa.ArrowInvalid, KeyError) as e:
        raise LogError(
            str(path), None, 1, f"not a device-log table ({_short(e)}); accepted columns: " + ", ".join(COLUMNS)
        ) from None
    while True:
        try:
            batch = reader.read_next_batch()
        except StopIteration:
            return
        except pa.ArrowInvalid as e:
            raise LogError(str(path), None, 0, f"unparseable CSV: {_short(e)}") from None
        yield batch


def parquet_batches(path: Path) -> Iterator[pa.RecordBatch]:

    try:
        f = _open_parquet(path)
    except (pa.ArrowInvalid, OSError) as e:
        raise LogError(str(path), None, 0, f"not a parquet file ({_short(e)})") from None
    missing = [c for c in COLUMNS if c not in f.schema_arrow.names]
    if missing:
        raise LogError(
            str(path), None, 1, f"has no column {', '.join(missing)}; accepted columns: " + ", ".join(COLUMNS)
        )
    yield from f.iter_batches(batch_size=BATCH_ROWS, columns=list(COLUMNS))


def _open_parquet(path: Path):
    import pyarrow.parquet as pq

    return pq.ParquetFile(path, read_dictionary=["device", "state"])


def _short(e: Exception) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


class TableDevices:
    """Turns a table's batches into per-device arrays, checking each column as it goes; the origin (for
    timestamp times) is fixed by the first timestamp seen."""

    def __init__(self, source: str, origin: np.datetime64 | None):
        self.source = source
        self.origin = origin
        self.row = 0  # rows consumed so far
        self.time_form: str | None = None  # "seconds" or "timestamps", fixed by the first batch

    def _form(self, form: str, devices: np.ndarray) -> None:
        if self.time_form is None:
            self.time_form = form
        elif self.time_form != form:
            raise LogError(
                self.source,
                devices[0],
                self.line(0),
                f"time is given as {form} here, as {self.time_form} above; accepted: one or the other throughout",
            )

    def line(self, i: int) -> int:
        return self.row + i + 2  # header = line 1

    def columns(self, batch: pa.RecordBatch):
        """(devices as objects, where each device's run starts, times, kinds, values) of one batch, or a LogError
        at the first bad row. Dictionary-encoded columns (as the readers ask for them) are read by their codes:
        the strings of 10^8 rows are never made, only those of each run's device."""
        column = batch.column("device")
        if column.null_count:
            i = int(np.argmax(column.is_null().to_numpy(zero_copy_only=False)))
            raise LogError(self.source, None, self.line(i), "device is missing")
        if pa.types.is_dictionary(column.type):
            codes = column.indices.to_numpy(zero_copy_only=False)
            names = np.array(pc.cast(column.dictionary, pa.string()).to_pylist(), dtype=object)
            runs = np.flatnonzero(codes[1:] != codes[:-1]) + 1
            devices = names[codes]
            runs = runs[devices[runs] != devices[runs - 1]]  # a dictionary holding a name twice
        else:
            devices = pc.cast(column, pa.string()).to_numpy(zero_copy_only=False)
            runs = np.flatnonzero(devices[1:] != devices[:-1]) + 1
        times = self._times(batch.column("time"), devices)
        states = batch.column("state")
        if pa.types.is_dictionary(states.type):
            words = pc.index_in(pc.utf8_lower(pc.utf8_trim_whitespace(pc.cast(states.dictionary, pa.string()))),
                                value_set=_NAMES)  # fmt: skip
            index = np.asarray(words.fill_null(-1).to_numpy(zero_copy_only=False))[
                states.indices.to_numpy(zero_copy_only=False)
            ]
        else:
            words = pc.index_in(pc.utf8_lower(pc.utf8_trim_whitespace(pc.cast(states, pa.string()))), value_set=_NAMES)
            index = words.fill_null(-1).to_numpy(zero_copy_only=False)
        if (index < 0).any():
            i = int(np.argmax(index < 0))
            raise LogError(
                self.source,
                devices[i],
                self.line(i),
                f"unknown state {states[i].as_py()!r}; accepted: {ACCEPTED_STATES}",
            )
        kinds = _KIND_OF_INDEX[index]
        values = self._numbers(batch.column("value"), devices, "value", "a number")
        self.row += batch.num_rows
        return devices, runs, times, kinds, values

    def _numbers(self, column: pa.Array, devices: np.ndarray, name: str, accepted: str) -> np.ndarray:
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            column = pc.utf8_trim_whitespace(column)
        try:
            out = pc.cast(column, pa.float64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # the first cell Arrow cannot read, by its own rule
            for i, cell in enumerate(column.to_pylist()):
                try:
                    pc.cast(column.slice(i, 1), pa.float64())
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    what = f"{name} is missing" if cell in (None, "") else f"{name} {cell!r} is not {accepted}"
                    raise LogError(self.source, devices[i], self.line(i), what) from None
            raise LogError(self.source, None, 0, f"column {name!r} ({column.type}) is not {accepted}") from None
        if out.null_count:
            i = int(np.argmax(out.is_null().to_numpy(zero_copy_only=False)))
            raise LogError(self.source, devices[i], self.line(i), f"{name} is missing; accepted: {accepted}")
        return out.to_numpy(zero_copy_only=False)

    def _times(self, column: pa.Array, devices: np.ndarray) -> np.ndarray:
        kind = column.type
        if pa.types.is_timestamp(kind):
            stamps = pc.cast(column, pa.timestamp("us")).to_numpy(zero_copy_only=False).astype("datetime64[us]")
        elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
            column = pc.utf8_trim_whitespace(column)
            try:
                seconds = pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False)
            except pa.ArrowInvalid:
                pass
            else:
                self._form("seconds", devices)
                return seconds
            try:
                stamps = pc.cast(column, pa.timestamp("us")).to_numpy(zero_copy_only=False).astype("datetime64[us]")
            except pa.ArrowInvalid:
                for i, cell in enumerate(column.to_pylist()):
                    if cell in (None, ""):
                        raise LogError(self.source, devices[i], self.line(i), "time is missing") from None
                    try:
                        float(cell)
                        continue
                    except (TypeError, ValueError):
                        pass
                    try:
                        pc.cast(pa.array([cell]), pa.timestamp("us"))
                    except pa.ArrowInvalid:
                        raise LogError(
                            self.source,
                            devices[i],
                            self.line(i),
                            f"time {cell!r} is not a time; accepted: seconds or an ISO timestamp (2020-01-02 07:30:00)",
                        ) from None
                raise LogError(
                    self.source,
                    devices[0],
                    self.line(0),
                    "times mix seconds and timestamps; accepted: one or the other",
                ) from None
        else:
            self._form("seconds", devices)
            return self._numbers(column, devices, "time", "seconds or an ISO timestamp")
        self._form("timestamps", devices)
        if np.isnat(stamps).any():
            i = int(np.argmax(np.isnat(stamps)))
            raise LogError(self.source, devices[i], self.line(i), "time is missing")
        if self.origin is None:
            self.origin = stamps[0].astype("datetime64[D]").astype("datetime64[us]")
        return (stamps - self.origin).astype(np.int64) / 1e6


def _device_runs(batches: Iterator[pa.RecordBatch], enough: int) -> int:
    """Runs of equal devices in the device column (the devices of a well-grouped table), up to ``enough``."""
    count, last = 0, None
    for batch in batches:
        devices = pc.cast(batch.column(0), pa.string()).to_numpy(zero_copy_only=False)
        if not len(devices):
            continue
        count += int(np.count_nonzero(devices[1:] != devices[:-1])) + (devices[0] != last)
        last = devices[-1]
        if count >= enough:
            break
    return count


def csv_device_runs(path: Path, enough: int) -> int:
    """How many devices a CSV table holds (its device column alone read), counted up to ``enough``."""
    import pyarrow.csv as pacsv

    try:
        reader = pacsv.open_csv(
            path,
            read_options=pacsv.ReadOptions(block_size=1 << 22),
            convert_options=pacsv.ConvertOptions(column_types={"device": pa.string()}, include_columns=["device"]),
        )
    except (pa.ArrowInvalid, KeyError) as e:
        raise LogError(
            str(path), None, 1, f"not a device-log table ({_short(e)}); accepted columns: " + ", ".join(COLUMNS)
        ) from None
    return _device_runs(iter(reader), enough)


def parquet_device_runs(path: Path, enough: int) -> int:
    """How many devices a parquet table holds (its device column alone read), counted up to ``enough``."""

    batches = _open_parquet(path).iter_batches(batch_size=1 << 20, columns=["device"])
    return _device_runs(batches, enough)
