"""Availability replayed from measured traces.

* ``fedscale_trace`` -- FedScale's device-behaviour trace (Lai et al.,
  "FedScale: Benchmarking Model and System Performance of Federated Learning
  at Scale", ICML 2022; format and rule from SymbioticLab/FedScale,
  ``client_metadata.py: is_active``): a pickled dict
  ``client id -> {'duration', 'active': [s, ...], 'inactive': [s, ...],
  'finish_time', 'model'}``. Unpickling runs whatever code the file holds,
  so a pickle is read only on an explicit opt-in where the file is named:
  ``trust_pickle: true`` beside ``file`` in the topology, ``--allow-pickle``
  on ``netfl trace convert`` (:data:`PICKLE_REFUSED` otherwise). A client is online at ``t`` when
  ``t mod finish_time`` lies in some ``[active[i], inactive[i])``. (FedScale
  tests both ends inclusively with a stateful index; half-open intervals
  differ only on a set of measure zero.) Device ``n`` replays the client at
  position ``(n + client_offset) mod (number of clients)`` of the sorted ids.
* ``trace_csv`` -- a plain CSV ``device,start_s,end_s`` of online intervals,
  optionally repeated every ``period``: readable, editable, and safe to load.

Each file is read once per process (cached by resolved path and modification
time), however many devices replay it.
"""

from __future__ import annotations

import bisect
import csv
import math
import pickle
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from netfl.errors import PolicyError
from netfl.policies.base import DeviceInfo, DeviceState, PolicyParams, SessionPolicy
from netfl.units import Seconds

__all__ = [
    "FedScaleTrace",
    "IntervalTrace",
    "MAX_CSV_ROWS",
    "PICKLE_REFUSED",
    "fedscale_client_count",
    "fedscale_to_csv",
]


class _Intervals:
    """Disjoint half-open online intervals ``[start, end)``, repeating every ``period`` when given."""

    def __init__(self, intervals: Iterable[tuple[float, float]], period: float | None = None):
        merged: list[list[float]] = []
        for start, end in sorted((s, e) for s, e in intervals if e > s):
            if merged and start <= merged[-1][1]:  # overlapping or touching: one interval
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        self.intervals = [(s, e) for s, e in merged]
        self.period = period
        self._starts = [s for s, _ in merged]
        self._ends = [e for _, e in merged]
        self._bounds = [x for pair in merged for x in pair]
        self._constant = not merged or (period is not None and merged == [[0.0, period]])

    def _split(self, t: float) -> tuple[float, float]:
        """(start of the period containing t, t within it)."""
        if self.period is None:
            return 0.0, t
        cycle = math.floor(t / self.period)
        if t < cycle * self.period:  # rounding in t / period
            cycle -= 1
        elif t - cycle * self.period >= self.period:
            cycle += 1
        base = cycle * self.period
        return base, t - base

    def online(self, t: float) -> bool:
        _, local = self._split(t)
        i = bisect.bisect_right(self._starts, local) - 1
        return i >= 0 and local < self._ends[i]

    def next_change(self, t: float) -> float:
        if self._constant:
            return math.inf
        base, local = self._split(t)
        j = bisect.bisect_right(self._bounds, local)
        if j < len(self._bounds):
            at = base + self._bounds[j]
        elif self.period is None:
            return math.inf
        else:
            at = base + self.period + self._bounds[0]
        return at if at > t else math.nextafter(t, math.inf)


class _TracePolicy(SessionPolicy):
    _trace: _Intervals

    @classmethod
    def check(cls, params: PolicyParams, base_dir: Path) -> list[tuple[str, str]]:
        path = params.file if params.file.is_absolute() else base_dir / params.file
        if not path.is_file():
            return [(".file", f"{path}: file not found (a relative path starts at the topology file's folder)")]
        return []

    def online(self, now: float, state: DeviceState) -> bool:
        return self._trace.online(now)

    def next_wakeup(self, now: float) -> float:
        return self._trace.next_change(now)


# ---------------------------------------------------------------- FedScale


class _FedScaleFile:
    """One loaded FedScale trace; clients are checked and normalised on first use."""

    def __init__(self, path: Path, data: dict[Any, Any]):
        self.path = path
        self.data = data
        try:
            self.keys = sorted(data)
        except TypeError:  # mixed id types: a stable order all the same
            self.keys = sorted(data, key=lambda k: (type(k).__name__, str(k)))
        self._clients: dict[Any, tuple[list[tuple[float, float]], float]] = {}

    def client(self, key: Any) -> tuple[list[tuple[float, float]], float]:
        """(online intervals within [0, finish_time), finish_time) of client ``key``."""
        if key not in self._clients:
            self._clients[key] = self._normalise(key, self.data[key])
        return self._clients[key]

    def _normalise(self, key: Any, record: Any) -> tuple[list[tuple[float, float]], float]:
        where = f"{self.path}: client {key!r}"
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
        intervals = []
        for i, (start, end) in enumerate(zip(active, inactive)):
            if not (math.isfinite(start) and math.isfinite(end) and start <= end):
                raise PolicyError(f"{where}: interval {i} [{start:g}, {end:g}) is not an interval")
            intervals.append((max(start, 0.0), min(end, finish)))  # FedScale never looks past finish_time
        return intervals, finish


