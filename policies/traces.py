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

Each file is read once per process into arrays (:mod:`~netfl.policies.trace_files`),
however many devices replay it; a device group replays it as one population model
(:mod:`~netfl.policies.trace_arrays`), of which each device's policy is a row.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field

from netfl.errors import PolicyError
from netfl.policies.base import PolicyParams
from netfl.policies.rows import SessionRow
from netfl.policies.trace_arrays import Toggles, TraceModel, merge_intervals
from netfl.policies.trace_files import PICKLE_REFUSED, load_csv, load_fedscale
from netfl.units import Seconds

__all__ = [
    "FedScaleTrace",
    "FedScaleModel",
    "IntervalTrace",
    "IntervalTraceModel",
    "MAX_CSV_ROWS",
    "PICKLE_REFUSED",
    "fedscale_client_count",
    "fedscale_to_csv",
]

#: Rows ``netfl trace convert`` writes at most (about 400 MB of CSV).
MAX_CSV_ROWS = 10_000_000


class _TraceRow(SessionRow):
    @classmethod
    def check(cls, params: PolicyParams, base_dir: Path) -> list[tuple[str, str]]:
        path = params.file if params.file.is_absolute() else base_dir / params.file
        if not path.is_file():
            return [(".file", f"{path}: file not found (a relative path starts at the topology file's folder)")]
        return []


# ---------------------------------------------------------------- FedScale


class FedScaleModel(TraceModel):
    """A device group replaying a FedScale trace: device n (the scenario's index) replays sorted client
    ``(n + client_offset) mod count``, repeating every client's ``finish_time``."""

    def _trace(self, params: Any, path: Path, first: int) -> tuple[Toggles, np.ndarray]:
        self.trace = load_fedscale(path, trusted=params.trust_pickle)  # kept: a device names its client id
        count = self.trace.count
        return self.trace.toggles, ((first + params.client_offset) % count + np.arange(self.n)) % count


class FedScaleTrace(_TraceRow):
    """Replay a FedScale device-behaviour trace (see the module docstring).

    The file is a Python pickle, and unpickling runs whatever code the file
    names: it is read only with ``trust_pickle: true``, for traces from a
    source you trust (FedScale's own ``client_behave_trace``); otherwise
    convert once with ``netfl trace convert`` and use ``trace_csv``.
    """

    population = FedScaleModel

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
        """The file's presence and the opt-in; with both, the trace itself, read as the run reads it (and kept for
        it): a client whose intervals are not numbers is refused here, not mid-run."""
        problems = super().check(params, base_dir)
        if not params.trust_pickle:
            return problems + [(".trust_pickle", PICKLE_REFUSED)]
        if not problems:
            try:
                load_fedscale(params.file if params.file.is_absolute() else base_dir / params.file, trusted=True)
            except PolicyError as exc:
                problems.append((".file", str(exc)))
        return problems

    @property
    def client_id(self) -> Any:
        """The id of the client this device replays."""
        return self.model.trace.client_id(int(self.model.rows[self.row]))


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
    trace = load_fedscale(pickle_path, trusted=allow_pickle)
    count = trace.count if num_devices is None else num_devices
    if count < 1:
        raise PolicyError(f"{pickle_path}: {count} devices asked for; ask for at least 1")
    finish = trace.toggles.period
    longest = trace.count - 1 - int(np.argmax(finish[::-1]))  # the last of the longest, as max() of pairs
    period = float(finish[longest])
    clients = [(trace.toggles.intervals(r), float(finish[r])) for r in range(trace.count)]
    rows_per_client = [_tiled_rows(len(intervals), f, period) for intervals, f in clients]
    full, part = divmod(count, len(clients))
    rows = full * sum(rows_per_client) + sum(rows_per_client[:part])
    if rows > MAX_CSV_ROWS:
        if count > len(clients) and sum(rows_per_client) <= MAX_CSV_ROWS:
            why = f"{count:,} devices replay the trace's {len(clients):,} clients {count / len(clients):.3g} times over"
        else:
            n = max(range(len(clients)), key=rows_per_client.__getitem__)
            why = (
                f"client {trace.client_id(n)!r}'s cycle of {clients[n][1]:g} s tiled over the trace's period, "
                f"client {trace.client_id(longest)!r}'s {period:g} s"
            )
        raise PolicyError(
            f"{pickle_path}: the CSV would need {rows:.3g} rows ({why}); netfl writes at most {MAX_CSV_ROWS:,}: "
            "ask for fewer devices (--devices), or replay the trace as it is (policy fedscale_trace, "
            "trust_pickle: true), which repeats each client's own cycle"
        )
    try:
        with open(csv_path, "w", newline="") as fh:
            out = csv.writer(fh)
            out.writerow(["device", "start_s", "end_s"])
            for n in range(count):
                intervals, finish_n = clients[n % len(clients)]
                for start, end in _tiled(intervals, finish_n, period):
                    out.writerow([n, repr(start), repr(end)])
    except OSError as exc:
        raise PolicyError(f"{csv_path}: cannot write the CSV: {exc.strerror or exc}") from None
    return period


