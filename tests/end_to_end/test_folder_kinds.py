"""Output folders are typed: a run, a report and a study each carry their own marker, and no command writes into
another kind's folder -- nor suggests an option (--overwrite) that would.

The matrix: every command that writes a folder (simulate, with and without --overwrite; rerun --out; resume;
report --out; sweep --out; trace convert, which writes a file) against every kind of folder it does not write,
including runs and reports made before the markers told kinds apart (one ``.netfl-output`` for both). Each is
refused with exit code 2, the folder named, nothing in it or beside it changed.
"""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import pytest
from cli_support import TINY, assert_user_error, run
from test_checkpoint import StopAt

from netfl.checkpoint import Every, checkpoint_path
from netfl.config import load_scenario
from netfl.results.folders import MARKERS, UNTYPED_MARKER, kinds_of
from netfl.runner import run_scenario
from netfl.signals import Interrupted
from netfl.study import load_study, run_sweep
from netfl.study.execute import run_plan


class InProcess:
    """A sweep's runner that runs each run here, one after the other (a real study folder, no processes)."""

    def describe(self) -> str:
        return "this process"

    def run(self, runs, on_done, tick, on_start=None) -> None:
        for plan, folder in runs:
            on_done(plan, run_plan(plan, folder, threads=1))


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder of each kind, made once: copied for each test, never written."""
    root = tmp_path_factory.mktemp("kinds")
    (root / "tiny.yaml").write_text(TINY)
    (root / "study.yaml").write_text("base: tiny.yaml\nseeds: 1\n")
    (root / "trace.pkl").write_bytes(pickle.dumps({1: {"active": [0.0], "inactive": [5.0], "finish_time": 10.0}}))
    assert run("simulate", root / "tiny.yaml", "--out", root / "run", "-q").exit_code == 0
    assert run("report", root / "run", "--out", root / "report").exit_code == 0
    run_sweep(load_study(root / "study.yaml", out=root / "study"), InProcess())
    for kind in ("run", "report"):  # as netfl wrote them before the markers told kinds apart
        shutil.copytree(root / kind, root / f"{kind}-untyped")
        (root / f"{kind}-untyped" / MARKERS[kind]).rename(root / f"{kind}-untyped" / UNTYPED_MARKER)
    with pytest.raises(Interrupted):  # a checkpoint, for resume
        run_scenario(
            load_scenario(root / "tiny.yaml", overrides=["stop.rounds=4"]),
            out_dir=root / "cut",
            threads=1,
            checkpoint_every=Every(rounds=1),
            progress=StopAt(2),
        )
    return root


#: Each kind of folder, the kind kinds_of() reads it as, and what a refusal says it holds.
FOLDERS = {
    "run": "run",
    "run-untyped": "run",
    "report": "report",
    "report-untyped": "report",
    "study": "study",
}


def simulate(made: Path, target: Path):
    return run("simulate", made / "tiny.yaml", "--out", target, "-q")


def simulate_overwrite(made: Path, target: Path):
    return run("simulate", made / "tiny.yaml", "--out", target, "-q", "--overwrite")


def rerun(made: Path, target: Path):
    return run("rerun", made / "run", "--out", target, "-q")


def resume(made: Path, target: Path):
    return run("resume", target, "-q")  # the test puts a run's checkpoint beside the folder


def report(made: Path, target: Path):
    return run("report", made / "run", "--out", target)


def sweep(made: Path, target: Path):
    return run("sweep", made / "study.yaml", "--out", target, "-q")


def trace_convert(made: Path, target: Path):
    return run("trace", "convert", made / "trace.pkl", target, "--allow-pickle")


#: Each command that writes, and the kind of folder it writes (None: a file, never a folder).
COMMANDS = {
    simulate: "run",
    simulate_overwrite: "run",
    rerun: "run",
    resume: "run",
    report: "report",
    sweep: "study",
    trace_convert: None,
}

MATRIX = [
    pytest.param(command, folder, id=f"{command.__name__}-into-{folder}")
    for command, writes in COMMANDS.items()
    for folder, kind in FOLDERS.items()
    if kind != writes
]


def everything(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("command, folder", MATRIX)
def test_no_command_writes_into_another_kinds_folder(made: Path, tmp_path: Path, command, folder: str) -> None:
    target = tmp_path / "out" / folder
    shutil.copytree(made / folder, target)
    if command is resume:
        shutil.copy(checkpoint_path(made / "cut"), checkpoint_path(target))
    before = everything(tmp_path / "out")
    result = command(made, target)
    assert_user_error(result, str(target))
    if command is not trace_convert:
        assert f"holds a netfl {FOLDERS[folder]}" in result.stderr, result.stderr
    assert "--overwrite" not in result.stderr, result.stderr  # never the option that would destroy it
    assert everything(tmp_path / "out") == before  # nothing in it or beside it (no lock, no staging) changed


@pytest.mark.parametrize("folder, kinds", [(name, {kind}) for name, kind in FOLDERS.items()])
def test_each_kind_is_told_apart(made: Path, folder: str, kinds: set[str]) -> None:
    assert kinds_of(made / folder) == kinds
    marked = [name for name in MARKERS.values() if (made / folder / name).exists()]
    assert marked == ([] if folder.endswith("untyped") else [MARKERS[folder]])


def test_a_folder_of_two_kinds_is_written_by_neither(made: Path, tmp_path: Path) -> None:
    """Files of a run and of a report mixed by hand: no command may replace either."""
    target = tmp_path / "mixed"
    shutil.copytree(made / "run", target)
    shutil.copy(made / "report" / "report.html", target / "report.html")
    (target / MARKERS["report"]).write_text("a netfl report folder\n")
    before = everything(target)
    assert_user_error(simulate_overwrite(made, target), "holds a netfl report and a netfl run")
    assert_user_error(report(made, target), "holds a netfl report and a netfl run")
    assert everything(target) == before


def test_each_command_still_replaces_its_own_kind(made: Path, tmp_path: Path) -> None:
    for kind in ("run-untyped", "report-untyped", "study"):
        shutil.copytree(made / kind, tmp_path / kind)
    assert simulate_overwrite(made, tmp_path / "run-untyped").exit_code == 0
    assert report(made, tmp_path / "report-untyped").exit_code == 0
    assert sweep(made, tmp_path / "study").exit_code == 0
    for kind in ("run", "report"):  # marked as their kind from now on
        assert [p.name for p in (tmp_path / f"{kind}-untyped").glob(".netfl-*")] == [MARKERS[kind]]


def test_rerun_into_an_earlier_run_suggests_no_option_it_lacks(made: Path, tmp_path: Path) -> None:
    target = tmp_path / "again"
    shutil.copytree(made / "run", target)
    result = rerun(made, target)
    assert_user_error(result, f"{target}: holds an earlier run; choose another folder (--out DIR)")
    assert "--overwrite" not in result.stderr


def test_a_default_folder_taken_by_a_report_is_passed_over_and_said_so(
    made: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --out, results/<name>/ holding a report is kept, as an earlier run is; the note names what it holds
    and offers no --overwrite (which would not replace a report)."""
    monkeypatch.chdir(tmp_path)
    shutil.copytree(made / "report", tmp_path / "results" / "tiny")
    before = everything(tmp_path / "results" / "tiny")
    for n, options in ((2, ()), (3, ("--overwrite",))):
        result = run("simulate", made / "tiny.yaml", *options)
        assert result.exit_code == 0, result.output
        assert f"results: results/tiny-{n}/ (results/tiny/ holds a netfl report)\n" in result.stdout, result.stdout
        assert json.loads((tmp_path / "results" / f"tiny-{n}" / "summary.json").read_text())["complete"] is True
    assert everything(tmp_path / "results" / "tiny") == before