_fedscale_cache: dict[tuple[str, int], _FedScaleFile] = {}
#: Rows ``netfl trace convert`` writes at most (about 400 MB of CSV).
MAX_CSV_ROWS = 10_000_000

#: Why a pickle is not read without the opt-in, and what to do instead.
PICKLE_REFUSED = (
    "a FedScale trace is a Python pickle, and unpickling runs whatever code the file holds; convert it "
    "once, from a source you trust, with `netfl trace convert TRACE.pkl trace.csv --allow-pickle` and use "
    "policy trace_csv, or set trust_pickle: true beside file"
)


def _load_fedscale(path: Path, *, trusted: bool) -> _FedScaleFile:
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
        _fedscale_cache[key] = _FedScaleFile(path, data)
    return _fedscale_cache[key]


class FedScaleTrace(_TracePolicy):
    """Replay a FedScale device-behaviour trace (see the module docstring).

    The file is a Python pickle, and unpickling runs whatever code the file
    names: it is read only with ``trust_pickle: true``, for traces from a
    source you trust (FedScale's own ``client_behave_trace``); otherwise
    convert once with ``netfl trace convert`` and use ``trace_csv``.
    """

    class Params(PolicyParams):
        file: Path = Field(description="the pickled trace, relative to the topology file")
        client_offset: int = Field(0, ge=0, description="device n replays sorted client (n + offset) mod count")
        trust_pickle: bool = Field(
            False,
            description="read the pickle, which runs any code it holds: only for a "
            "trace from a source you trust (else convert it to CSV)",
        )

    @classmethod
    def check(cls, params: PolicyParams, base_dir: Path) -> list[tuple[str, str]]:
        return super().check(params, base_dir) + ([] if params.trust_pickle else [(".trust_pickle", PICKLE_REFUSED)])

    def __init__(self, params: PolicyParams, device: DeviceInfo, rng: np.random.Generator):
        super().__init__(params, device, rng)
        trace = _load_fedscale(device.resolve(params.file), trusted=params.trust_pickle)
        self.client_id = trace.keys[(device.index + params.client_offset) % len(trace.keys)]
        intervals, finish = trace.client(self.client_id)
        self._trace = _Intervals(intervals, finish)


def fedscale_to_csv(
    pickle_path: str | Path, csv_path: str | Path, num_devices: int | None = None, *, allow_pickle: bool = False
) -> float:
    """Write a FedScale trace as ``trace_csv`` rows and return the period to give that policy.

    ``allow_pickle``: the opt-in to unpickle the trace, which runs whatever code it holds (a PolicyError
    without it).

    Device ``n`` gets the client at sorted position ``n mod count`` (as
    ``fedscale_trace`` with ``client_offset: 0``); ``num_devices`` defaults
    to the number of clients. The period is the largest ``finish_time``;
    a client with a shorter one has its cycle tiled over that period, so the
    CSV replays FedScale exactly over the first period, and forever when all
    clients share one ``finish_time`` (FedScale's own trace: 518400 s). The
    rows that makes are counted first, and a conversion that would write more
    than :data:`MAX_CSV_ROWS` is refused (finish times 10^18 apart would
    otherwise loop 10^18 times, and ``num_devices`` far beyond the trace's
    clients repeat them as often): its time and memory are bounded by its
    input and that bound.
    """
    pickle_path = Path(pickle_path)
    trace = _load_fedscale(pickle_path, trusted=allow_pickle)
    count = len(trace.keys) if num_devices is None else num_devices
    if count < 1:
        raise PolicyError(f"{pickle_path}: {count} devices asked for; ask for at least 1")
    clients = [trace.client(key) for key in trace.keys]
    period, longest = max((finish, n) for n, (_, finish) in enumerate(clients))
    rows_per_client = [_tiled_rows(intervals, finish, period) for intervals, finish in clients]
    full, part = divmod(count, len(clients))
    rows = full * sum(rows_per_client) + sum(rows_per_client[:part])
    if rows > MAX_CSV_ROWS:
        if count > len(clients) and sum(rows_per_client) <= MAX_CSV_ROWS:
            why = f"{count:,} devices replay the trace's {len(clients):,} clients {count / len(clients):.3g} times over"
        else:
            n = max(range(len(clients)), key=rows_per_client.__getitem__)
            why = (
                f"client {trace.keys[n]!r}'s cycle of {clients[n][1]:g} s tiled over the trace's period, client "
                f"{trace.keys[longest]!r}'s {period:g} s"
            )
        raise PolicyError(
            f"{pickle_path}: the CSV would need {rows:.3g} rows ({why}); netfl writes at most {MAX_CSV_ROWS:,}: "
            "ask for fewer devices (--devices), or replay the trace as it is (policy fedscale_trace, "
            "trust_pickle: true), which repeats each client's own cycle"
        )
    clients = [clients[n % len(clients)] for n in range(count)]
    try:
        with open(csv_path, "w", newline="") as fh:
            out = csv.writer(fh)
            out.writerow(["device", "start_s", "end_s"])
            for n, (intervals, finish) in enumerate(clients):
                rows = set()
                for r in range(math.ceil(period / finish)):
                    for start, end in intervals:
                        start, end = r * finish + start, min(r * finish + end, period)
                        if start < end:
                            rows.add((start, end))
                for start, end in _Intervals(rows).intervals:
                    out.writerow([n, repr(start), repr(end)])
    except OSError as exc:
        raise PolicyError(f"{csv_path}: cannot write the CSV: {exc.strerror or exc}") from None
    return period


