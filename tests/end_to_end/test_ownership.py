"""Ownership by marker, not by name: a folder is a netfl study folder or netfl's staging only when netfl's own
marker says so (for staging, of a process that is gone); other people's files that merely look alike are left
untouched, and no message points to a file netfl did not write."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cli_support import TINY, assert_user_error, run

from netfl.errors import NetflError
from netfl.results import staging, writer
from netfl.results.read_back import STUDY_MARKER
from netfl.study import load_study, run_sweep
from netfl.study.local import LocalRunner

DEAD = 2**22 + 12345  # above Linux's default pid_max: no process has it


class Failing:
    """A runner that runs nothing and fails every run (what a sweep records, without processes)."""

    def describe(self) -> str:
        return "failing"

    def run(self, runs, on_done, tick, on_start=None) -> None:
        for plan, _ in runs:
            on_done(plan, {"status": "failed", "error": "RuntimeError: broken"})


@pytest.fixture
def study_file(tmp_path: Path) -> Path:
    (tmp_path / "tiny.yaml").write_text(TINY)
    path = tmp_path / "study.yaml"
    path.write_text("base: tiny.yaml\nseeds: 2\n")
    return path


def contents(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_foreign_sweep_json_is_not_a_study_folder(study_file: Path, tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "sweep.json").write_text('{"sweep": "my broom inventory"}\n')
    (mine / "notes.txt").write_text("precious")
    before = contents(mine)
    assert_user_error(run("sweep", study_file, "--out", mine), f"{mine}: exists and is not a study folder")
    assert contents(mine) == before
    assert_user_error(run("report", mine), "no run folders found")  # read as a plain folder, not as a study
    assert contents(mine) == before


def test_a_study_folder_from_before_the_marker_is_recognised_by_its_content(study_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_sweep(load_study(study_file, out=out), Failing())
    (out / STUDY_MARKER).unlink()  # as a sweep before the marker left it: sweep.json alone, netfl's own
    outcome = run_sweep(load_study(study_file, out=out), Failing())
    assert len(outcome.with_status("failed")) == 2 and (out / STUDY_MARKER).is_file()


def test_a_look_alike_staging_folder_is_left_untouched(tmp_path: Path) -> None:
    """Named like a dead process's staging, but no netfl marker says it is: not netfl's to rename or delete."""
    out = tmp_path / "results" / "fake"
    looks_like = [tmp_path / "results" / f".fake.previous-{DEAD}", tmp_path / "results" / f".fake.partial-{DEAD}"]
    for folder in looks_like:
        folder.mkdir(parents=True)
        (folder / "summary.json").write_text('{"mine": true}\n')
    writer.write_files(out, {"summary.json": b"{}"})
    assert [contents(folder) for folder in looks_like] == [{"summary.json": b'{"mine": true}\n'}] * 2
    assert contents(out) == {".netfl-run": contents(out)[".netfl-run"], "summary.json": b"{}"}
    staging.recover_folder(out, DEAD)  # what a sweep does for a run that died: still nothing of theirs touched
    assert all(folder.exists() for folder in looks_like)


def test_a_look_alike_in_the_way_is_named_not_removed(tmp_path: Path) -> None:
    in_the_way = tmp_path / f".fake.partial-{os.getpid()}"
    in_the_way.mkdir()
    (in_the_way / "data.csv").write_text("mine")
    with pytest.raises(NetflError, match=f"{in_the_way}: is in the way of writing .* netfl did not make it"):
        writer.write_files(tmp_path / "fake", {"summary.json": b"{}"})
    assert (in_the_way / "data.csv").read_text() == "mine" and not (tmp_path / "fake").exists()


def test_no_message_points_to_an_error_txt_netfl_did_not_write(
    study_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's folder that holds someone else's files gets no error.txt; the tally does not claim one."""
    monkeypatch.setattr(LocalRunner, "run", Failing.run)
    out = tmp_path / "out"
    theirs = out / "runs" / "seed1"
    theirs.mkdir(parents=True)
    (theirs / "thesis.tex").write_text("precious")
    (out / STUDY_MARKER).write_text("a netfl study folder\n")
    result = run("sweep", study_file, "--out", out, "-q")
    assert result.exit_code == 1, result.output
    lines = [line for line in result.stdout.splitlines() if line.startswith("  failed:")]
    assert lines == [
        "  failed: study, seed 1: RuntimeError: broken",
        f"  failed: study, seed 2: RuntimeError: broken ({out / 'runs' / 'seed2' / 'error.txt'})",
    ]
    assert sorted(p.name for p in theirs.iterdir()) == ["thesis.tex"]
    status = json.loads((out / "sweep.json").read_text())
    assert [r["status"] for r in status["runs"]] == ["failed", "failed"]
