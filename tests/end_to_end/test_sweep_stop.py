"""A sweep's stop is total: stopped at any of its phases -- reading the study, each step of starting a run, a run
under way, a run that ends by itself as the stop comes or ignores it, the driver killed outright -- no run
outlives the driver, a run the sweep stopped is never written as complete, and no traceback reaches the terminal.

The driver's own logic is driven in this process (the signal sent from its progress tick, or from the hook at the
step the test is about: netfl.study.steps); what only processes can show (a SIGKILLed driver, the exit code) runs
``netfl sweep``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_support import TINY, with_ctrl_c
from cli_support import run as run_cli

from netfl.study import load_study, steps
from netfl.study import local as local_module
from netfl.study.local import LocalRunner
from netfl.study.steps import STEPS

NETFL = Path(sys.executable).parent / "netfl"

#: Says (a file named after its process) when its run is under way at round 3; then, as asked by the test,
#: ignores SIGTERM and finishes slowly, or goes on for good.
POLICY = """\
import os, signal, time
from pathlib import Path

from netfl.policies import RoundPolicy

HERE = Path(__file__).parent


class Beacon(RoundPolicy):
    def participates(self, round_index):
        if round_index == 3 and self.device.index == 0:
            if (HERE / "ignore-sigterm").exists():
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
            (HERE / "pids").mkdir(exist_ok=True)
            (HERE / "pids" / str(os.getpid())).touch()
        if round_index > 3 and self.device.index == 0 and (HERE / "slowly").exists():
            time.sleep(0.2)
        return True
"""
#: A policy file whose import takes long: the study is still being read when the signal comes.
SLOW_IMPORT = """\
import time
from pathlib import Path

Path(__file__).with_name("reading").touch()
time.sleep(60)

from netfl.policies import RoundPolicy


class Slow(RoundPolicy):
    def participates(self, round_index):
        return True
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "beacon.py").write_text(POLICY)
    (tmp_path / "slow.py").write_text(SLOW_IMPORT)
    (tmp_path / "tiny.yaml").write_text(
        TINY.replace(
            "    link: {uplink: 10Mbps}\n", "    link: {uplink: 10Mbps}\n    availability: {policy: beacon.py:Beacon}\n"
        )
    )
    return tmp_path


def study(folder: Path, rounds: int = 1_000_000, extra: str = ""):
    (folder / "study.yaml").write_text(f"base: tiny.yaml\nset: {{stop.rounds: {rounds}}}\n{extra}")
    return load_study(folder / "study.yaml", out=folder / "out")


def pids(folder: Path) -> list[int]:
    return [int(p.name) for p in (folder / "pids").iterdir()] if (folder / "pids").is_dir() else []


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (an orphan's, which nobody may reap in a container)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def all_gone(processes: list[int], within: float = 15.0) -> bool:
    deadline = time.monotonic() + within
    while any(alive(pid) for pid in processes):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def stop_when_under_way(folder: Path):
    """A progress tick that presses Ctrl-C once a run is under way."""
    sent = []

    def tick(running: int) -> None:
        if pids(folder) and not sent:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGINT)

    return tick


def run_local(folder: Path, plans, tick, **runner) -> list[tuple[str, dict]]:
    done: list[tuple[str, dict]] = []
    with pytest.raises(KeyboardInterrupt):
        LocalRunner(jobs=1, threads=1, **runner).run(
            [(plan, folder / "out" / plan.folder) for plan in plans], lambda p, r: done.append((p.label, r)), tick
        )
    return done


@pytest.mark.slow
def test_stopped_while_a_run_is_under_way(folder: Path) -> None:
    plans = study(folder, extra="seeds: 2\n").runs
    done = run_local(folder, plans, stop_when_under_way(folder))
    assert done == [] and len(pids(folder)) == 1  # the second run was never started
    assert all_gone(pids(folder), within=1.0)  # ended before run() returned
    assert not (folder / "out").exists()  # nothing half-written, no staging left


