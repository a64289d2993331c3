"""Running a study: every run of the study file that is not already done, each an ordinary run folder.

    <study folder>/
        sweep.json                       # every run: case, seed, folder, status, error, time
        runs/<case>/<grid point>/seed<k>/  # a run folder, as netfl simulate writes it

A run is *done* when its folder holds a complete summary.json and a
scenario.yaml equal to what the study now resolves to: re-running a study
skips those and runs the rest (new, changed, failed, interrupted). A failed
run's folder holds its scenario.yaml and error.txt; the others go on. Ctrl-C
stops the running runs and leaves every finished one as it is.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from netfl.errors import NetflError
from netfl.results.writer import replace_folder, write_scenario
from netfl.study.spec import RunPlan, Study

STATUS_FILE = "sweep.json"


class Runner(Protocol):
    def describe(self) -> str: ...

    def run(
        self,
        runs: list[tuple[RunPlan, Path]],
        on_done: Callable[[RunPlan, dict[str, Any]], None],
        tick: Callable[[int], None],
    ) -> None: ...


@dataclass
class SweepOutcome:
    study: Study
    records: dict[Path, dict[str, Any]] = field(default_factory=dict)  # run folder (in the study) -> its record
    interrupted: bool = False

    def with_status(self, status: str) -> list[RunPlan]:
        return [plan for plan in self.study.runs if self.records.get(plan.folder, {}).get("status") == status]


def is_done(plan: RunPlan, folder: Path) -> bool:
    """Complete, and run from the scenario the study now asks for (so an edited study re-runs what it changed)."""
    try:
        summary = json.loads((folder / "summary.json").read_text())
        saved = yaml.safe_load((folder / "scenario.yaml").read_text())
    except (OSError, ValueError, yaml.YAMLError):
        return False
    study = summary.get("study") if isinstance(summary, dict) else None
    return (
        summary.get("complete") is True
        and saved == plan.document()
        and isinstance(study, dict)
        and study.get("case") == plan.case
        and study.get("seed") == plan.seed
    )


def check_study_dir(out: Path) -> None:
    """A study folder is new, empty, or an earlier sweep's (it holds sweep.json): never a run or the user's."""
    if out.exists() and not out.is_dir():
        raise NetflError(f"{out}: exists and is not a folder; choose another study folder (--out DIR)")
    if out.is_dir() and any(out.iterdir()) and not (out / STATUS_FILE).is_file():
        raise NetflError(
            f"{out}: exists and is not a study folder (no {STATUS_FILE}); choose a new or empty folder (--out DIR)"
        )


def run_sweep(
    study: Study,
    runner: Runner,
    *,
    rerun: bool = False,
    on_start: Callable[[list[RunPlan]], None] = lambda todo: None,
    on_done: Callable[[RunPlan, dict[str, Any]], None] = lambda plan, record: None,
    tick: Callable[[int], None] = lambda running: None,
) -> SweepOutcome:
    """Run every run of ``study`` not already done (all of them with ``rerun``) with ``runner``."""
    check_study_dir(study.out)
    try:
        study.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise NetflError(f"{study.out}: cannot create the study folder: {exc}") from None
    outcome = SweepOutcome(study)
    todo = []
    for plan in study.runs:
        if not rerun and is_done(plan, study.out / plan.folder):
            outcome.records[plan.folder] = {"status": "skipped"}
        else:
            outcome.records[plan.folder] = {"status": "pending"}
            todo.append(plan)
    _write_status(outcome)
    on_start(todo)

    def finished(plan: RunPlan, record: dict[str, Any]) -> None:
        if record["status"] == "failed":
            _write_failure(study.out / plan.folder, plan, record)
        outcome.records[plan.folder] = record
        _write_status(outcome)
        on_done(plan, record)

    try:
        runner.run([(plan, study.out / plan.folder) for plan in todo], finished, tick)
    except KeyboardInterrupt:
        outcome.interrupted = True
        for record in outcome.records.values():
            if record["status"] == "pending":
                record["status"] = "interrupted"
    _write_status(outcome)
    return outcome


def _write_failure(folder: Path, plan: RunPlan, record: dict[str, Any]) -> None:
    """The failed run's folder: the scenario it tried and what went wrong (no summary.json: not a run)."""

    def fill(staging: Path) -> None:
        write_scenario(staging / "scenario.yaml", plan.document(), str(plan.scenario.source or ""))
        text = f"{plan.label}: failed\n{record['error']}\n"
        if record.get("traceback"):
            text += "\n" + record["traceback"]
        (staging / "error.txt").write_text(text)

    try:
        replace_folder(folder, fill)
    except NetflError:
        pass  # a folder not netfl's, or not writable: the failure is still in sweep.json


def _write_status(outcome: SweepOutcome) -> None:
    study = outcome.study
    runs = []
    for plan in study.runs:
        record = {k: _finite(v) for k, v in outcome.records.get(plan.folder, {}).items() if k != "traceback"}
        runs.append({"case": plan.case, "seed": plan.seed, "folder": plan.folder.as_posix(), **record})
    document = {
        "study": study.name,
        "file": str(study.file.resolve()),
        "updated": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "interrupted": outcome.interrupted,
        "runs": runs,
    }
    path = study.out / STATUS_FILE
    staging = path.with_name(f".{STATUS_FILE}.{os.getpid()}")
    try:
        staging.write_text(json.dumps(document, indent=2, allow_nan=False) + "\n")
        staging.replace(path)
    except OSError as exc:
        raise NetflError(f"{path}: cannot write the study's status: {exc}") from None


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value
