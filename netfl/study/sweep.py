"""Running a study: every run of the study file that is not already done, each an ordinary run folder.

    <study folder>/
        .netfl-study                     # netfl's marker: this folder is a study's, for netfl to write
        sweep.json                       # every run: case, seed, folder, status, started, error, time
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

from netfl.config.loading import read_yaml
from netfl.errors import NetflError
from netfl.results.claim import claim_folder
from netfl.results.folders import STUDY, describe, kinds_of, write_marker
from netfl.results.read_back import STUDY_MARKER, read_summary
from netfl.results.staging import replace_folder
from netfl.results.tracking import Label, Tracking, check_tracking, track_run
from netfl.results.writer import write_scenario
from netfl.signals import signals_deferred
from netfl.study.spec import RunPlan, Study
from netfl.study.steps import reached

STATUS_FILE = "sweep.json"


class Runner(Protocol):
    def describe(self) -> str: ...

    def run(
        self,
        runs: list[tuple[RunPlan, Path]],
        on_done: Callable[[RunPlan, dict[str, Any]], None],
        tick: Callable[[int], None],
        on_start: Callable[[RunPlan], None] | None = None,
    ) -> None: ...


@dataclass
class SweepOutcome:
    study: Study
    records: dict[Path, dict[str, Any]] = field(default_factory=dict)  # run folder (in the study) -> its record
    interrupted: bool = False
    error_files: dict[Path, Path] = field(default_factory=dict)  # failed run's folder -> the error.txt written

    def with_status(self, status: str) -> list[RunPlan]:
        return [plan for plan in self.study.runs if self.records.get(plan.folder, {}).get("status") == status]


def is_done(plan: RunPlan, folder: Path) -> bool:
    """Complete, and run from the scenario the study now asks for (so an edited study re-runs what it changed).
    A damaged, foreign or missing summary.json or scenario.yaml is not done: the run is made again."""
    try:
        summary = read_summary(folder / "summary.json")
        saved = read_yaml(folder / "scenario.yaml")
    except NetflError:
        return False
    study = summary.get("study")
    return (
        summary.get("complete") is True
        and saved == plan.document()
        and isinstance(study, dict)
        and study.get("case") == plan.case
        and study.get("seed") == plan.seed
    )


def check_study_dir(out: Path) -> None:
    """A study folder is new, empty, or netfl's (:func:`~netfl.results.read_back.is_study_folder`): never a run,
    a report or the user's, whatever files it holds."""
    if out.exists() and not out.is_dir():
        raise NetflError(f"{out}: exists and is not a folder; choose another study folder (--out DIR)")
    if not out.is_dir() or not any(out.iterdir()):
        return
    kinds = kinds_of(out)
    if kinds - {STUDY}:
        raise NetflError(
            f"{out}: holds {describe(kinds)}, not a study; a sweep writes only into a study folder, so choose a new "
            "or empty folder (--out DIR)"
        )
    if not kinds:
        raise NetflError(
            f"{out}: exists and is not a study folder (netfl marks its own with {STUDY_MARKER}); choose a new or "
            "empty folder (--out DIR)"
        )


