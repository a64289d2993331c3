"""Trace files read into arrays: FedScale's pickles and netfl's CSV of intervals.

Each file is read once per process (cached by resolved path and modification
time), checked, and kept only as arrays (:class:`~netfl.policies.trace_arrays.Toggles`):
the unpickled dict or the CSV's rows are dropped once converted, so a trace
of 10^5 clients costs about 8 bytes per interval bound and a few per client.
Every problem names the file and the client or line.
"""

from __future__ import annotations

import csv
import math
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from netfl.errors import PolicyError
from netfl.policies.trace_arrays import Toggles, merge_intervals

__all__ = ["PICKLE_REFUSED", "CsvFile", "FedScaleFile", "load_csv", "load_fedscale"]

#: Why a pickle is not read without the opt-in, and what to do instead.
PICKLE_REFUSED = (
    "a FedScale trace is a Python pickle, and unpickling runs whatever code the file holds; convert it "
    "once, from a source you trust, with `netfl trace convert TRACE.pkl trace.csv --allow-pickle` and use "
    "policy trace_csv, or set trust_pickle: true beside file"
)


# ---------------------------------------------------------------- FedScale


class FedScaleFile:
    """One FedScale trace: its clients in sorted id order (``ids``), each one row of ``toggles`` repeating every
    ``finish_time`` (online intervals clipped to ``[0, finish_time)``, as FedScale never looks past it)."""

    def __init__(self, path: Path, data: dict[Any, Any]):
        self.path = path
        try:
            keys = sorted(data)
        except TypeError:  # mixed id types: a stable order all the same
            keys = sorted(data, key=lambda k: (type(k).__name__, str(k)))
        owner, starts, ends, finish = _fedscale_columns(path, data, keys)
        starts, ends = np.maximum(starts, 0.0), np.minimum(ends, finish[owner])
        self.toggles = Toggles(*merge_intervals(owner, starts, ends, len(keys)), finish)
        self.ids: np.ndarray | list[Any] = _compact(keys)

    @property
    def count(self) -> int:
        return len(self.ids)

    def client_id(self, row: int) -> Any:
        key = self.ids[row]
        return key.item() if isinstance(key, np.generic) else key


def _compact(keys: list[Any]) -> np.ndarray | list[Any]:
    """Integer ids as an array (8 bytes each), others as they are."""
    if all(type(k) is int for k in keys):
        try:
            return np.array(keys, dtype=np.int64)
        except OverflowError:
            pass
    return keys


