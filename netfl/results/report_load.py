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
from netfl.results.claim import holder
from netfl.results.read_back import (
    is_study_folder,
    numeric_columns,
    read_metrics,
    read_parquet_columns,
    read_summary,
    read_sweep_status,
)
from netfl.results.report_cases import Pairing, derive_cases

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


@dataclass
class Missing:
    """The runs of a study that a report of it leaves out, as its sweep.json says: those a live sweep (``pid``)
    is running now or has still to run, or, with no sweep running, those that failed or never finished."""

    study: Path
    total: int
    pid: int | None = None
    running: list[str] = field(default_factory=list)  # started by the live sweep
    waiting: list[str] = field(default_factory=list)  # not started yet
    not_run: list[str] = field(default_factory=list)  # no sweep running: interrupted, or left pending by a kill
    failed: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.running or self.waiting or self.not_run or self.failed)

    def unfinished(self) -> int:
        return len(self.running) + len(self.waiting)

    def lines(self) -> list[str]:
        """One line per reason, each run named (the first few)."""
        out = []
        if self.pid is not None and self.unfinished():
            what = f"running now: {_names(self.running)}" if self.running else ""
            if self.waiting:  # none started: a Ray sweep, which is not told when a task begins, or one just begun
                what += ("; waiting: " if self.running else "running or waiting: ") + _names(self.waiting)
            out.append(
                f"{self.study}: the sweep (pid {self.pid}) is still running: {self.unfinished()} of {self.total} "
                f"runs not finished, so not in this report ({what}); report again when it ends"
            )
        if self.not_run:
            out.append(
                f"{self.study}: {len(self.not_run)} of {self.total} runs never finished (the sweep stopped before "
                f"them; running it again runs them), so not in this report: {_names(self.not_run)}"
            )
        if self.failed:
            out.append(
                f"{self.study}: {len(self.failed)} of {self.total} runs failed (errors in sweep.json), so not in "
                f"this report: {_names(self.failed)}"
            )
        return out


def _names(labels: Sequence[str], most: int = 6) -> str:
    shown = ", ".join(labels[:most])
    return shown + (f" and {len(labels) - most} more" if len(labels) > most else "")


def find_run_folders(
    dirs: Sequence[Path], skip: Path | None = None, missing: list[Missing] | None = None
) -> list[Path]:
    """Every folder holding summary.json under ``dirs`` (at any depth; not inside a run, a hidden
    staging folder or ``skip``, the report's own folder), each once, in a stable order. A study folder
    (netfl's, see :func:`is_study`) gives the runs its sweep.json says are done, not those of cases since removed
    from it; its other runs are added to ``missing``."""
    found: dict[Path, Path] = {}
    gaps: list[Missing] = []
    skip = skip.resolve() if skip is not None else None
    for top in dirs:
        if not Path(top).is_dir():
            raise NetflError(f"{top}: no such folder")
        for root, subdirs, files in os.walk(top):
            here = Path(root)
            listed = _study_runs(here, gaps)
            if listed is not None or "summary.json" in files:
                for folder in listed if listed is not None else [here]:
                    found.setdefault(folder.resolve(), folder)
                subdirs[:] = []  # a run holds no runs; a study's are those its sweep.json lists
                continue
            subdirs[:] = sorted(s for s in subdirs if not s.startswith(".") and (here / s).resolve() != skip)
    gaps = [gap for gap in gaps if gap]
    if missing is not None:
        missing += gaps
    if not found:
        pending = "; ".join(line for gap in gaps for line in gap.lines())
        raise NetflError(
            f"{', '.join(map(str, dirs))}: no run folders found (a run folder holds summary.json, "
            "as written by netfl simulate --out DIR)" + (f"; {pending}" if pending else "")
        )
    return list(found.values())


def is_study(folder: Path) -> bool:
    """``folder`` is a sweep's: netfl's study folder (:func:`~netfl.results.read_back.is_study_folder`), or one
    whose sweep.json no longer reads as a sweep's status beside the ``runs/`` a sweep makes -- a damaged
    sweep.json, which a report refuses rather than guess which runs the study has."""
    return is_study_folder(folder) or ((folder / "sweep.json").is_file() and (folder / "runs").is_dir())


#: sweep.json statuses of a run that is done: its folder is the study's result.
DONE = ("complete", "skipped")


def _study_runs(top: Path, gaps: list[Missing]) -> list[Path] | None:
    """The run folders a sweep's sweep.json says are done and that hold a summary (None: ``top`` is not a study
    folder); the runs it lacks, and why, appended to ``gaps``."""
    if not is_study(top):
        return None
    runs = read_sweep_status(top / "sweep.json")["runs"]
    pid = holder(top)
    gap = Missing(top, len(runs), pid)
    for run in runs:
        label, status = f"{run['case']}, seed {run['seed']}", run["status"]
        if status == "pending" and pid is not None:
            (gap.running if "started" in run else gap.waiting).append(label)
        elif status in ("pending", "interrupted"):
            gap.not_run.append(label)
        elif status == "failed":
            gap.failed.append(label)
    gaps.append(gap)
    folders = [top / run["folder"] for run in runs if run["status"] in DONE]
    return [folder for folder in folders if (folder / "summary.json").is_file()]


def load_runs(folders: Sequence[Path]) -> list[Run]:
    return load_cases(folders)[0]


def load_cases(folders: Sequence[Path]) -> tuple[list[Run], Pairing]:
    """The runs in ``folders``, each given its case and seed, and what the report says of the cases it derived
    from the runs' scenarios."""
    runs = [load_run(folder) for folder in folders]
    return runs, _assign_cases(runs)


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


def _assign_cases(runs: Sequence[Run]) -> Pairing:
    """A sweep's run names its case and seed. Any other run holding its scenario.yaml is a case with the runs
    whose scenarios differ from its in the seeds alone, named by what the cases' scenarios differ in
    (:mod:`netfl.results.report_cases`); a run alone in its case, or without scenario.yaml, is a case of its own,
    named after its folder (or its path below the runs' common folder when two folders share a name)."""
    for run in runs:
        if "study" in run.summary:
            study = run.summary["study"]
            run.case, run.seed, run.overrides = study["case"], study["seed"], dict(study.get("overrides") or {})
    plain = [r for r in runs if "study" not in r.summary]
    for run in plain:
        run.seed = run.summary["seed"]
    pairing = derive_cases(plain, {r.case for r in runs if r.case})
    alone = [r for r in plain if not r.case]
    taken = Counter([r.path.name for r in alone] + [r.case for r in runs if r.case])
    common = Path(os.path.commonpath([r.path.resolve() for r in runs])) if runs else Path()
    for run in alone:
        name = run.path.name
        run.case = name if taken[name] == 1 else run.path.resolve().relative_to(common).as_posix() or name
    first: dict[tuple[str, Any], Run] = {}
    for run in runs:
        other = first.setdefault((run.case, run.seed), run)
        if other is run:
            continue
        if "study" in run.summary and "study" in other.summary:  # two studies with a case of the same name
            raise NetflError(
                f"{other.path} and {run.path} are both case {run.case!r}, seed {run.seed}: a report pairs the runs "
                "of a case by seed, so each (case, seed) may appear once; report the studies separately"
            )
        raise NetflError(
            f"{other.path} and {run.path} are the same scenario with the same seed ({run.seed}; case {run.case!r}): "
            "a report pairs the runs of a case by seed, so each seed of a case may appear once; report them "
            "separately, or leave one out"
        )
    return pairing
