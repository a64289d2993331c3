"""``netfl fit`` from end to end: logs streamed into per-device statistics, grouped, fitted, simulated, compared,
and the fragment and report written (the fragment whole or not at all)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from netfl.fleet_fit.clusters import cluster
from netfl.fleet_fit.estimate import FittedGroup, fit_group
from netfl.fleet_fit.fragment import fragment_text
from netfl.fleet_fit.goodness import Goodness, goodness
from netfl.fleet_fit.simulated import simulated_days, simulated_stats
from netfl.fleet_fit.statistics import DeviceStats, FleetStats, device_stats
from netfl.fleet_fit.tracks import tracks_of_log
from netfl.fleet_logs.rules import DEFAULT_RULE, parse_rule

__all__ = ["Fit", "stream_stats", "fit_stats", "fit_logs", "write_atomically"]


@dataclass
class Fit:
    groups: list[FittedGroup]
    logged: FleetStats
    simulated: FleetStats | None
    fit: Goodness | None
    lines: int


def stream_stats(path: str | Path, rule: str = DEFAULT_RULE) -> tuple[list[DeviceStats], int]:
    """Every device's statistics, one device's log in memory at a time; and the number of events read.
    ``rule``: when a device is eligible (:mod:`netfl.fleet_logs.rules`)."""
    from netfl.fleet_logs import iter_device_logs

    eligible = parse_rule(rule)
    stats, lines = [], 0
    for log in iter_device_logs(path):
        lines += len(log)
        stats.append(device_stats(tracks_of_log(log, eligible)))
    return stats, lines


def fit_stats(stats: list[DeviceStats], *, clusters: int | None, capacity: float, seed: int) -> list[FittedGroup]:
    """The fitted groups (``clusters`` None: one per device)."""
    parts = cluster(stats, clusters, seed)
    width = len(str(len(parts) - 1))
    return [fit_group(f"fitted-{j:0{width}d}", part, capacity) for j, part in enumerate(parts)]


def fit_logs(
    path: str | Path,
    *,
    clusters: int | None = 4,
    capacity: float = 55e3,
    seed: int = 0,
    simulate: int = 200,
    rule: str = DEFAULT_RULE,
) -> Fit:
    """Fit the logs at ``path``; ``simulate`` devices of the fitted world simulated for the report (0: none)."""
    stats, lines = stream_stats(path, rule)
    groups = fit_stats(stats, clusters=clusters, capacity=capacity, seed=seed)
    logged = FleetStats.of(stats)
    if not simulate:
        return Fit(groups, logged, None, None, lines)
    days = simulated_days(logged.days / max(logged.devices, 1))
    simulated = FleetStats.of(simulated_stats(groups, days, simulate, seed))
    return Fit(groups, logged, simulated, goodness(logged, simulated), lines)


def write_atomically(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file renamed into place: never a half-written file."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    finally:
        if temporary.exists():
            temporary.unlink()


def fragment_of(result: Fit, source: str, *, flops: float, uplink: str, rule: str = DEFAULT_RULE) -> str:
    """The fragment's text for ``result`` (see :func:`netfl.fleet_fit.fragment.fragment_text`)."""
    return fragment_text(result.groups, source, flops=flops, uplink=uplink, rule=rule)