def _tiled_rows(intervals: list[tuple[float, float]], finish: float, period: float) -> float:
    """Rows a client's intervals make once its cycle is tiled over ``period`` (inf past what a float counts)."""
    if not intervals:
        return 0
    tiles = period / finish
    return math.ceil(tiles) * len(intervals) if math.isfinite(tiles) else math.inf


def fedscale_client_count(pickle_path: str | Path, *, allow_pickle: bool = False) -> int:
    """How many clients the FedScale trace holds (read once per process, like every trace)."""
    return len(_load_fedscale(Path(pickle_path), trusted=allow_pickle).keys)


# --------------------------------------------------------------------- CSV

_csv_cache: dict[tuple[str, int], dict[int, list[tuple[float, float, int]]]] = {}
_HEADER = ["device", "start_s", "end_s"]


def _load_csv(path: Path) -> dict[int, list[tuple[float, float, int]]]:
    """device -> [(start, end, line number)], checked row by row."""
    if not path.is_file():
        raise PolicyError(f"{path}: interval trace file not found")
    key = (str(path.resolve()), path.stat().st_mtime_ns)
    if key in _csv_cache:
        return _csv_cache[key]
    try:
        rows = _read_csv(path)
    except UnicodeDecodeError as exc:
        raise PolicyError(
            f"{path}: not a UTF-8 text file ({exc.reason} at byte {exc.start}); write the trace as CSV text"
        ) from None
    except (OSError, csv.Error) as exc:
        raise PolicyError(f"{path}: cannot read the interval trace: {exc}") from None
    _csv_cache[key] = rows
    return rows


def _read_csv(path: Path) -> dict[int, list[tuple[float, float, int]]]:
    rows: dict[int, list[tuple[float, float, int]]] = {}
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
            if device < 0:
                raise PolicyError(f"{path}:{line}: device must be a device index (an integer >= 0), got {row[0]!r}")
            try:
                start, end = float(row[1]), float(row[2])
            except ValueError:
                raise PolicyError(
                    f"{path}:{line}: start_s and end_s must be numbers of seconds, got {row[1]!r}, {row[2]!r}"
                ) from None
            if not (math.isfinite(start) and math.isfinite(end) and 0 <= start < end):
                raise PolicyError(f"{path}:{line}: need 0 <= start_s < end_s, got {row[1]!r}, {row[2]!r}")
            rows.setdefault(device, []).append((start, end, line))
    return rows


class IntervalTrace(_TracePolicy):
    """Online intervals from a CSV with header ``device,start_s,end_s`` (device = netfl device index).

    One row per online interval; rows may come in any order and overlap
    (they are sorted and merged). A device without rows is never online.
    With ``period`` the intervals, which must then end by ``period``, repeat
    every ``period`` seconds (e.g. a one-day trace replayed daily).
    """

    class Params(PolicyParams):
        file: Path = Field(description="the CSV, relative to the topology file")
        period: Seconds | None = Field(None, gt=0, description="repeat the intervals every period")

    def __init__(self, params: PolicyParams, device: DeviceInfo, rng: np.random.Generator):
        super().__init__(params, device, rng)
        path = device.resolve(params.file)
        rows = _load_csv(path).get(device.index, [])
        if params.period is not None:
            for _, end, line in rows:
                if end > params.period:
                    raise PolicyError(
                        f"{path}:{line}: end_s {end:g} is after the period ({params.period:g} s); "
                        "intervals must lie within one period"
                    )
        self._trace = _Intervals([(s, e) for s, e, _ in rows], params.period)
