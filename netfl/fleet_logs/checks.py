"""Checks one device's assembled arrays, naming the first offending line: the readers of every format share
them, so that a malformed log gets the same message whatever its format."""

from __future__ import annotations

import numpy as np

from netfl.fleet_logs.records import DeviceLog, LogError
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
    is_binary = (kinds != BATTERY) & (kinds != NETWORK)
    ok = np.isin(kinds, KINDS) & np.where(
        kinds == BATTERY,
        (values >= 0) & (values <= 100),
        np.where(kinds == NETWORK, np.isin(values, list(NETWORK_NAMES)), is_binary & np.isin(values, (0.0, 1.0))),
    )
    if not ok.all():
        i = int(np.argmin(ok))
        raise refuse(i, value_problem(int(kinds[i]), float(values[i])) or "invalid")
    return DeviceLog(device=device, times=times, kinds=kinds, values=values, source=source)