def run_sweep(
    study: Study,
    runner: Runner,
    *,
    rerun: bool = False,
    on_start: Callable[[list[RunPlan]], None] = lambda todo: None,
    on_done: Callable[[RunPlan, dict[str, Any]], None] = lambda plan, record: None,
    tick: Callable[[int], None] = lambda running: None,
    tracking: dict[Path, Tracking] | None = None,
) -> SweepOutcome:
    """Run every run of ``study`` not already done (all of them with ``rerun``) with ``runner``, the study folder
    claimed for the sweep (a second sweep into it is refused). Ctrl-C or SIGTERM once the study folder is set up
    ends the sweep with ``interrupted`` set: no run left running, sweep.json written.

    ``tracking``: run folder (``plan.folder``) -> where that run is logged once it completes, here in the driver
    whichever process or machine ran it (:mod:`netfl.results.tracking`); a tracker's failure is the record's
    ``tracking_error``, and the sweep goes on."""
    tracking = {folder: where for folder, where in (tracking or {}).items() if where}
    for where in dict.fromkeys(tracking.values()):
        check_tracking(where, str(study.file))
    with claim_folder(study.out, noun="study"):
        check_study_dir(study.out)
        try:
            study.out.mkdir(parents=True, exist_ok=True)
            write_marker(study.out, STUDY, f"study {study.name}: sweep.json, runs/")
        except OSError as exc:
            raise NetflError(f"{study.out}: cannot create the study folder: {exc}") from None
        outcome = SweepOutcome(study)
        for plan in study.runs:
            outcome.records[plan.folder] = {"status": "pending"}
        with signals_deferred() as received:  # acted on below, never halfway through a step
            todo = []
            for plan in study.runs:
                if rerun or not is_done(plan, study.out / plan.folder):
                    todo.append(plan)
                else:
                    outcome.records[plan.folder] = {"status": "skipped"}
            _write_status(outcome)
            on_start(todo)

            def finished(plan: RunPlan, record: dict[str, Any]) -> None:
                if record["status"] == "failed" and _write_failure(study.out / plan.folder, plan, record):
                    outcome.error_files[plan.folder] = study.out / plan.folder / "error.txt"
                if record["status"] == "complete" and plan.folder in tracking:
                    label = Label.of_study_run(study.name, plan.case, plan.seed, plan.folder, study.out)
                    try:
                        track_run(study.out / plan.folder, tracking[plan.folder], label)
                    except NetflError as exc:
                        record = {**record, "tracking_error": str(exc)}
                outcome.records[plan.folder] = record
                _write_status(outcome)
                on_done(plan, record)

            def started(plan: RunPlan) -> None:  # for a report made meanwhile: which runs are under way
                outcome.records[plan.folder] = {"status": "pending", "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
                _write_status(outcome, starting=plan.label)

            stopped = False
            if not received:
                try:
                    runner.run([(plan, study.out / plan.folder) for plan in todo], finished, tick, on_start=started)
                except KeyboardInterrupt:
                    stopped = True
            # Taken whenever it came, up to the status written last; one arriving after that is delivered as the
            # section ends (to the caller: KeyboardInterrupt).
            if stopped or received.take():
                _mark_interrupted(outcome)
            _write_status(outcome)
            if received.take() and not outcome.interrupted:  # it came as the last run's end was written: say so
                _mark_interrupted(outcome)
                _write_status(outcome)
    return outcome


def _mark_interrupted(outcome: SweepOutcome) -> None:
    outcome.interrupted = True
    for record in outcome.records.values():
        if record["status"] == "pending":
            record["status"] = "interrupted"


def _write_failure(folder: Path, plan: RunPlan, record: dict[str, Any]) -> bool:
    """The failed run's folder: the scenario it tried and what went wrong (no summary.json: not a run); whether
    it could be written."""

    def fill(staging: Path) -> None:
        write_scenario(staging / "scenario.yaml", plan.document(), str(plan.scenario.source or ""))
        text = f"{plan.label}: failed\n{record['error']}\n"
        if record.get("traceback"):
            text += "\n" + record["traceback"]
        (staging / "error.txt").write_text(text)

    try:
        replace_folder(folder, fill)
    except NetflError:
        return False  # a folder not netfl's, or not writable: the failure is still in sweep.json
    return True


def _write_status(outcome: SweepOutcome, *, starting: str | None = None) -> None:
    """sweep.json, whole or not at all; ``starting``: the label of the run whose start it says."""
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
    with signals_deferred():  # a Ctrl-C now would leave the staging file behind; it is delivered after
        if starting is not None:
            reached("announcing", starting)
        try:
            staging.write_text(json.dumps(document, indent=2, allow_nan=False) + "\n")
            staging.replace(path)
        except OSError as exc:
            staging.unlink(missing_ok=True)
            raise NetflError(f"{path}: cannot write the study's status: {exc}") from None


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value
