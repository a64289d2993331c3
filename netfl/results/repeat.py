"""Repeating a run from its folder: the scenario it ran, the versions it ran with, and whether a repeat matches."""

from __future__ import annotations

from pathlib import Path

from netfl.config import Scenario, scenario_from_dict
from netfl.config.loading import read_yaml
from netfl.errors import NetflError, ScenarioError
from netfl.results.read_back import read_summary

#: The files a repeat must reproduce byte for byte (summary.json holds the wall-clock time, which never repeats).
REPRODUCED = ("events.parquet", "metrics.csv", "devices.parquet", "timeline.parquet")


def load_run_scenario(run_dir: Path) -> tuple[Scenario, dict[str, str]]:
    """The scenario of the run in ``run_dir`` (its file paths relative to the topology it was read from, as the
    run saw them) and the software versions it recorded; a damaged or foreign file names itself and the field."""
    run_dir = Path(run_dir)
    if not (run_dir / "summary.json").is_file():
        raise NetflError(f"{run_dir}: not a run folder (no summary.json)")
    summary = read_summary(run_dir / "summary.json")
    file = run_dir / "scenario.yaml"
    data = read_yaml(file)
    source = summary.get("topology")
    try:
        scenario = scenario_from_dict(
            data, source=source or str(file), base_dir=Path(source).parent if source else run_dir
        )
    except ScenarioError as exc:  # named after the file read, not the topology it was once read from
        raise ScenarioError(str(file), exc.problems) from None
    return scenario, dict(summary.get("versions") or {})


def compare_runs(first: Path, second: Path) -> tuple[list[str], list[str]]:
    """The reproduced files that are byte-identical in both run folders, and those that differ or are missing
    (a file the first run does not have, written by later versions of netfl, is not compared)."""
    same, different = [], []
    for name in REPRODUCED:
        a, b = Path(first) / name, Path(second) / name
        if name == "timeline.parquet" and not a.exists():
            continue
        ours, theirs = _content(a), _content(b)
        (same if ours is not None and ours == theirs else different).append(name)
    return same, different


def _content(file: Path) -> bytes | None:
    """The file's bytes, or None when it is missing or cannot be read (it then matches nothing)."""
    try:
        return file.read_bytes()
    except OSError:
        return None
