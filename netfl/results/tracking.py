"""Experiment tracking: a written run folder logged to TensorBoard and/or MLflow, both optional extras.

A run is logged from its folder once netfl has written it (metrics.csv read
back, so a tracker holds the file's values exactly), never while it runs:
tracking cannot change a run's results, and a sweep logs its runs in the
driver whichever machine ran them. The trackers' packages are imported only
here and only when asked for; :func:`check_tracking` says, before a run
starts, which one is missing and how to install it.

    Tracking(tensorboard=Path("tb"), mlflow="sqlite:///mlflow.db")
    track_run(run_folder, tracking, Label.of_run(run_folder))

What is logged (:class:`RunRecord`): every column of metrics.csv against the
round and against simulated time, the energy and participation summary, the
scenario's parameters flattened to ``devices[0].count``-style keys, and the
run's figures (netfl.results.tracking_tensorboard / tracking_mlflow say how
each tracker holds them).
"""

from __future__ import annotations

import csv
import importlib.metadata
import importlib.util
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import yaml

from netfl.config.schema import MLFLOW_SCHEMES, Scenario
from netfl.errors import NetflError

#: Packages each tracker needs (import name -> what pip installs), for the message when one is missing.
TENSORBOARD_PACKAGES = {"tensorboardX": "tensorboardX"}
MLFLOW_PACKAGES = {"mlflow": "mlflow-skinny"}
MLFLOW_SQL_PACKAGES = {"sqlalchemy": "sqlalchemy", "alembic": "alembic"}  # sqlite: URIs
#: The optional extra that brings them all.
EXTRA = "tracking"
#: The figures a run folder may hold, in the order they are logged.
FIGURES = ("accuracy_vs_time.png", "timeline.png", "staleness.png")


@dataclass(frozen=True)
class Tracking:
    """Where runs are logged: a TensorBoard folder and/or an MLflow tracking URI (both resolved: absolute paths)."""

    tensorboard: Path | None = None
    mlflow: str | None = None

    def __bool__(self) -> bool:
        return self.tensorboard is not None or self.mlflow is not None

    def describe(self) -> str:
        where = ([f"TensorBoard {self.tensorboard}/"] if self.tensorboard else []) + (
            [f"MLflow {self.mlflow}"] if self.mlflow else []
        )
        return " and ".join(where)


def tracking_of(scenario: Scenario, *, tensorboard: str | Path | None = None, mlflow: str | None = None) -> Tracking:
    """The scenario's ``tracking:`` (paths relative to its topology file), each target replaced by the one given
    here (from the command line: relative to the current folder)."""
    base = scenario.source.parent if scenario.source is not None else Path(".")
    spec = scenario.tracking
    board = Path(tensorboard) if tensorboard is not None else _under(base, spec.tensorboard)
    uri = mlflow_uri(mlflow, Path(".")) if mlflow is not None else mlflow_uri(spec.mlflow, base)
    return Tracking(board.resolve() if board is not None else None, uri)


def _under(base: Path, path: str | None) -> Path | None:
    return None if path is None else base / Path(path).expanduser()


def mlflow_uri(uri: str | None, base: Path) -> str | None:
    """``uri`` with a relative path made absolute from ``base``: a folder (MLflow's file store) becomes a file: URI,
    ``sqlite:///runs.db`` the absolute ``sqlite:////.../runs.db``; a server's address stays as it is."""
    if uri is None:
        return None
    scheme, colon, rest = uri.partition(":")
    if not colon or len(scheme) < 2 or not scheme.replace("+", "").replace(".", "").replace("-", "").isalnum():
        return (base / Path(uri).expanduser()).resolve().as_uri()  # a folder
    scheme = scheme.lower()
    if scheme not in MLFLOW_SCHEMES:
        raise NetflError(
            f"--mlflow {uri}: netfl logs to {', '.join(s + ':' for s in MLFLOW_SCHEMES)} URIs or a folder "
            "(e.g. sqlite:///mlflow.db or mlruns)"
        )
    if scheme == "sqlite" and rest.startswith("///") and not rest.startswith("////"):
        return f"sqlite:///{(base / rest[3:]).resolve()}"
    return uri


def check_tracking(tracking: Tracking, where: str = "tracking") -> None:
    """Refuse, before any run, tracking whose packages are not installed: one message naming what to install."""
    needed = {**(TENSORBOARD_PACKAGES if tracking.tensorboard else {})}
    if tracking.mlflow:
        needed.update(MLFLOW_PACKAGES)
        if tracking.mlflow.startswith("sqlite:"):
            needed.update(MLFLOW_SQL_PACKAGES)
    missing = [pip_name for module, pip_name in needed.items() if importlib.util.find_spec(module) is None]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise NetflError(
            f"{where}: logging to {tracking.describe()} needs {', '.join(missing)}, which {verb} not installed: "
            f"pip install '{_distribution()}[{EXTRA}]' (netfl's optional extra for experiment tracking)"
        )


def _distribution() -> str:
    """The name netfl is installed under (what ``pip install NAME[extra]`` takes)."""
    names = importlib.metadata.packages_distributions().get("netfl") or ["netfl"]
    return names[0]


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
    return RunRecord(
        folder,
        metrics,
        _summary_numbers(summary, devices.to_pydict()),
        flatten(scenario or {}),
        scenario_text,
        [folder / name for name in FIGURES if (folder / name).is_file()],
        summary.get("stopped_by"),
    )


_SUMMARY_KEYS = (
    "rounds",
    "sim_time_s",
    "final_test_accuracy",
    "best_test_accuracy",
    "energy_j",
    "work_energy_j",
    "updates_received",
    "updates_applied",
    "updates_dropped",
    "updates_skipped",
    "bytes_up",
    "bytes_down",
    "num_devices",
    "devices_battery_empty",
)


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


def track_run(folder: Path, tracking: Tracking, label: Label) -> None:
    """Log the run written in ``folder`` to each tracker of ``tracking``; NetflError if a tracker refuses."""
    if not tracking:
        return
    record = read_run(folder)
    if tracking.tensorboard is not None:
        from netfl.results.tracking_tensorboard import log_tensorboard

        try:
            log_tensorboard(record, tracking.tensorboard / label.subfolder, label)
        except OSError as exc:
            raise NetflError(f"TensorBoard {tracking.tensorboard}/: cannot write the event file: {exc}") from None
    if tracking.mlflow is not None:
        from netfl.results.tracking_mlflow import log_mlflow

        log_mlflow(record, tracking.mlflow, label)
