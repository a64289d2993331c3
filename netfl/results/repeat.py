"""Repeating a run from its folder: the scenario it ran, the versions it ran with, and whether a repeat matches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from netfl.config import Scenario, scenario_from_dict
from netfl.config.loading import read_yaml
from netfl.errors import NetflError

#: The files a repeat must reproduce byte for byte (summary.json holds the wall-clock time, which never repeats).
REPRODUCED = ("events.parquet", "metrics.csv", "devices.parquet", "timeline.parquet")


def load_run_scenario(run_dir: Path) -> tuple[Scenario, dict[str, str]]:
    """The scenario of the run in ``run_dir`` (its file paths relative to the topology it was read from, as the
    run saw them) and the software versions it recorded."""
    run_dir = Path(run_dir)
    try:
        summary = json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError) as exc:
        raise NetflError(f"{run_dir}: not a run folder (summary.json: {exc})") from None
    data = read_yaml(run_dir / "scenario.yaml")
    source = summary.get("topology")
    base = Path(source).parent if source else run_dir
    scenario = scenario_from_dict(data, source=source or str(run_dir / "scenario.yaml"), base_dir=base)
    versions: dict[str, Any] = summary.get("versions") or {}
    return scenario, {str(k): str(v) for k, v in versions.items()}


def compare_runs(first: Path, second: Path) -> tuple[list[str], list[str]]:
    """The reproduced files that are byte-identical in both run folders, and those that differ or are missing
    (a file the first run does not have, written by later versions of netfl, is not compared)."""
    same, different = [], []
    for name in REPRODUCED:
        a, b = Path(first) / name, Path(second) / name
        if name == "timeline.parquet" and not a.exists():
            continue
        (same if a.is_file() and b.is_file() and a.read_bytes() == b.read_bytes() else different).append(name)
    return same, different
