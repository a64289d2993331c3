"""Finding and reading the run folders a report covers.

A report reads what ``netfl simulate`` (or a sweep) wrote and nothing else,
so every file is checked on the way in (:mod:`netfl.results.read_back`): a
damaged file is one FileError naming it and the field, not a traceback
halfway through the plots.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from netfl.errors import FileError, NetflError
from netfl.results.read_back import (
    is_study_folder,
    numeric_columns,
    read_metrics,
    read_parquet_columns,
    read_summary,
    read_sweep_status,
)

DEVICE_COLUMNS = ("group", "tasks_started", "updates_delivered", "online_fraction")
#: timeline.parquet's columns a report draws (runs made before netfl wrote one have none: no world figure).
TIMELINE_COLUMNS = (
    "sim_time_s",
    "group",
    "devices",
    "online",
    "available",
    "participated",
    "dropped",
    "battery_mean",
    "battery_p10",
    "battery_p90",
)


@dataclass
class Run:
    """One run folder as read: its summary, one row per evaluation, one row per device (None if absent)."""

    path: Path
    summary: dict[str, Any]
    metrics: pd.DataFrame
    devices: pd.DataFrame | None
    case: str = ""
    seed: int = 0
    overrides: dict[str, Any] = field(default_factory=dict)
    timeline: pd.DataFrame | None = None  # the world at every evaluation, per device group (None: an older run)

    @property
    def complete(self) -> bool:
        return bool(self.summary.get("complete", True))

    @property
    def staleness_histogram(self) -> dict[int, int]:
        """Applied updates by staleness (every run since async servers exist has one; sync runs all at 0)."""
        histogram = (self.summary.get("staleness") or {}).get("histogram") or {}
        return {int(k): int(v) for k, v in histogram.items()}


def find_run_folders(dirs: Sequence[Path], skip: Path | None = None) -> list[Path]:
    """Every folder holding summary.json under ``dirs`` (at any depth; not inside a run, a hidden
    staging folder or ``skip``, the report's own folder), each once, in a stable order. A study folder
    (netfl's, see :func:`~netfl.results.read_back.is_study_folder`) gives the runs its study has now, not those
    of cases since removed from it."""
    found: dict[Path, Path] = {}
    skip = skip.resolve() if skip is not None else None
    for top in dirs:
        if not Path(top).is_dir():
            raise NetflError(f"{top}: no such folder")
        listed = _study_runs(Path(top))
        if listed is not None:
            for folder in listed:
                found.setdefault(folder.resolve(), folder)
            continue
        for root, subdirs, files in os.walk(top):
            here = Path(root)
            if "summary.json" in files:
                found.setdefault(here.resolve(), here)
                subdirs[:] = []  # a run holds no runs
                continue
            subdirs[:] = sorted(s for s in subdirs if not s.startswith(".") and (here / s).resolve() != skip)
    if not found:
        raise NetflError(
            f"{', '.join(map(str, dirs))}: no run folders found (a run folder holds summary.json, "
            "as written by netfl simulate --out DIR)"
        )
    return list(found.values())


def _study_runs(top: Path) -> list[Path] | None:
    """The run folders a sweep's sweep.json lists that hold a summary (None: ``top`` is not a study folder)."""
    if not is_study_folder(top):
        return None
    folders = [top / run["folder"] for run in read_sweep_status(top / "sweep.json")["runs"]]
    return [folder for folder in folders if (folder / "summary.json").is_file()]


def load_runs(folders: Sequence[Path]) -> list[Run]:
    runs = [load_run(folder) for folder in folders]
    _assign_cases(runs)
    return runs


def load_run(folder: Path) -> Run:
    summary = read_summary(folder / "summary.json")
    run = Run(folder, summary, read_metrics(folder / "metrics.csv"), _read_devices(folder / "devices.parquet"))
    run.timeline = _read_timeline(folder / "timeline.parquet")
    return run


def _read_devices(file: Path) -> pd.DataFrame | None:
    """devices.parquet's participation columns; None when the run has no such file (older runs)."""
    return read_parquet_columns(file, DEVICE_COLUMNS) if file.is_file() else None


def _read_timeline(file: Path) -> pd.DataFrame | None:
    """timeline.parquet's columns the report draws; None when the run has none (made before netfl wrote it)."""
    if not file.is_file():
        return None
    timeline = _with_columns(file, TIMELINE_COLUMNS)
    if timeline.empty:
        raise FileError(str(file), [("", "no rows: a timeline.parquet netfl writes has one reading at least")])
    batteries = [c for c in TIMELINE_COLUMNS if c.startswith("battery")]  # empty for a group without batteries
    counts = [c for c in TIMELINE_COLUMNS if c != "group" and c not in batteries]
    problems = numeric_columns(timeline, counts, batteries)
    if problems:
        raise FileError(str(file), problems)
    return timeline


def read_activity(run: Run) -> pd.DataFrame:
    """The run's events.parquet as a device timeline needs it (time, device, kind), for the report's Gantt."""
    return _with_columns(run.path / "events.parquet", ("sim_time_s", "device", "kind"))


def _with_columns(file: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    """``columns`` of a Parquet file netfl wrote, every one of them there."""
    frame = read_parquet_columns(file, columns)
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise FileError(str(file), [(name, f"missing: a {file.name} netfl writes has it") for name in missing])
    return frame


def _assign_cases(runs: Sequence[Run]) -> None:
    """A sweep's run names its case and seed; any other run is a case of its own, named after its folder
    (or its path below the runs' common folder when two folders share a name)."""
    plain = [r for r in runs if "study" not in r.summary]
    for run in runs:
        if "study" in run.summary:
            study = run.summary["study"]
            run.case, run.seed, run.overrides = study["case"], study["seed"], dict(study.get("overrides") or {})
    taken = Counter([r.path.name for r in plain] + [r.case for r in runs if r.case])
    common = Path(os.path.commonpath([r.path.resolve() for r in runs])) if runs else Path()
    for run in plain:
        name = run.path.name
        run.case = name if taken[name] == 1 else run.path.resolve().relative_to(common).as_posix() or name
        run.seed = run.summary["seed"]
    first: dict[tuple[str, Any], Run] = {}
    for run in runs:
        other = first.setdefault((run.case, run.seed), run)
        if other is not run:  # two studies with a case of the same name: pairs by seed would mix them
            raise NetflError(
                f"{other.path} and {run.path} are both case {run.case!r}, seed {run.seed}: a report pairs the runs "
                "of a case by seed, so each (case, seed) may appear once; report the studies separately"
            )
