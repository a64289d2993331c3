"""Finding and reading the run folders a report covers.

A report reads what ``netfl simulate`` (or a sweep) wrote and nothing else,
so every file is checked on the way in: a damaged file is one NetflError
naming it, not a traceback halfway through the plots.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from netfl.errors import NetflError

#: metrics.csv columns a report needs, and those it uses when present (energy_j: cumulative joules, newer runs).
METRICS_REQUIRED = ("sim_time_s", "round", "test_accuracy")
METRICS_OPTIONAL = ("test_loss", "participants", "energy_j", "work_energy_j")
#: summary.json numbers a report tabulates; a missing one (an older run) is NaN.
SUMMARY_NUMBERS = (
    "rounds",
    "sim_time_s",
    "final_test_accuracy",
    "best_test_accuracy",
    "energy_j",
    "work_energy_j",
    "updates_received",
    "updates_applied",
    "updates_dropped",
    "bytes_up",
    "bytes_down",
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
    (holding sweep.json) gives the runs its study has now, not those of cases since removed from it."""
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
    status = top / "sweep.json"
    if not status.is_file():
        return None
    try:
        runs = json.loads(status.read_text())["runs"]
        folders = [top / str(run["folder"]) for run in runs]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise NetflError(f"{status}: not a sweep's status file ({_first_line(exc)})") from None
    return [folder for folder in folders if (folder / "summary.json").is_file()]


def load_runs(folders: Sequence[Path]) -> list[Run]:
    runs = [load_run(folder) for folder in folders]
    _assign_cases(runs)
    return runs


def load_run(folder: Path) -> Run:
    summary = _read_summary(folder / "summary.json")
    run = Run(folder, summary, _read_metrics(folder / "metrics.csv"), _read_devices(folder / "devices.parquet"))
    run.timeline = _read_timeline(folder / "timeline.parquet")
    return run


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _read_summary(file: Path) -> dict[str, Any]:
    try:
        summary = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise NetflError(f"{file}: cannot read it: {exc.strerror or exc}") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise NetflError(f"{file}: not valid JSON ({_first_line(exc)})") from None
    if not isinstance(summary, dict):
        raise NetflError(f"{file}: not a JSON object")
    for key in SUMMARY_NUMBERS:
        if summary.get(key) is not None and not _is_number(summary[key]):
            raise NetflError(f"{file}: '{key}' is {summary[key]!r}, not a number")
    if not isinstance(summary.get("complete", True), bool):
        raise NetflError(f"{file}: 'complete' is {summary['complete']!r}, not true or false")
    study = summary.get("study")
    if study is not None:
        if not isinstance(study, dict) or not isinstance(study.get("case"), str) or not study["case"]:
            raise NetflError(f"{file}: 'study' must be an object with a non-empty 'case' name")
        if not isinstance(study.get("seed"), int) or isinstance(study["seed"], bool):
            raise NetflError(f"{file}: 'study.seed' is {study.get('seed')!r}, not an integer")
        if not isinstance(study.get("overrides", {}), dict):
            raise NetflError(f"{file}: 'study.overrides' must be an object (field -> value)")
    elif not isinstance(summary.get("seed"), int) or isinstance(summary["seed"], bool):
        raise NetflError(f"{file}: 'seed' is {summary.get('seed')!r}, not an integer")
    staleness = summary.get("staleness") or {}
    histogram = staleness.get("histogram") or {} if isinstance(staleness, dict) else None
    if not isinstance(histogram, dict) or not all(k.isdigit() and _is_number(v) for k, v in histogram.items()):
        raise NetflError(f'{file}: \'staleness.histogram\' must map staleness ("0", "1", ...) to update counts')
    return summary


def _read_metrics(file: Path) -> pd.DataFrame:
    if not file.is_file():
        raise NetflError(f"{file}: missing (every run folder holds one)")
    try:
        metrics = pd.read_csv(file)
    except (OSError, ValueError) as exc:  # ParserError, EmptyDataError, UnicodeDecodeError are ValueErrors
        raise NetflError(f"{file}: cannot be read as CSV ({_first_line(exc)})") from None
    missing = [c for c in METRICS_REQUIRED if c not in metrics.columns]
    if missing:
        raise NetflError(f"{file}: no column {', '.join(missing)} (found: {', '.join(map(str, metrics.columns))})")
    for name in METRICS_REQUIRED + METRICS_OPTIONAL:
        if name in metrics.columns:
            values = pd.to_numeric(metrics[name], errors="coerce")
            bad = values.isna() & (metrics[name].notna() | (name in METRICS_REQUIRED))  # optional ones may be empty
            if bad.any():
                row = int(bad.to_numpy().argmax())
                raise NetflError(f"{file}: row {row + 2}, column {name}: {metrics[name].iloc[row]!r} is not a number")
            metrics[name] = values
    if (metrics["sim_time_s"].diff() < 0).any():
        row = int((metrics["sim_time_s"].diff() < 0).to_numpy().argmax())
        raise NetflError(f"{file}: row {row + 2}: sim_time_s goes back in time")
    return metrics


def _read_devices(file: Path) -> pd.DataFrame | None:
    """devices.parquet's participation columns; None when the run has no such file (older runs)."""
    if not file.is_file():
        return None
    try:
        names = pq.read_schema(file).names
        return pq.read_table(file, columns=[c for c in DEVICE_COLUMNS if c in names]).to_pandas()
    except (OSError, pa.ArrowException, ValueError) as exc:
        raise NetflError(f"{file}: cannot be read as Parquet ({_first_line(exc)})") from None


def _read_timeline(file: Path) -> pd.DataFrame | None:
    """timeline.parquet's columns the report draws; None when the run has none (made before netfl wrote it)."""
    if not file.is_file():
        return None
    try:
        names = pq.read_schema(file).names
        missing = [c for c in TIMELINE_COLUMNS if c not in names]
        if missing:
            raise NetflError(f"{file}: no column {', '.join(missing)} (found: {', '.join(names)})")
        timeline = pq.read_table(file, columns=list(TIMELINE_COLUMNS)).to_pandas()
    except (OSError, pa.ArrowException, ValueError) as exc:
        raise NetflError(f"{file}: cannot be read as Parquet ({_first_line(exc)})") from None
    if (timeline["sim_time_s"].diff() < 0).any():
        raise NetflError(f"{file}: sim_time_s goes back in time")
    return timeline


def read_activity(run: Run) -> pd.DataFrame:
    """The run's events.parquet as a device timeline needs it (time, device, kind), for the report's Gantt."""
    file = run.path / "events.parquet"
    try:
        return pq.read_table(file, columns=["sim_time_s", "device", "kind"]).to_pandas()
    except (OSError, pa.ArrowException, ValueError) as exc:
        raise NetflError(f"{file}: cannot be read as Parquet ({_first_line(exc)})") from None


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
