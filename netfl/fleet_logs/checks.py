"""Checks one device's assembled arrays, naming the first offending line: the readers of every format share
them, so that a malformed log gets the same message whatever its format."""

from __future__ import annotations

import numpy as np

from netfl.fleet_logs.records import DeviceLog, LogBlock, LogError
from netfl.fleet_logs.states import BATTERY, KINDS, NETWORK, NETWORK_NAMES, value_problem


def checked_log(
    source: str,
    device: str,
    times: np.ndarray,
    kinds: np.ndarray,
    values: np.ndarray,
    lines: np.ndarray,
    numbered: bool = False,
) -> DeviceLog:
    """The device's log, or a LogError at the first event that breaks a rule. ``lines``: each event's line in
    the file; ``numbered``: name the event by its number too (FLASH's records hold all of a device's events
    on one line)."""
    times = np.ascontiguousarray(times, dtype=np.float64)
    kinds = np.ascontiguousarray(kinds, dtype=np.int8)
    values = np.ascontiguousarray(values, dtype=np.float64)

    def refuse(i: int, what: str) -> LogError:
        prefix = f"message {i + 1}: " if numbered else ""
        return LogError(source, device, int(lines[i]), prefix + what)

    if not len(times):
        raise LogError(source, device, int(lines[0]) if len(lines) else 0, "has no events; a device needs at least one")
    bad_time = ~np.isfinite(times)
    if bad_time.any():
        i = int(np.argmax(bad_time))
        raise refuse(i, "time is missing or not finite; accepted: seconds or a timestamp")
    back = np.diff(times) < 0
    if back.any():
        i = int(np.argmax(back)) + 1
        raise refuse(
            i,
            f"time {times[i]:g} s is before the previous event's {times[i - 1]:g} s; a device's events must be in "
            "time order",
        )
    ok = _values_ok(kinds, values)
    if not ok.all():
        i = int(np.argmin(ok))
        raise refuse(i, value_problem(int(kinds[i]), float(values[i])) or "invalid")
    return DeviceLog(device=device, times=times, kinds=kinds, values=values, source=source)


def checked_block(
    source: str,
    devices: list[str],
    offsets: np.ndarray,
    times: np.ndarray,
    kinds: np.ndarray,
    values: np.ndarray,
    lines: np.ndarray,
) -> LogBlock:
    """:func:`checked_log`'s checks over a block of devices at once (each device non-empty, as a table's are);
    the first offending row named by its line, device and problem, as :func:`checked_log` names it."""
    times = np.ascontiguousarray(times, dtype=np.float64)
    kinds = np.ascontiguousarray(kinds, dtype=np.int8)
    values = np.ascontiguousarray(values, dtype=np.float64)
    owner = np.repeat(np.arange(len(devices)), np.diff(offsets))
    first_of = np.zeros(len(times), dtype=bool)
    first_of[offsets[:-1]] = True
    back = np.zeros(len(times), dtype=bool)
    back[1:] = times[1:] < times[:-1]
    bad = ~np.isfinite(times) | (back & ~first_of) | ~_values_ok(kinds, values)
    if bad.any():
        i = int(np.argmax(bad))
        a, b = int(offsets[owner[i]]), int(offsets[owner[i] + 1])
        checked_log(source, devices[owner[i]], times[a:b], kinds[a:b], values[a:b], lines[a:b])  # says which
        raise LogError(source, devices[owner[i]], int(lines[i]), "invalid")  # not reached: the line above raises
    return LogBlock(list(devices), np.asarray(offsets, dtype=np.int64), times, kinds, values, source)


def _values_ok(kinds: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Whether each value is one its kind takes (comparisons only: no set lookups over 10^8 rows)."""
    whole = values == np.floor(values)
    top = np.where(kinds == BATTERY, 100.0, np.where(kinds == NETWORK, float(max(NETWORK_NAMES)), 1.0))
    return (
        (kinds >= min(KINDS)) & (kinds <= max(KINDS)) & (values >= 0) & (values <= top) & (whole | (kinds == BATTERY))
    )
