"""A written run as experiment trackers log it (:mod:`netfl.results.tracking`): read back from its folder, and named
for the trackers."""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import yaml

from netfl.errors import NetflError
from netfl.results.read_back import SUMMARY_NUMBERS

#: The figures a run folder may hold, in the order they are logged.
FIGURES = ("accuracy_vs_time.png", "timeline.png", "staleness.png")


@dataclass(frozen=True)
class Label:
    """How one run is named in the trackers: the MLflow experiment and run name, the TensorBoard subfolder, tags."""

    experiment: str
    run_name: str
    subfolder: Path
    tags: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of_run(cls, folder: Path, scenario_name: str) -> Label:
        """A run of ``netfl simulate``: experiment = the scenario, run and subfolder = the results folder's name."""
        folder = Path(folder)
        return cls(scenario_name, folder.name, Path(folder.name), {"run_folder": str(folder.resolve())})

    @classmethod
    def of_study_run(cls, study: str, case: str, seed: int, folder: Path, study_folder: Path) -> Label:
        """A run of a sweep: experiment = the study; subfolder ``<case>/seed<k>`` as in the study folder."""
        sub = Path(*Path(folder).parts[1:]) if Path(folder).parts[:1] == ("runs",) else Path(folder)
        tags = {"study": study, "case": case, "seed": str(seed), "run_folder": str((study_folder / folder).resolve())}
        return cls(study, f"{case} seed {seed}", sub, tags)


@dataclass
class RunRecord:
    """A written run as the trackers log it, read back from its folder."""

    folder: Path
    metrics: dict[str, list[float]]  # metrics.csv's columns, as the file holds them (round and sim_time_s too)
    summary: dict[str, float]  # the energy and participation summary: name -> number
    params: dict[str, str | int | float | bool]  # the scenario, flattened
    scenario_text: str
    figures: list[Path]
    stopped_by: str | None = None  # summary.json's: rounds, sim_time, diverged...
    #: algorithm.csv's rows (the strategy's own metrics of each aggregation): (round, sim_time_s, tag -> value),
    #: the tag the metric's name, after ``task<k>/`` and ``edge<e>/`` where the run has several models or edges
    algorithm: list[tuple[int, float, dict[str, float]]] = field(default_factory=list)

    @property
    def rounds(self) -> list[int]:
        return [int(r) for r in self.metrics["round"]]

    @property
    def series(self) -> list[str]:
        """The metrics logged against round and time (every column but those two)."""
        return [name for name in self.metrics if name not in ("round", "sim_time_s")]


def read_run(folder: Path) -> RunRecord:
    """The run in ``folder`` (metrics.csv, summary.json, devices.parquet, scenario.yaml, the figures)."""
    folder = Path(folder)
    try:
        with (folder / "metrics.csv").open(newline="") as f:
            rows = list(csv.reader(f))
        summary = json.loads((folder / "summary.json").read_text())
        devices = pq.read_table(folder / "devices.parquet", columns=["tasks_started", "updates_delivered"])
        scenario_text = (folder / "scenario.yaml").read_text() if (folder / "scenario.yaml").is_file() else ""
    except (OSError, ValueError) as exc:
        raise NetflError(f"{folder}: cannot read the run to log it: {exc}") from None
    header, body = rows[0], rows[1:]
    metrics = {name: [float(row[i]) for row in body] for i, name in enumerate(header)}
    scenario = yaml.safe_load(scenario_text) if scenario_text else {}
    algorithm = _algorithm_rows(folder / "algorithm.csv")
    return RunRecord(
        folder,
        metrics,
        _summary_numbers(summary, devices.to_pydict()),
        flatten(scenario or {}),
        scenario_text,
        [folder / name for name in FIGURES if (folder / name).is_file()],
        summary.get("stopped_by"),
        algorithm,
    )


def _algorithm_rows(file: Path) -> list[tuple[int, float, dict[str, float]]]:
    """algorithm.csv as the trackers log it: per aggregation its round, time and metrics (empty cells left out)."""
    if not file.is_file():
        return []
    try:
        with file.open(newline="") as f:
            rows = list(csv.DictReader(f))
    except (OSError, ValueError) as exc:
        raise NetflError(f"{file}: cannot read the algorithm's metrics to log them: {exc}") from None
    several_tasks = len({row["task"] for row in rows}) > 1
    out = []
    for row in rows:
        prefix = (f"task{row['task']}/" if several_tasks else "") + (f"edge{row['edge']}/" if row.get("edge") else "")
        metrics = {
            f"{prefix}{name}": float(value)
            for name, value in row.items()
            if name not in ("sim_time_s", "round", "task", "edge") and value not in ("", None)
        }
        out.append((int(row["round"]), float(row["sim_time_s"]), metrics))
    return out


#: summary.json's numbers a tracker logs: those a report reads back, and three more.
_SUMMARY_KEYS = (*SUMMARY_NUMBERS, "updates_skipped", "num_devices", "devices_battery_empty")


def _summary_numbers(summary: dict[str, Any], devices: dict[str, list]) -> dict[str, float]:
    """summary.json's energy, participation and outcome numbers, with each activity's energy and two counts from
    devices.parquet: how many devices delivered an update, and the jobs a device started on average."""
    out = {key: float(summary[key]) for key in _SUMMARY_KEYS if isinstance(summary.get(key), (int, float))}
    for activity, joules in (summary.get("energy_by_activity_j") or {}).items():
        if isinstance(joules, (int, float)):
            out[f"energy_{activity}_j"] = float(joules)
    delivered, started = devices["updates_delivered"], devices["tasks_started"]
    out["devices_participated"] = float(sum(1 for n in delivered if n > 0))
    out["tasks_started_mean"] = float(sum(started) / len(started)) if started else math.nan
    return out


def flatten(value: Any, prefix: str = "") -> dict[str, str | int | float | bool]:
    """A scenario mapping as ``path -> value`` (``devices[0].battery.capacity``): what trackers take as params."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list):
        out = {}
        for i, item in enumerate(value):
            out.update(flatten(item, f"{prefix}[{i}]"))
        return out if value else {prefix: "[]"}
    if value is None:
        return {prefix: "null"}
    return {prefix: value if isinstance(value, (str, int, float, bool)) else str(value)}
