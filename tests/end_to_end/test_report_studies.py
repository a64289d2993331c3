"""`netfl report` of a study reads what its sweep.json says: a damaged sweep.json is refused, naming it, wherever
the study lies under the folders given; a sweep still running is said, with the runs it has still to finish; runs
that failed or never finished are named, not silently left out."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from cli_support import TINY, assert_user_error, run

from netfl.results.folders import MARKERS
from netfl.study import load_study, run_sweep
from netfl.study.execute import run_plan


class InProcess:
    """Runs each run here, one after the other, telling the sweep as each starts; ``meanwhile(n)`` is called as the
    n-th run starts (before it runs)."""

    def __init__(self, meanwhile=lambda n: None):
        self.meanwhile = meanwhile

    def describe(self) -> str:
        return "this process"

    def run(self, runs, on_done, tick, on_start=None) -> None:
        for n, (plan, folder) in enumerate(runs):
            on_start(plan)
            self.meanwhile(n)
            on_done(plan, run_plan(plan, folder, threads=1))


def make_study(tmp_path: Path, seeds: int, runner=None) -> Path:
    (tmp_path / "tiny.yaml").write_text(TINY)
    (tmp_path / "study.yaml").write_text(f"base: tiny.yaml\nseeds: {seeds}\n")
    run_sweep(load_study(tmp_path / "study.yaml", out=tmp_path / "results" / "study"), runner or InProcess())
    return tmp_path / "results" / "study"


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_study(tmp_path_factory.mktemp("finished"), seeds=2)


def copy(study: Path, to: Path) -> Path:
    shutil.copytree(study, to / "results" / "study")
    return to / "results" / "study"


@pytest.mark.parametrize("marked", [True, False], ids=["marked", "from-before-the-marker"])
@pytest.mark.parametrize("given", ["study", "its-parent"])
def test_a_truncated_sweep_json_is_refused_naming_it(finished: Path, tmp_path: Path, marked: bool, given: str) -> None:
    """Cut short (a full disk, a copy that stopped): refused, not read as a folder of loose runs -- also when the
    study lies below the folder reported, and when it is from before netfl marked its studies."""
    study = copy(finished, tmp_path)
    text = (study / "sweep.json").read_text()
    (study / "sweep.json").write_text(text[: len(text) // 2])
    if not marked:
        (study / MARKERS["study"]).unlink()
    result = run("report", study if given == "study" else study.parent)
    assert_user_error(result, f"{study / 'sweep.json'}: 1 problem(s)", "not valid JSON")
    assert not (study / "report").exists() and not (study.parent / "report").exists()


def test_a_study_below_the_folder_reported_gives_the_runs_its_sweep_json_lists(finished: Path, tmp_path: Path) -> None:
    study = copy(finished, tmp_path)
    status = json.loads((study / "sweep.json").read_text())
    status["runs"] = status["runs"][:1]  # the second seed's case since removed from the study
    (study / "sweep.json").write_text(json.dumps(status))
    result = run("report", study.parent)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("1 run(s) in 1 case(s)")


def test_a_report_while_the_sweep_runs_says_what_is_still_running(tmp_path: Path) -> None:
    """Three seeds, the report made as the second starts: one run in it, and the other two named, the second as
    running, the third as waiting -- on the terminal and on the page."""
    study = tmp_path / "results" / "study"
    reports = []

    def report_as_the_second_starts(n: int) -> None:
        if n == 1:
            reports.append(run("report", study))

    make_study(tmp_path, seeds=3, runner=InProcess(report_as_the_second_starts))
    (during,) = reports
    assert during.exit_code == 0, during.output
    page = study / "report" / "report.html"
    assert during.stdout.splitlines()[0] == f"1 run(s) in 1 case(s): {page}; 2 more still running, not in it"
    said = (
        f"{study}: the sweep (pid {os.getpid()}) is still running: 2 of 3 runs not finished, so not in this report "
        "(running now: study, seed 2; waiting: study, seed 3); report again when it ends"
    )
    assert during.stderr == f"warning: {said}\n"
    assert said in (study / "report" / "report.html").read_text()

    after = run("report", study)  # the sweep ended: every run, and nothing to say
    assert after.exit_code == 0 and after.stderr == "", after.output
    assert after.stdout.splitlines()[0] == f"3 run(s) in 1 case(s): {study / 'report' / 'report.html'}"
    assert "still running" not in (study / "report" / "report.html").read_text()


def test_runs_that_failed_or_never_finished_are_named(finished: Path, tmp_path: Path) -> None:
    """No sweep running: a run left pending (its sweep killed) and one that failed are left out and said so,
    even where the folder still holds an earlier result."""
    study = copy(finished, tmp_path)
    status = json.loads((study / "sweep.json").read_text())
    status["runs"] += [dict(status["runs"][0], seed=3, folder="runs/seed3")]
    status["runs"][0].update(status="pending", started="2026-01-01T00:00:00")
    status["runs"][2].update(status="failed", error="RuntimeError: broken")
    (study / "sweep.json").write_text(json.dumps(status))
    result = run("report", study)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("1 run(s) in 1 case(s)") and "still running" not in result.stdout
    assert result.stderr.splitlines() == [
        f"warning: {study}: 1 of 3 runs never finished (the sweep stopped before them; running it again runs them), "
        "so not in this report: study, seed 1",
        f"warning: {study}: 1 of 3 runs failed (errors in sweep.json), so not in this report: study, seed 3",
    ]


def test_a_sweep_whose_runs_have_not_finished_yet_says_so(tmp_path: Path) -> None:
    study = tmp_path / "results" / "study"
    reports = []
    make_study(tmp_path, seeds=1, runner=InProcess(lambda n: reports.append(run("report", study))))
    assert_user_error(reports[0], "no run folders found", "the sweep (pid", "running now: study, seed 1")
