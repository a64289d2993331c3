"""The fitted world simulated, turned into the statistics of its logs: the report's other side.

The fitted groups run in the engine the runs use (``netfl.run`` with ``events: {idle_devices: true}``, devices
as arrays) for as many days as the logs span, with a token task (a round a day on a few digits) because a
scenario needs one; the idle devices' events become :class:`~netfl.fleet_fit.tracks.Tracks` -- eligible
while online, in use between ``use_start`` and ``use_end``, charging between ``charge_start`` and
``charge_stop`` -- and then statistics by the same :func:`~netfl.fleet_fit.statistics.device_stats` as the logs.

The battery's level is logged at the charger's events and when it fills (``battery_full``) or empties; in
between it follows the engine's physics with the group's powers (idle draw always, use on top, the charger's
power while plugged, held at full and empty), so a level is read at every event of the device.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from netfl.fleet_fit.estimate import FittedGroup
from netfl.fleet_fit.fragment import group_document
from netfl.fleet_fit.statistics import DAY, DeviceStats, device_stats
from netfl.fleet_fit.tracks import Tracks, intervals_of

__all__ = ["simulate_groups", "simulated_stats", "scenario_of"]

#: Kinds of the idle events that move or mark a device's state here.
_STATE_KINDS = (
    "online",
    "offline",
    "use_start",
    "use_end",
    "charge_start",
    "charge_stop",
    "battery_full",
    "battery_empty",
)


def _shares(groups: list[FittedGroup], devices: int) -> list[int]:
    """How many of ``devices`` simulated devices each group gets: its share of the fleet, at least one."""
    total = sum(len(g.devices) for g in groups)
    return [max(1, round(devices * len(g.devices) / total)) for g in groups]


def scenario_of(groups: list[FittedGroup], days: float, devices: int, seed: int) -> dict[str, Any]:
    """The simulation of the fitted groups: ``devices`` of them (shared as the fleet is) for ``days``."""
    entries = []
    for group, count in zip(groups, _shares(groups, devices)):
        entry = group_document(group, 1e9, "10Mbps")
        entry["count"] = count
        entries.append(entry)
    return {
        "name": "netfl-fit-check",
        "seed": seed,
        "stop": {"sim_time": f"{days * DAY:g}s"},
        "task": {
            "dataset": {"name": "digits", "partition": {"kind": "iid", "samples_per_client": 5}},
            "model": {"name": "logistic"},
            "local": {"steps": 1, "batch_size": 5, "lr": 0.1},
        },
        "devices": entries,
        "server": {"algorithm": {"name": "fedavg"}, "round": {"participants": 1, "deadline": "1min", "interval": "1d"}},
        "events": {"idle_devices": True},
        "engine": {"devices": "arrays"},
    }


def simulate_groups(groups: list[FittedGroup], days: float, devices: int, seed: int):
    """Run the fitted world; its events and devices (DataFrames)."""
    import netfl

    result = netfl.run(scenario_of(groups, days, devices, seed))
    return result.events, result.devices


def _levels(times: np.ndarray, kinds: np.ndarray, marks: np.ndarray, rates: dict[str, float], tracks) -> np.ndarray:
    """Percent at each event time: marked levels where logged, the physics in between (see the module)."""
    use, charge = tracks
    out = np.full(len(times), np.nan)
    known = np.flatnonzero(~np.isnan(marks))
    if not known.size:
        return out

    def slope(t0: float, t1: float) -> float:  # percent per second over [t0, t1), states constant inside
        mid = 0.5 * (t0 + t1)
        using = bool(np.any((use[0] <= mid) & (mid < use[1])))
        plugged = bool(np.any((charge[0] <= mid) & (mid < charge[1])))
        return rates["charge"] * plugged - rates["idle"] - rates["use"] * using

    first = known[0]
    out[first] = marks[first]
    for k in range(first - 1, -1, -1):  # back to the start from the first mark
        out[k] = min(100.0, max(0.0, out[k + 1] - slope(times[k], times[k + 1]) * (times[k + 1] - times[k])))
    for k in range(first + 1, len(times)):
        if not np.isnan(marks[k]):
            out[k] = marks[k]
        else:
            out[k] = min(100.0, max(0.0, out[k - 1] + slope(times[k - 1], times[k]) * (times[k] - times[k - 1])))
    return out


def _device_tracks(device: str, ev, end: float, rates: dict[str, float]) -> Tracks:
    times = ev["sim_time_s"].to_numpy(dtype=float)
    kinds = ev["kind"].to_numpy(dtype=object)

    def track(on: str, off: str) -> tuple[np.ndarray, np.ndarray]:
        mine = np.flatnonzero((kinds == on) | (kinds == off))
        edges, state = times[mine], kinds[mine] == on
        if not len(edges) or edges[0] > 0:
            edges, state = np.concatenate(([0.0], edges)), np.concatenate(([False], state))
        return intervals_of(edges, state, end)

    use, charge = track("use_start", "use_end"), track("charge_start", "charge_stop")
    level = ev["level"].to_numpy(dtype=float) * 100.0
    level = np.where(kinds == "battery_full", 100.0, np.where(kinds == "battery_empty", 0.0, level))
    stamps = np.append(times, end)
    marks = np.append(level, np.nan)
    battery = _levels(stamps, np.append(kinds, ""), marks, rates, (use, charge))
    return Tracks(device, 0.0, end, track("online", "offline"), use, charge, (stamps, battery))


def simulated_stats(groups: list[FittedGroup], days: float, devices: int, seed: int) -> list[DeviceStats]:
    """The statistics of the fitted world's simulated devices."""
    events, table = simulate_groups(groups, days, devices, seed)
    end = days * DAY
    by_name = {g.name: g for g in groups}
    group_of = dict(zip(table["device"], table["group"]))
    idle = events[events["kind"].isin(_STATE_KINDS)]
    out = []
    for device, ev in idle.groupby("device", sort=True):
        g = by_name[group_of[device]]
        per_percent = g.capacity / 100.0  # joules per percent
        rates = {"charge": g.charge_power / per_percent, "idle": g.idle_power / per_percent}
        rates["use"] = (g.use_power if g.use_profile is not None else 0.0) / per_percent
        out.append(device_stats(_device_tracks(str(device), ev, end, rates)))
    return out


def simulated_days(logged_days: float) -> float:
    """Whole days to simulate for logs that spanned ``logged_days`` on average (at least one)."""
    return float(max(1, math.ceil(logged_days - 1e-6)))