def _fedscale_columns(
    path: Path, data: dict[Any, Any], keys: list[Any]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(client row of each interval, starts, ends, each client's finish_time), read in one pass; a trace that
    fails any check is read again client by client to say which and why."""
    finish = np.empty(len(keys))
    counts = np.empty(len(keys), dtype=np.int64)
    starts: list[Any] = []
    ends: list[Any] = []
    try:
        for row, key in enumerate(keys):
            record = data[key]
            if not isinstance(record, Mapping):
                raise TypeError
            active, inactive = record["active"], record["inactive"]
            finish[row] = record["finish_time"]
            counts[row] = len(active)
            if len(inactive) != counts[row]:
                raise ValueError
            starts.extend(active)
            ends.extend(inactive)
        s, e = np.array(starts, dtype=float), np.array(ends, dtype=float)
        good = (
            s.shape == e.shape == (int(counts.sum()),)  # one number per entry: a list of lists is no trace
            and np.isfinite(finish).all()
            and (finish > 0).all()
            and np.isfinite(s).all()
            and np.isfinite(e).all()
            and (s <= e).all()
        )
    except Exception:  # noqa: BLE001 -- whatever the pickle holds: the slow pass says what is wrong
        good = False
    if not good:
        for key in keys:
            _check_client(path, key, data[key])
        raise PolicyError(f"{path}: the trace's clients could not be read as numbers")
    return np.repeat(np.arange(len(keys)), counts), s, e, finish


def _check_client(path: Path, key: Any, record: Any) -> None:
    """Raise the problem with one client's record, if it has one."""
    where = f"{path}: client {key!r}"
    if not isinstance(record, Mapping):
        raise PolicyError(
            f"{where}: expected a dict with 'active', 'inactive' and 'finish_time', got {type(record).__name__}"
        )
    missing = [k for k in ("active", "inactive", "finish_time") if k not in record]
    if missing:
        raise PolicyError(
            f"{where}: missing key(s) {', '.join(map(repr, missing))} (has {', '.join(map(repr, record))})"
        )
    try:
        finish = float(record["finish_time"])
        active = [float(x) for x in record["active"]]
        inactive = [float(x) for x in record["inactive"]]
    except (TypeError, ValueError) as exc:
        raise PolicyError(
            f"{where}: 'finish_time' must be a number and 'active'/'inactive' lists of numbers ({exc})"
        ) from None
    if not (math.isfinite(finish) and finish > 0):
        raise PolicyError(f"{where}: 'finish_time' must be > 0, got {record['finish_time']!r}")
    if len(active) != len(inactive):
        raise PolicyError(f"{where}: 'active' has {len(active)} entries but 'inactive' {len(inactive)}")
    for i, (start, end) in enumerate(zip(active, inactive)):
        if not (math.isfinite(start) and math.isfinite(end) and start <= end):
            raise PolicyError(f"{where}: interval {i} [{start:g}, {end:g}) is not an interval")


_fedscale_cache: dict[tuple[str, int], FedScaleFile] = {}


def load_fedscale(path: Path, *, trusted: bool) -> FedScaleFile:
    """The trace in ``path``, unpickled only if ``trusted`` (the user's explicit opt-in)."""
    if not trusted:
        raise PolicyError(f"{path}: {PICKLE_REFUSED}")
    if not path.is_file():
        raise PolicyError(f"{path}: FedScale trace file not found")
    key = (str(path.resolve()), path.stat().st_mtime_ns)
    if key not in _fedscale_cache:
        try:
            with open(path, "rb") as fh:
                data = pickle.load(fh)  # noqa: S301 -- documented: only load trusted files
        except Exception as exc:
            raise PolicyError(
                f"{path}: cannot read the FedScale trace (a pickle): {type(exc).__name__}: {exc}"
            ) from None
        if not isinstance(data, dict) or not data:
            raise PolicyError(
                f"{path}: expected a pickled non-empty dict client id -> {{'active': [...], "
                f"'inactive': [...], 'finish_time': ...}}, got {type(data).__name__}"
                f"{' (empty)' if isinstance(data, dict) else ''}"
            )
        _fedscale_cache[key] = FedScaleFile(path, data)
    return _fedscale_cache[key]


# --------------------------------------------------------------------- CSV

_HEADER = ["device", "start_s", "end_s"]


class CsvFile:
    """One CSV of online intervals: the devices it lists (``ids``, sorted), their merged intervals (CSR, one more
    row, empty, for every device it does not list) and the row with the latest end (checked against a period)."""

    def __init__(self, path: Path, devices: list[int], starts: list[float], ends: list[float], lines: list[int]):
        self.path = path
        device = np.array(devices, dtype=np.int64)
        self.ids = np.unique(device)
        end = np.array(ends, dtype=float)
        latest = int(np.argmax(end)) if len(end) else -1
        self.latest = (float(end[latest]), lines[latest]) if latest >= 0 else (0.0, 0)
        owner = np.searchsorted(self.ids, device)
        self.offsets, self.bounds = merge_intervals(owner, np.array(starts, dtype=float), end, len(self.ids) + 1)
        self._toggles: dict[float | None, Toggles] = {}

    def rows_of(self, devices: np.ndarray) -> np.ndarray:
        """Each device's row; the empty last row for a device the file does not list (never online)."""
        rows = np.searchsorted(self.ids, devices)
        listed = rows < len(self.ids)
        listed[listed] = self.ids[rows[listed]] == devices[listed]
        return np.where(listed, rows, len(self.ids))

    def toggles(self, period: float | None) -> Toggles:
        """The intervals as change points, repeating every ``period`` when given (they must end by then)."""
        if period is not None and self.latest[0] > period:
            end, line = self.latest
            raise PolicyError(
                f"{self.path}:{line}: end_s {end:g} is after the period ({period:g} s); intervals must lie "
                "within one period"
            )
        if period not in self._toggles:
            every = None if period is None else np.full(len(self.ids) + 1, float(period))
            self._toggles[period] = Toggles(self.offsets, self.bounds, every)
        return self._toggles[period]


_csv_cache: dict[tuple[str, int], CsvFile] = {}


def load_csv(path: Path) -> CsvFile:
    """The interval trace in ``path``, checked row by row."""
    if not path.is_file():
        raise PolicyError(f"{path}: interval trace file not found")
    key = (str(path.resolve()), path.stat().st_mtime_ns)
    if key in _csv_cache:
        return _csv_cache[key]
    try:
        trace = CsvFile(path, *_read_csv(path))
    except UnicodeDecodeError as exc:
        raise PolicyError(
            f"{path}: not a UTF-8 text file ({exc.reason} at byte {exc.start}); write the trace as CSV text"
        ) from None
    except (OSError, csv.Error) as exc:
        raise PolicyError(f"{path}: cannot read the interval trace: {exc}") from None
    _csv_cache[key] = trace
    return trace


def _read_csv(path: Path) -> tuple[list[int], list[float], list[float], list[int]]:
    devices: list[int] = []
    starts: list[float] = []
    ends: list[float] = []
    lines: list[int] = []
    with open(path, newline="", encoding="utf-8-sig") as fh:  # -sig: spreadsheets start with a byte-order mark
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None or [h.strip() for h in header] != _HEADER:
            got = "an empty file" if header is None else repr(",".join(header))
            raise PolicyError(f"{path}:1: the header must be {','.join(_HEADER)}, got {got}")
        for row in reader:
            line = reader.line_num
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != 3:
                raise PolicyError(f"{path}:{line}: expected 3 fields ({','.join(_HEADER)}), got {len(row)}")
            try:
                device = int(row[0])
            except ValueError:
                device = -1
            if not 0 <= device < 2**63:
                raise PolicyError(f"{path}:{line}: device must be a device index (an integer >= 0), got {row[0]!r}")
            try:
                start, end = float(row[1]), float(row[2])
            except ValueError:
                raise PolicyError(
                    f"{path}:{line}: start_s and end_s must be numbers of seconds, got {row[1]!r}, {row[2]!r}"
                ) from None
            if not (math.isfinite(start) and math.isfinite(end) and 0 <= start < end):
                raise PolicyError(f"{path}:{line}: need 0 <= start_s < end_s, got {row[1]!r}, {row[2]!r}")
            devices.append(device)
            starts.append(start)
            ends.append(end)
            lines.append(line)
    return devices, starts, ends, lines
