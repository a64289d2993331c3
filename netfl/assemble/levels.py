"""Scenario -> each device group's logged battery levels (``battery.levels``), read once per process.

Scenario device n follows the log set's device n in file order (n mod its count with ``unlisted: cycle``), as
``device_logs`` replays it; a log set with fewer devices, or a device without a battery row, is refused (``netfl
validate`` says so first: netfl/config/checks.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from netfl.config.schema import Scenario
from netfl.errors import PolicyError
from netfl.fleet_logs.levels import read_levels, too_few, want_levels
from netfl.fleet_logs.records import LogError
from netfl.sim.logged_levels import LevelLog


def _path(scenario: Scenario, file: Path) -> Path:
    base = scenario.source.parent if scenario.source is not None else Path.cwd()
    return file if file.is_absolute() else base / file


def follow_levels(scenario: Scenario) -> None:
    """Say which log sets the scenario's batteries follow, before their rules are replayed: the replay keeps
    their levels as it reads them (netfl.fleet_logs.levels), and the set is read once."""
    for group in scenario.devices:
        if group.battery is not None and group.battery.levels is not None:
            path = _path(scenario, group.battery.levels.file)
            if path.exists():
                want_levels(path)


def group_levels(scenario: Scenario) -> list[LevelLog | None]:
    """Each group's logged levels (None: its battery is not driven by them)."""
    out: list[LevelLog | None] = []
    first = 0
    for group in scenario.devices:
        spec = group.battery.levels if group.battery is not None else None
        if spec is None:
            out.append(None)
        else:
            path, devices = _path(scenario, spec.file), range(first, first + group.count)
            try:
                levels = read_levels(path, devices.stop, keep=False)  # kept by a rule's replay of the set, if any
            except (LogError, OSError) as exc:
                raise PolicyError(str(exc)) from None
            if levels.count < devices.stop and spec.unlisted == "refuse":
                raise PolicyError(too_few(path, levels.count, devices))
            devices = (first + np.arange(group.count)) % levels.count
            out.append(LevelLog(*levels.rows(devices)))
        first += group.count
    return out
