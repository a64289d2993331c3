"""Experiment tracking: a written run folder logged to TensorBoard and/or MLflow, both optional extras.

A run is logged from its folder once netfl has written it (metrics.csv read
back: MLflow holds the file's values exactly, TensorBoard as float32), never while it runs:
tracking cannot change a run's results, and a sweep logs its runs in the
driver whichever machine ran them. The trackers' packages are imported only
here and only when asked for; :func:`check_tracking` says, before a run
starts, which one is missing and how to install it.

    Tracking(tensorboard=Path("tb"), mlflow="sqlite:///mlflow.db")
    track_run(run_folder, tracking, Label.of_run(run_folder, scenario.name))

What is logged (:class:`RunRecord`): every column of metrics.csv against the
round and against simulated time, the algorithm's own metrics of each
aggregation (algorithm.csv, against the round, as ``algorithm/<name>``), the
energy and participation summary, the scenario's parameters flattened to ``devices[0].count``-style keys, and the
run's figures (netfl.results.tracking_tensorboard / tracking_mlflow say how
each tracker holds them).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from netfl.config.schema import MLFLOW_SCHEMES, Scenario
from netfl.errors import NetflError
from netfl.results.tracking_checks import check_targets
from netfl.results.tracking_record import Label, RunRecord, flatten, read_run
from netfl.version import DISTRIBUTION

__all__ = ["Label", "RunRecord", "Tracking", "check_tracking", "flatten", "read_run", "track_run", "tracking_of"]

#: Packages each tracker needs (import name -> what pip installs), for the message when one is missing.
TENSORBOARD_PACKAGES = {"tensorboardX": "tensorboardX"}
MLFLOW_PACKAGES = {"mlflow": "mlflow-skinny"}
MLFLOW_SQL_PACKAGES = {"sqlalchemy": "sqlalchemy", "alembic": "alembic"}  # sqlite: URIs
#: The optional extra that brings them all.
EXTRA = "tracking"


@dataclass(frozen=True)
class Tracking:
    """Where runs are logged: a TensorBoard folder and/or an MLflow tracking URI (both resolved: absolute paths)."""

    tensorboard: Path | None = None
    mlflow: str | None = None
    #: How a message names each target: the option that gave it, else the topology's key.
    names: tuple[str, str] = field(default=("tracking.tensorboard", "tracking.mlflow"), compare=False)

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
    for option, given in (("--tensorboard", tensorboard), ("--mlflow", mlflow)):
        if isinstance(given, str) and not given.strip():
            raise NetflError(
                f"{option} {given!r}: an empty path (it would log into the current folder); give a folder or URI, "
                f"e.g. {option} {'results/tb' if option == '--tensorboard' else 'sqlite:///results/mlflow.db'}"
            )
    base = scenario.source.parent if scenario.source is not None else Path(".")
    spec = scenario.tracking
    board = Path(tensorboard) if tensorboard is not None else _under(base, spec.tensorboard)
    uri = mlflow_uri(mlflow, Path(".")) if mlflow is not None else mlflow_uri(spec.mlflow, base)
    names = ("--tensorboard" if tensorboard is not None else "tracking.tensorboard",
             "--mlflow" if mlflow is not None else "tracking.mlflow")  # fmt: skip
    return Tracking(board.resolve() if board is not None else None, uri, names)


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


def check_tracking(
    tracking: Tracking,
    where: str = "tracking",
    *,
    subfolder: Path | None = None,
    own: Iterable[tuple[Path, str]] = (),
) -> None:
    """Refuse, before any run, tracking whose packages are not installed (one message naming what to install), or
    a target that cannot take the run (:mod:`netfl.results.tracking_checks`: ``subfolder`` is the run's
    TensorBoard subfolder, ``own`` the netfl folders the run or sweep will write, each with what it is)."""
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
    names = tuple(name if name.startswith("--") else f"{where}: {name}" for name in tracking.names)
    check_targets(tracking.tensorboard, tracking.mlflow, names, subfolder=subfolder, own=own)


def _distribution() -> str:
    """The name netfl is installed under (what ``pip install NAME[extra]`` takes): netfl-sim, since "netfl" on
    PyPI is another project."""
    return DISTRIBUTION


def track_run(folder: Path, tracking: Tracking, label: Label) -> None:
    """Log the run written in ``folder`` to each tracker of ``tracking``; NetflError if a tracker refuses or fails,
    in one line that says where the run's results are (they are written whatever the trackers do)."""
    if not tracking:
        return
    record = read_run(folder)
    failures = []
    if tracking.tensorboard is not None:
        try:
            from netfl.results.tracking_tensorboard import log_tensorboard

            log_tensorboard(record, tracking.tensorboard / label.subfolder, label)
        except OSError as exc:
            failures.append(f"TensorBoard {tracking.tensorboard}/: cannot write the event file: {exc}")
        except Exception as exc:  # the tracker's own failure: reported in a line, never a traceback after the run
            failures.append(f"TensorBoard {tracking.tensorboard}/: {_one_line(exc)}")
    if tracking.mlflow is not None:
        try:
            from netfl.results.tracking_mlflow import log_mlflow

            log_mlflow(record, tracking.mlflow, label)
        except NetflError as exc:
            failures.append(_one_line(exc))
        except Exception as exc:
            failures.append(f"MLflow {tracking.mlflow}: cannot log {folder}: {_one_line(exc)}")
    if failures:
        raise NetflError(f"{'; '.join(failures)}; the run itself is complete, its results written in {folder}/")


def _one_line(exc: Exception) -> str:
    """An exception's message, its first line only (a tracker's may run on for a page)."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}" if not isinstance(exc, NetflError) else lines[0]
