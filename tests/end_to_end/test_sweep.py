"""netfl sweep: every run an ordinary run folder; done runs skipped, failures isolated, Ctrl-C keeps what finished."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_support import TINY, assert_user_error, run, with_ctrl_c

from netfl.config import load_scenario
from netfl.results.report import write_report
from netfl.runner import run_scenario
from netfl.study import load_study, run_sweep
from netfl.study.local import LocalRunner
from netfl.study.progress import SweepProgress

STUDY = """\
name: small
base: tiny.yaml
set: {stop.rounds: 3}
cases:
  fedavg: {server.algorithm.name: fedavg}
  fedau: {server.algorithm: {name: fedau}}
seeds: 2
"""

#: A policy that fails at run time (not at validation): what a bug in a user's policy looks like.
FAILING_POLICY = """\
from netfl.policies import RoundPolicy


class Broken(RoundPolicy):
    def participates(self, round_index):
        raise RuntimeError("this policy is broken")
"""


class Recording:
    """A runner that runs nothing and remembers what it was given (for what a sweep skips)."""

    def __init__(self):
        self.given = []

    def describe(self) -> str:
        return "recording"

    def run(self, runs, on_done, tick, on_start=None):
        self.given += [plan.label for plan, _ in runs]
        for plan, _ in runs:
            on_done(plan, {"status": "failed", "error": "not run"})


@pytest.fixture
def study_file(tmp_path: Path) -> Path:
    (tmp_path / "tiny.yaml").write_text(TINY)
    (tmp_path / "broken.py").write_text(FAILING_POLICY)
    path = tmp_path / "study.yaml"
    path.write_text(STUDY)
    return path


def local(jobs: int = 2) -> LocalRunner:
    return LocalRunner(jobs=jobs, threads=1)


def test_every_run_is_a_run_folder_with_its_case_and_seed(study_file: Path, tmp_path: Path) -> None:
    study = load_study(study_file, out=tmp_path / "out")
    outcome = run_sweep(study, local())
    assert [r["status"] for r in outcome.records.values()] == ["complete"] * 4
    for plan in study.runs:
        summary = json.loads((tmp_path / "out" / plan.folder / "summary.json").read_text())
        assert summary["complete"] and summary["rounds"] == 3
        assert summary["study"] == {"case": plan.case, "seed": plan.seed, "overrides": {**plan.settings}}
        assert summary["algorithm"] == plan.case and summary["seed"] == plan.seed
    status = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert [(r["case"], r["seed"], r["status"]) for r in status["runs"]] == [
        ("fedavg", 1, "complete"),
        ("fedavg", 2, "complete"),
        ("fedau", 1, "complete"),
        ("fedau", 2, "complete"),
    ]
    made = write_report([tmp_path / "out"], targets=(0.1,), out_dir=tmp_path / "report")
    assert (made.runs, made.cases) == (4, 2)


def test_a_sweep_run_is_the_run_simulate_makes_bit_for_bit(study_file: Path, tmp_path: Path) -> None:
    study = load_study(study_file, out=tmp_path / "out")
    run_sweep(study, local(jobs=1))
    plan = study.runs[3]  # fedau, seed 2
    alone = tmp_path / "alone"
    scenario = load_scenario(
        tmp_path / "tiny.yaml", overrides=["stop.rounds=3", "server.algorithm={name: fedau}", "seed=2"]
    )
    run_scenario(scenario, out_dir=alone, threads=1)
    for name in ("metrics.csv", "events.parquet", "devices.parquet", "scenario.yaml"):
        assert (tmp_path / "out" / plan.folder / name).read_bytes() == (alone / name).read_bytes(), name


def test_a_second_sweep_runs_only_what_changed_or_failed(study_file: Path, tmp_path: Path) -> None:
    study = load_study(study_file, out=tmp_path / "out")
    run_sweep(study, local())
    recording = Recording()
    outcome = run_sweep(load_study(study_file, out=tmp_path / "out"), recording)
    assert recording.given == [] and len(outcome.with_status("skipped")) == 4
    # the fedau case changes: only its two runs are stale
    study_file.write_text(STUDY.replace("{name: fedau}", "{name: fedau, K: 3}"))
    recording = Recording()
    run_sweep(load_study(study_file, out=tmp_path / "out"), recording)
    assert recording.given == ["fedau, seed 1", "fedau, seed 2"]
    # ...and what failed (the recording runner failed them) is run again next time, with --rerun everything
    recording = Recording()
    run_sweep(load_study(study_file, out=tmp_path / "out"), recording)
    assert recording.given == ["fedau, seed 1", "fedau, seed 2"]
    recording = Recording()
    run_sweep(load_study(study_file, out=tmp_path / "out"), recording, rerun=True)
    assert len(recording.given) == 4


def test_a_failing_run_is_recorded_and_the_others_finish(study_file: Path, tmp_path: Path) -> None:
    study_file.write_text(
        STUDY + "grid:\n  devices[0].availability: {good: {policy: always}, broken: {policy: broken.py:Broken}}\n"
    )
    study = load_study(study_file, out=tmp_path / "out")
    outcome = run_sweep(study, local())
    failed = outcome.with_status("failed")
    assert [p.label for p in failed] == [
        "fedavg, availability=broken, seed 1",
        "fedavg, availability=broken, seed 2",
        "fedau, availability=broken, seed 1",
        "fedau, availability=broken, seed 2",
    ]
    assert len(outcome.with_status("complete")) == 4
    folder = tmp_path / "out" / failed[0].folder
    assert sorted(p.name for p in folder.iterdir()) == [".netfl-run", "error.txt", "scenario.yaml"]
    error = (folder / "error.txt").read_text()
    assert "broken.py:6: RuntimeError in Broken.participates: this policy is broken" in error
    status = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert sum(r["status"] == "failed" for r in status["runs"]) == 4
    assert all("this policy is broken" in r["error"] for r in status["runs"] if r["status"] == "failed")


def test_a_run_whose_process_dies_is_a_failed_run(study_file: Path, tmp_path: Path) -> None:
    (tmp_path / "killer.py").write_text(
        FAILING_POLICY.replace(
            'raise RuntimeError("this policy is broken")', "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
        ).replace("class Broken", "class Killer")
    )
    study_file.write_text(
        STUDY.replace("seeds: 2", "seeds: 1") + "grid:\n  devices[0].availability: {dies: {policy: killer.py:Killer}}\n"
    )
    outcome = run_sweep(load_study(study_file, out=tmp_path / "out"), local())
    assert [outcome.records[p.folder]["error"] for p in outcome.study.runs] == [
        "the run's process was ended by SIGKILL (killed: out of memory?)"
    ] * 2
    assert not [p for p in (tmp_path / "out").rglob(".*partial*")]


def test_the_cli_tallies_and_exits_1_when_a_run_failed(study_file: Path, tmp_path: Path) -> None:
    study_file.write_text(
        STUDY.replace("seeds: 2", "seeds: 1") + "grid:\n  devices[0].availability: "
        "{broken: {policy: broken.py:Broken}}\n"
    )
    out = tmp_path / "out"
    result = run("sweep", study_file, "--out", out, "--jobs", "2", "-q")
    assert result.exit_code == 1, result.output
    assert "small: 0 ran, 0 already done, 2 failed" in result.stdout
    assert "failed: fedavg, availability=broken, seed 1: " in result.stdout
    assert (
        f"RuntimeError in Broken.participates: this policy is broken; the run's results up to there are in {out}"
        in (result.stdout)
    )
    dry = run("sweep", study_file, "--out", out, "--dry-run")
    assert dry.exit_code == 0 and dry.stdout.count("to run ") == 2


def test_bad_study_files_and_folders_are_user_errors(study_file: Path, tmp_path: Path) -> None:
    study_file.write_text(STUDY + "cases: {}\n")
    assert_user_error(run("sweep", study_file), "study.yaml", "duplicate key 'cases'")
    study_file.write_text(STUDY)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("precious")
    assert_user_error(run("sweep", study_file, "--out", tmp_path / "mine"), "is not a study folder")
    assert (tmp_path / "mine" / "thesis.tex").read_text() == "precious"
    assert_user_error(run("sweep", tmp_path / "nope.yaml"), "nope.yaml", "file not found")


def test_the_progress_line_counts_runs_and_estimates_the_rest() -> None:
    progress = SweepProgress(bar=False)
    progress.total, progress.finished, progress.failed, progress.running = 8, 2, 1, 2
    now = progress.started + 10.0
    assert progress.eta_s(now) == pytest.approx(30.0)  # 2 runs in 10 s: 6 more take 30 s
    assert progress.line(now) == "[######..................] 2/8 runs  2 running  1 failed  10s elapsed  ETA 30s"


@pytest.mark.slow
def test_ctrl_c_keeps_finished_runs_and_records_the_rest(study_file: Path, tmp_path: Path) -> None:
    """One short run, then one that would take minutes: Ctrl-C after the first leaves it whole."""
    study_file.write_text(
        STUDY.replace("seeds: 2", "seeds: 1").replace(
            "fedau: {server.algorithm: {name: fedau}}", "long: {stop.rounds: 1000000}"
        )
    )
    out = tmp_path / "out"
    netfl = Path(sys.executable).parent / "netfl"
    sweep = subprocess.Popen(
        [netfl, "sweep", study_file, "--out", out, "--jobs", "1"],
        cwd=tmp_path,
        preexec_fn=with_ctrl_c,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not (out / "runs" / "fedavg" / "seed1" / "summary.json").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)  # the long run is under way
    sweep.send_signal(signal.SIGINT)
    stdout, stderr = sweep.communicate(timeout=60)
    assert sweep.returncode == 130, (stdout, stderr)
    assert "every finished run is kept" in stderr and "Traceback" not in stderr
    assert json.loads((out / "runs" / "fedavg" / "seed1" / "summary.json").read_text())["complete"] is True
    assert not (out / "runs" / "long").exists()
    status = {r["case"]: r["status"] for r in json.loads((out / "sweep.json").read_text())["runs"]}
    assert status == {"fedavg": "complete", "long": "interrupted"}
    assert not [p for p in out.rglob(".*") if p.name not in (".netfl-run", ".netfl-study")]  # netfl's markers


@pytest.mark.slow
def test_ray_tasks_land_the_same_runs_as_local_processes(study_file: Path, tmp_path: Path) -> None:
    pytest.importorskip("ray")
    from netfl.study.ray_runner import RayRunner

    study_file.write_text(STUDY.replace("seeds: 2", "seeds: 1"))
    local_outcome = run_sweep(load_study(study_file, out=tmp_path / "local"), local())
    ray_outcome = run_sweep(
        load_study(study_file, out=tmp_path / "ray"), RayRunner(address=None, threads=1, local_cpus=2)
    )
    assert [r["status"] for r in ray_outcome.records.values()] == ["complete"] * 2
    for plan in local_outcome.study.runs:
        for name in ("summary.json", "metrics.csv", "events.parquet", "devices.parquet", "scenario.yaml"):
            ours, theirs = tmp_path / "local" / plan.folder / name, tmp_path / "ray" / plan.folder / name
            if name == "summary.json":  # the wall-clock time differs, nothing else
                a, b = json.loads(ours.read_text()), json.loads(theirs.read_text())
                a.pop("wall_time_s"), b.pop("wall_time_s")
                assert a == b
            else:
                assert ours.read_bytes() == theirs.read_bytes(), name


def test_the_study_driver_loads_neither_torch_nor_simpy() -> None:
    code = (
        "import sys, netfl.study, netfl.study.local, netfl.study.ray_runner, netfl.study.progress; "
        "print(sorted(m for m in ('torch', 'simpy') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": ""}
    )
    assert out.stdout.strip() == "[]"


def test_the_report_of_a_study_folder_covers_the_study_as_it_is_now(study_file: Path, tmp_path: Path) -> None:
    """A case removed from the study file leaves its old runs on disk, but no longer in the study's report."""
    out = tmp_path / "out"
    run_sweep(load_study(study_file, out=out), local())
    study_file.write_text(STUDY.replace("  fedau: {server.algorithm: {name: fedau}}\n", ""))
    run_sweep(load_study(study_file, out=out), local())
    assert (out / "runs" / "fedau" / "seed1" / "summary.json").exists()
    made = write_report([out], targets=(0.1,), out_dir=tmp_path / "report")
    assert (made.runs, made.cases) == (2, 1)
