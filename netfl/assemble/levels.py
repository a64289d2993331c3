"""Scenario -> each device group's logged battery levels (``battery.levels``), read once per process.

Scenario device n follows the log set's device n in file order (n mod its count with ``unlisted: cycle``), as
``device_logs`` replays it; a log set with fewer devices, or a device without a battery row, is refused (``netfl
validate`` says so first: netfl/config/checks.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from netfl.config.schema import Scenario
from netfl.errors import PolicyError
from netfl.fleet_logs.levels import levels_problem, read_levels
from netfl.sim.logged_levels import LevelLog


def _path(scenario: Scenario, file: Path) -> Path:
    base = scenario.source.parent if scenario.source is not None else Path.cwd()
    return file if file.is_absolute() else base / file


def group_levels(scenario: Scenario) -> list[LevelLog | None]:
    """Each group's logged levels (None: its battery is not driven by them)."""
    out: list[LevelLog | None] = []
    first = 0
    for group in scenario.devices:
        spec = group.battery.levels if group.battery is not None else None
        if spec is None:
            out.append(None)
        else:
            path = _path(scenario, spec.file)
            problem = levels_problem(path, spec.unlisted, range(first, first + group.count))
            if problem:
                raise PolicyError(problem)
            levels = read_levels(path, first + group.count)
            devices = (first + np.arange(group.count)) % levels.count
            out.append(LevelLog(*levels.rows(devices)))
        first += group.count
    return out