def _tiled(intervals: np.ndarray, finish: float, period: float) -> list[list[float]]:
    """A client's intervals repeated every ``finish`` over ``[0, period)``, merged where they meet."""
    shifts = np.arange(math.ceil(period / finish))[:, None] * finish
    starts = (shifts + intervals[:, 0]).ravel()
    ends = np.minimum(shifts + intervals[:, 1], period).ravel()
    _, bounds = merge_intervals(np.zeros(len(starts), dtype=np.int64), starts, ends, 1)
    return bounds.reshape(-1, 2).tolist()


def _tiled_rows(intervals: int, finish: float, period: float) -> float:
    """Rows a client's intervals make once its cycle is tiled over ``period`` (inf past what a float counts)."""
    if not intervals:
        return 0
    tiles = period / finish
    return math.ceil(tiles) * intervals if math.isfinite(tiles) else math.inf


def fedscale_client_count(pickle_path: str | Path, *, allow_pickle: bool = False) -> int:
    """How many clients the FedScale trace holds (read once per process, like every trace)."""
    return load_fedscale(Path(pickle_path), trusted=allow_pickle).count


# --------------------------------------------------------------------- CSV


class IntervalTraceModel(TraceModel):
    """A device group replaying a CSV of intervals: device n (the scenario's index) replays the CSV's device n."""

    def _trace(self, params: Any, path: Path, first: int) -> tuple[Toggles, np.ndarray]:
        trace = load_csv(path)
        problem = unlisted_problem(params, path, range(first, first + self.n))
        if problem is not None:
            raise PolicyError(f"{path}: {problem}")
        return trace.toggles(params.period), trace.rows_of(first + np.arange(self.n, dtype=np.int64))


def unlisted_problem(params: Any, path: Path, devices: range) -> str | None:
    """What is wrong when the CSV ``path`` lists only some of ``devices`` (scenario indices) and ``params``
    does not say that the others are offline (``unlisted: offline``); None when nothing is."""
    if params.unlisted == "offline" or not len(devices):
        return None
    trace = load_csv(path)
    listed = int((trace.rows_of(np.arange(devices.start, devices.stop, dtype=np.int64)) < len(trace.ids)).sum())
    if listed == len(devices):
        return None
    return (
        f"lists {listed:,} of the {len(devices):,} devices that replay it (scenario devices {devices.start} to "
        f"{devices.stop - 1}); the other {len(devices) - listed:,} would never be online. Give each device its "
        "rows (netfl trace convert --devices N writes them from a FedScale trace, device n replaying client n mod "
        "the clients), or set unlisted: offline to keep the devices it does not list offline"
    )


class IntervalTrace(_TraceRow):
    """Online intervals from a CSV with header ``device,start_s,end_s`` (device = netfl device index).

    One row per online interval; rows may come in any order and overlap
    (they are sorted and merged). Every device given the policy must have
    rows, unless ``unlisted: offline`` says that a device without rows is
    never online. With ``period`` the intervals, which must then end by
    ``period``, repeat every ``period`` seconds (e.g. a one-day trace replayed
    daily).
    """

    population = IntervalTraceModel

    class Params(PolicyParams):
        file: Path = Field(description="the CSV, relative to the topology file")
        period: Seconds | None = Field(None, gt=0, description="repeat the intervals every period")
        unlisted: Literal["refuse", "offline"] = Field(
            "refuse", description="a device the file does not list: refused, or never online (offline)"
        )

    @classmethod
    def check_devices(cls, params: PolicyParams, base_dir: Path, devices: range) -> list[tuple[str, str]]:
        path = cls.population.resolve(params.file, base_dir)
        try:
            problem = unlisted_problem(params, path, devices)
        except PolicyError as exc:  # a row that does not read: said here rather than when the run starts
            return [(".file", str(exc))]
        return [] if problem is None else [(".file", f"{path}: {problem}")]