@pytest.mark.slow
def test_stopped_the_moment_a_run_starts(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The signal lands between starting the run's process and keeping track of it: the run is stopped all the
    same (a sweep once lost track of it, and it ran on to write itself complete)."""
    started: list[int] = []
    start = local_module._Child.start.__func__

    def start_and_signal(cls, *args):
        child = start(cls, *args)
        started.append(child.process.pid)
        os.kill(os.getpid(), signal.SIGINT)
        return child

    monkeypatch.setattr(local_module._Child, "start", classmethod(start_and_signal))
    done = run_local(folder, study(folder, extra="seeds: 2\n").runs, lambda running: None)
    assert done == [] and len(started) == 1
    assert all_gone(started, within=1.0)
    assert not (folder / "out").exists()


@pytest.mark.slow
def test_a_run_that_ends_by_itself_as_the_stop_comes_keeps_its_outcome(folder: Path) -> None:
    """It ignores SIGTERM and finishes: it is complete, and said so; nothing is marked stopped that was not."""
    (folder / "ignore-sigterm").touch()
    (folder / "slowly").touch()
    plan = study(folder, rounds=10).runs[0]
    done = run_local(folder, [plan], stop_when_under_way(folder))
    assert [(label, record["status"]) for label, record in done] == [(plan.label, "complete")]
    summary = json.loads((folder / "out" / plan.folder / "summary.json").read_text())
    assert summary["complete"] is True and summary["rounds"] == 10


@pytest.mark.slow
def test_a_run_that_ignores_the_stop_is_killed(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (folder / "ignore-sigterm").touch()
    monkeypatch.setattr(local_module, "GRACE_S", 0.5)
    done = run_local(folder, study(folder).runs, stop_when_under_way(folder))
    assert done == [] and all_gone(pids(folder), within=1.0)
    assert not (folder / "out").exists()


def sweep(folder: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [NETFL, "sweep", folder / "study.yaml", "--out", folder / "out", "--jobs", "1", *args],
        cwd=folder,
        preexec_fn=with_ctrl_c,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(condition, what: str, process: subprocess.Popen, within: float = 120.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline and process.poll() is None, f"never {what}: {process.communicate()}"
        time.sleep(0.05)


@pytest.mark.slow
def test_stopped_while_reading_the_study(folder: Path) -> None:
    (folder / "study.yaml").write_text("base: tiny.yaml\nset:\n  devices[0].availability: {policy: slow.py:Slow}\n")
    process = sweep(folder)
    wait_for(lambda: (folder / "reading").exists(), "read the study", process)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, (stdout, stderr)
    assert stderr == "interrupted before any run began: nothing was run\n"
    assert not (folder / "out").exists()


@pytest.mark.slow
def test_no_run_outlives_a_driver_killed_outright(folder: Path) -> None:
    """SIGKILL: the driver has no say, and its runs end themselves (Ctrl-C and SIGTERM: the tests above and
    test_sweep.py's)."""
    study(folder, extra="seeds: 2\n")
    process = sweep(folder)
    wait_for(lambda: pids(folder), "got under way", process)
    process.send_signal(signal.SIGKILL)
    stdout, stderr = process.communicate(timeout=60)  # the end of its output: every process holding it is gone
    assert process.returncode == -signal.SIGKILL
    assert all_gone(pids(folder))
    assert "Traceback" not in stderr and "Error" not in stderr, stderr
    status = {r["seed"]: r["status"] for r in json.loads((folder / "out" / "sweep.json").read_text())["runs"]}
    assert status == {1: "pending", 2: "pending"}  # as the driver left it: the next sweep runs both
    assert not (folder / "out" / "runs").exists()


def session(leader: int) -> list[str]:
    """The live processes of the session ``leader`` started (its command lines): the driver's, and every process
    it started, however (its runs, and multiprocessing's forkserver and resource tracker)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if entry.name.isdigit() and int(fields[3]) == leader and fields[0] != "Z":
                found.append((entry / "cmdline").read_text().replace("\0", " ").strip())
        except (OSError, IndexError, ValueError):
            continue
    return found


@pytest.mark.slow
@pytest.mark.parametrize("when", ["starting", "under way"], ids=["as-it-starts-its-first-run", "a-run-under-way"])
def test_no_process_of_the_sweep_outlives_its_exit(folder: Path, when: str) -> None:
    """SIGTERM as the sweep starts its first run (multiprocessing's forkserver importing torch) or while a run is
    under way: when the sweep's process has exited, nothing it started is left (the forkserver, which imported
    torch, once took 2-3 s more to notice and exit)."""
    study(folder, extra="seeds: 2\n")
    process = subprocess.Popen(
        [NETFL, "sweep", folder / "study.yaml", "--out", folder / "out", "--jobs", "1"],
        cwd=folder,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (any("forkserver" in c for c in session(process.pid)) if when == "starting" else pids(folder)):
            assert time.monotonic() < deadline and process.poll() is None, f"the sweep never got to {when}"
            time.sleep(0.02)
        assert when != "starting" or not pids(folder)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 130
        assert session(process.pid) == []  # at the moment it exited
        assert "Traceback" not in process.stderr.read()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # whatever a failed test left of the sweep
        process.stderr.close()


def test_a_run_started_as_its_driver_died_prints_no_traceback(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """What the forkserver prints for a process that failed before netfl's code ran: nothing when the driver's
    pipe closed under it, everything else as before."""
    import importlib

    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    hook = importlib.reload(importlib.import_module("netfl.study.forkserver")).quiet_when_the_driver_is_gone
    assert sys.excepthook is hook
    for error in (EOFError("Ran out of input"), BrokenPipeError(32, "Broken pipe"), ValueError("a bug")):
        try:
            raise error
        except Exception:
            hook(*sys.exc_info())
    printed = capsys.readouterr().err
    assert "ValueError: a bug" in printed and "EOFError" not in printed and "BrokenPipe" not in printed


@pytest.mark.slow
@pytest.mark.parametrize("step", STEPS)
def test_a_signal_at_any_step_of_starting_a_run_stops_the_sweep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    """SIGTERM to ``netfl sweep`` (6 runs, 2 at a time) exactly at one step of starting its third run, which
    starts as one of the first two ends: the sweep stops (exit 130), keeps the finished runs and marks the rest
    interrupted; no run after the third starts. Sent as sweep.json said that the run started (a critical section
    inside the driver's own), it was once lost: the sweep ran all six to the end and exited 0."""
    (tmp_path / "tiny.yaml").write_text(TINY)
    (tmp_path / "study.yaml").write_text("base: tiny.yaml\nseeds: 6\n")
    third = load_study(tmp_path / "study.yaml", out=tmp_path / "out").runs[2].label
    sent: list[str] = []

    def hook(at: str, run: str) -> None:
        if (at, run) == (step, third) and not sent:
            sent.append(at)
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(steps, "hook", hook)
    monkeypatch.setattr(local_module, "_stop_helpers", lambda: None)  # the forkserver kept for the next case
    result = run_cli("sweep", tmp_path / "study.yaml", "--out", tmp_path / "out", "--jobs", "2", "--threads", "1")
    assert sent == [step]
    assert result.exit_code == 130, (result.output, result.exception)
    assert "Traceback" not in result.output
    status = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert status["interrupted"] is True
    runs = {r["seed"]: r for r in status["runs"]}
    assert "complete" in {runs[1]["status"], runs[2]["status"]}  # the run whose end let the third start
    # The third run, stopped as it started, may yet finish first on a busy machine (two rounds) and is then kept
    # as complete, as any run that ends by itself as the stop comes; none after it starts.
    assert runs[3]["status"] in ("interrupted", "complete"), runs
    assert all(runs[seed]["status"] == "interrupted" for seed in (4, 5, 6)), runs
    for r in runs.values():
        summary = tmp_path / "out" / r["folder"] / "summary.json"
        if r["status"] == "complete":
            assert json.loads(summary.read_text())["complete"] is True  # kept whole
        else:
            assert r["status"] == "interrupted" and not summary.exists()


@pytest.mark.slow
def test_a_signal_as_the_tally_is_printed_says_the_runs_are_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM once every run is done, as the sweep prints its tally: exit 130 saying so, no traceback, and
    sweep.json as the sweep wrote it (every run complete, not interrupted)."""
    from netfl.cli import study_commands

    (tmp_path / "tiny.yaml").write_text(TINY)
    (tmp_path / "study.yaml").write_text("base: tiny.yaml\nseeds: 2\n")
    report = study_commands._report_sweep

    def signalled(outcome) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        report(outcome)

    monkeypatch.setattr(study_commands, "_report_sweep", signalled)
    result = run_cli("sweep", tmp_path / "study.yaml", "--out", tmp_path / "out", "--jobs", "1", "--threads", "1")
    assert result.exit_code == 130, (result.output, result.exception)
    assert "interrupted while reporting: every run is done" in result.output and "Traceback" not in result.output
    status = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert status["interrupted"] is False and {r["status"] for r in status["runs"]} == {"complete"}
