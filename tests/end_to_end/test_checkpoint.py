"""Checkpoint, resume and rerun: an interrupted-and-resumed run is the run that never stopped, bit for bit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
from cli_support import TINY, assert_user_error, run, with_ctrl_c
from device_support import DEVICE_PAIRS

from netfl.checkpoint import Checkpoint, Every, checkpoint_path
from netfl.config import load_scenario
from netfl.errors import NetflError
from netfl.runner import run_scenario
from netfl.signals import Interrupted

REPO = Path(__file__).resolve().parents[2]
REPRODUCED = ("events.parquet", "metrics.csv", "devices.parquet", "timeline.parquet", "algorithm.csv")


class StopAt:
    """A progress bar that presses Ctrl-C once the run has done ``rounds`` rounds."""

    def __init__(self, rounds: int):
        self.rounds = rounds

    def update(self, sim_time_s: float, rounds: int, accuracy: float | None) -> None:
        if rounds >= self.rounds:
            raise KeyboardInterrupt

    def close(self) -> None:
        pass


class CtrlCAt(StopAt):
    """A progress bar whose user presses Ctrl-C (a real SIGINT) once the run has done ``rounds`` rounds."""

    def update(self, sim_time_s: float, rounds: int, accuracy: float | None) -> None:
        if rounds == self.rounds:
            os.kill(os.getpid(), signal.SIGINT)


def same_bytes(a: Path, b: Path) -> None:
    for name in REPRODUCED:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def interrupted_and_resumed(
    tmp_path: Path, topology: Path, overrides: list[str], stop_at: int, every: Every
) -> Checkpoint:
    scenario = load_scenario(topology, overrides=overrides)
    run_scenario(scenario, out_dir=tmp_path / "whole", threads=1)
    with pytest.raises(Interrupted):
        run_scenario(scenario, out_dir=tmp_path / "cut", threads=1, checkpoint_every=every, progress=StopAt(stop_at))
    assert json.loads((tmp_path / "cut" / "summary.json").read_text())["complete"] is False
    checkpoint = Checkpoint.load(checkpoint_path(tmp_path / "cut"))
    run_scenario(scenario, out_dir=tmp_path / "cut", threads=1, resume=checkpoint)
    same_bytes(tmp_path / "whole", tmp_path / "cut")
    assert json.loads((tmp_path / "cut" / "summary.json").read_text())["complete"] is True
    assert not checkpoint_path(tmp_path / "cut").exists()  # a whole run keeps no checkpoint
    return checkpoint


#: How many rounds a resumed run goes on after its interruption: a run is made only this long past it, not its
#: topology's whole length (up to 80 rounds, which repeated nothing the first rounds after a resume do not): every
#: kind of state a checkpoint holds is read back by then (the next aggregations, the clients' next jobs, an
#: evaluation, the arrivals of the jobs in flight).
AFTER = 6


def test_a_resumed_run_is_the_run_that_never_stopped(tmp_path: Path) -> None:
    quickstart = REPO / "topologies" / "quickstart.yaml"
    checkpoint = interrupted_and_resumed(tmp_path, quickstart, [f"stop.rounds={33 + AFTER}"], 33, Every(rounds=10))
    assert checkpoint.rounds == 30  # the last multiple of 10 before the interruption


@pytest.mark.slow
def test_ctrl_c_writes_a_checkpoint_where_the_run_stopped_and_resume_goes_on_from_there(tmp_path: Path) -> None:
    """Ctrl-C at round 13 with a checkpoint every 10 rounds: the checkpoint is at round 13, not 10, and the resumed
    run is byte-identical to the run that never stopped."""
    scenario = load_scenario(REPO / "topologies" / "quickstart.yaml", overrides=["stop.rounds=16"])
    run_scenario(scenario, out_dir=tmp_path / "whole", threads=1)
    with pytest.raises(Interrupted) as stopped:
        run_scenario(
            scenario, out_dir=tmp_path / "cut", threads=1, checkpoint_every=Every(rounds=10), progress=CtrlCAt(13)
        )
    partial = json.loads((tmp_path / "cut" / "summary.json").read_text())
    assert partial["complete"] is False and partial["rounds"] == 13
    checkpoint = Checkpoint.load(checkpoint_path(tmp_path / "cut"))
    assert checkpoint.rounds == 13 and checkpoint.stopped_at_s == stopped.value.checkpointed_at == partial["sim_time_s"]
    assert checkpoint.sim_time_s < checkpoint.stopped_at_s  # the periodic schedule goes on from round 30's
    run_scenario(scenario, out_dir=tmp_path / "cut", threads=1, resume=checkpoint)
    same_bytes(tmp_path / "whole", tmp_path / "cut")


@pytest.mark.slow
def test_ctrl_c_inside_training_waits_for_the_event_and_checkpoints_after_it(tmp_path: Path, monkeypatch) -> None:
    """A signal that comes while the learner aggregates (training the round's jobs) is held until that event is
    over: the checkpoint holds the aggregation it interrupted, and resuming gives the same bytes."""
    from netfl.learn.federation.learner import Learner

    # asynchronous: jobs in flight at the stop
    scenario = load_scenario(REPO / "topologies" / "anarchic.yaml", overrides=["stop.rounds=14"])
    run_scenario(scenario, out_dir=tmp_path / "whole", threads=1)
    aggregate, calls = Learner.aggregate, []

    def interrupted_midway(self, context):
        calls.append(context.round_index)
        if len(calls) == 12:
            os.kill(os.getpid(), signal.SIGINT)  # during the call: training and aggregation still to come
        return aggregate(self, context)

    monkeypatch.setattr(Learner, "aggregate", interrupted_midway)
    with pytest.raises(Interrupted):
        run_scenario(scenario, out_dir=tmp_path / "cut", threads=1, checkpoint_every=Every(rounds=10))
    monkeypatch.setattr(Learner, "aggregate", aggregate)
    checkpoint = Checkpoint.load(checkpoint_path(tmp_path / "cut"))
    assert checkpoint.rounds == 12 and [name for name, _ in checkpoint.log].count("aggregate") == 12
    run_scenario(scenario, out_dir=tmp_path / "cut", threads=1, resume=checkpoint)
    same_bytes(tmp_path / "whole", tmp_path / "cut")


def test_checkpoints_by_simulated_time(tmp_path: Path) -> None:
    # a round of the quickstart takes about 3 simulated s: the checkpoint at 60 s is round 20 or so, before the stop
    quickstart = REPO / "topologies" / "quickstart.yaml"
    checkpoint = interrupted_and_resumed(tmp_path, quickstart, [f"stop.rounds={25 + AFTER}"], 25, Every(seconds=60.0))
    assert 60.0 <= checkpoint.sim_time_s and checkpoint.rounds < 25


@pytest.mark.slow
@pytest.mark.parametrize(
    "topology, overrides, stop_at",
    [
        ("anarchic.yaml", [], 25),  # asynchronous: jobs in flight at the checkpoint, stale updates after it
        ("mmfl.yaml", [], 12),  # several models and a probe every round
        ("ram-relay.yaml", [], 30),  # Fed-CVaR-Avg's extra scalar behind a random-access relay
        ("million-phones.yaml", ["devices[0].count=2000", "stop.rounds=12"], 8),  # the lazy engine
        (  # asynchronous arrivals in the array form, waiting devices decided ahead of the clock
            "ten-million-phones.yaml",
            [
                "devices[0].count=3000",
                "engine.devices=arrays",
                "server.async.pause=2h",
                "server.async.buffer=20",
                "stop.rounds=8",
            ],
            5,
        ),
        (  # partial work, a server optimiser's moments, error-feedback memories and a quantised downlink
            "quickstart.yaml",
            [
                "server.algorithm={name: fednova}",
                "server.round.partial_work=true",
                "server.optimizer={name: adam, lr: 0.01}",
                "server.compression={uplink: {topk: 10%, error_feedback: true}, downlink: {qsgd: {levels: 16}}}",
            ],
            33,
        ),
        ("hierarchical.yaml", ["stop.rounds=20"], 14),  # edge models between two cloud aggregations
        (
            "anarchic.yaml",
            # one update an aggregation: 35 after the interruption, for the 40 workers' jobs in flight to arrive
            ["server.algorithm={name: fedasync, max_staleness: 8}", "server.async.buffer=1", "stop.rounds=80"],
            45,
        ),
    ],
)
def test_resuming_every_kind_of_run(tmp_path: Path, topology: str, overrides: list[str], stop_at: int) -> None:
    if not any(o.startswith("stop.rounds=") for o in overrides):  # a case's own stop is shorter still
        overrides = [*overrides, f"stop.rounds={stop_at + AFTER}"]
    interrupted_and_resumed(tmp_path, REPO / "topologies" / topology, overrides, stop_at, Every(rounds=3))


#: A run whose checkpoint holds a server optimiser's moments and error-feedback memories (tensors inside objects
#: of their own), training a CNN (stacked on a GPU, replicas on a CPU).
ACROSS_DEVICES = [
    "stop.rounds=12",
    "eval.every=3 rounds",
    "task.model={name: cnn}",
    "server.algorithm={name: fedprox, mu: 0.01}",
    "server.optimizer={name: adam, lr: 0.01}",
    "server.compression={uplink: {topk: 10%, error_feedback: true}}",
]


@pytest.mark.parametrize(("written_on", "resumed_on"), DEVICE_PAIRS)
def test_a_run_resumes_on_another_device(tmp_path: Path, written_on: str, resumed_on: str) -> None:
    """A checkpoint written on one device resumes on another (its tensors read onto the CPU, then moved to the
    resumed run's device): the world goes on as in the run that never stopped, bit for bit, and the accuracies
    agree within rounding (to the bit on one device)."""
    scenario = load_scenario(REPO / "topologies" / "quickstart.yaml", overrides=ACROSS_DEVICES)
    run_scenario(scenario, out_dir=tmp_path / "whole", threads=1, device=written_on)
    with pytest.raises(Interrupted):
        run_scenario(scenario, out_dir=tmp_path / "cut", threads=1, device=written_on,
                     checkpoint_every=Every(rounds=3), progress=StopAt(7))  # fmt: skip
    checkpoint = Checkpoint.load(checkpoint_path(tmp_path / "cut"))
    assert checkpoint.rounds == 6
    run_scenario(scenario, out_dir=tmp_path / "cut", threads=1, device=resumed_on, resume=checkpoint)
    for name in ("events.parquet", "devices.parquet", "timeline.parquet"):
        assert (tmp_path / "whole" / name).read_bytes() == (tmp_path / "cut" / name).read_bytes(), name
    whole, cut = (pd.read_csv(tmp_path / run / "metrics.csv") for run in ("whole", "cut"))
    if written_on == resumed_on:
        pd.testing.assert_frame_equal(whole, cut, check_exact=True)
    else:
        assert (whole["test_accuracy"] - cut["test_accuracy"]).abs().max() <= 0.05


def test_a_checkpoint_written_on_a_gpu_resumes_on_a_cpu(tmp_path: Path, monkeypatch) -> None:
    """A GPU run's checkpoint names its tensors' device cuda:0; torch would refuse to read them on a machine
    without CUDA unless told where to put them. Written here with torch told every tensor is on cuda:0."""
    scenario = load_scenario(REPO / "topologies" / "quickstart.yaml", overrides=["stop.rounds=10"])
    run_scenario(scenario, out_dir=tmp_path / "whole", threads=1)
    with monkeypatch.context() as patched:
        patched.setattr(torch.serialization, "location_tag", lambda storage: "cuda:0")
        with pytest.raises(Interrupted):
            run_scenario(scenario, out_dir=tmp_path / "cut", threads=1, checkpoint_every=Every(rounds=3),
                         progress=StopAt(7))  # fmt: skip
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA"):  # what a plain torch.load says
            torch.load(checkpoint_path(tmp_path / "cut"), weights_only=False)
    checkpoint = Checkpoint.load(checkpoint_path(tmp_path / "cut"))
    run_scenario(scenario, out_dir=tmp_path / "cut", threads=1, resume=checkpoint)
    same_bytes(tmp_path / "whole", tmp_path / "cut")


def test_a_checkpoint_of_another_scenario_is_refused(tmp_path: Path) -> None:
    scenario = load_scenario(REPO / "topologies" / "quickstart.yaml")
    with pytest.raises(Interrupted):
        run_scenario(scenario, out_dir=tmp_path / "a", threads=1, checkpoint_every=Every(rounds=5), progress=StopAt(12))
    checkpoint = Checkpoint.load(checkpoint_path(tmp_path / "a"))
    other = load_scenario(REPO / "topologies" / "anarchic.yaml")
    with pytest.raises(NetflError, match="the checkpoint does not match this run"):
        run_scenario(other, out_dir=tmp_path / "a", threads=1, resume=checkpoint)


def test_a_checkpoint_of_an_older_format_says_so(tmp_path: Path) -> None:
    import torch

    from netfl.checkpoint import FORMAT

    old = tmp_path / ".old.checkpoint"
    torch.save({"format": FORMAT - 1, "learner": {}}, old)
    with pytest.raises(NetflError, match=f"format {FORMAT - 1}, written by another version of netfl"):
        Checkpoint.load(old)


def test_resume_without_a_checkpoint_or_with_a_damaged_one(tmp_path: Path) -> None:
    assert_user_error(run("resume", tmp_path / "nothing"), "no checkpoint to resume from")
    (tmp_path / ".broken.checkpoint").write_bytes(b"not a pickle")
    assert_user_error(run("resume", tmp_path / "broken"), "not a netfl checkpoint")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("50rounds", Every(rounds=50)),
        ("50 rounds", Every(rounds=50)),
        ("1 round", Every(rounds=1)),
        ("30min", Every(seconds=1800.0)),
        ("2h", Every(seconds=7200.0)),
    ],
)
def test_checkpoint_every_reads_rounds_or_a_duration(text: str, expected: Every) -> None:
    assert Every.parse(text) == expected


@pytest.mark.parametrize("text", ["0 rounds", "-3", "soon", "0s", "inf", "50"])
def test_checkpoint_every_refuses_nonsense(text: str, tmp_path: Path) -> None:
    (tmp_path / "tiny.yaml").write_text(TINY)
    assert_user_error(
        run("simulate", tmp_path / "tiny.yaml", "--out", tmp_path / "o", "--checkpoint-every", text),
        "--checkpoint-every",
        "a number of rounds with the word, 50rounds, or a simulated duration, 30min or 2h",
    )


def test_a_bare_number_of_checkpoint_rounds_is_refused_naming_both_spellings() -> None:
    with pytest.raises(
        NetflError, match=r"--checkpoint-every 50: a number without a unit could mean rounds or seconds"
    ):
        Every.parse("50")


def test_rerun_repeats_a_run_and_says_it_is_identical(tmp_path: Path) -> None:
    (tmp_path / "tiny.yaml").write_text(TINY)
    assert run("simulate", tmp_path / "tiny.yaml", "--out", tmp_path / "first", "-q").exit_code == 0
    result = run("rerun", tmp_path / "first", "-q")
    assert result.exit_code == 0, result.output
    assert (
        f"in {tmp_path / 'first-rerun'}/: identical (events.parquet, metrics.csv, devices.parquet, timeline.parquet)"
        in result.stdout
    )
    summary = json.loads((tmp_path / "first" / "summary.json").read_text())
    summary["versions"]["torch"] = "1.0.0"  # as if run elsewhere
    (tmp_path / "first" / "summary.json").write_text(json.dumps(summary))
    again = run("rerun", tmp_path / "first", "-q")
    assert "warning: torch" in again.stderr and "1.0.0 when" in again.stderr
    assert "first-rerun-2" in again.stdout


def signalled_after_the_first_checkpoint(tmp_path: Path, rounds: int, sig: int) -> tuple[int, str]:
    """netfl simulate of a tiny run with --checkpoint-every 10rounds (and, beside it, the same run uninterrupted in
    ``whole``), sent ``sig`` once its first checkpoint is written: its exit code and stderr."""
    topology = tmp_path / "run.yaml"
    topology.write_text(TINY.replace("stop: {rounds: 2}", f"stop: {{rounds: {rounds}}}"))
    whole = run("simulate", topology, "--out", tmp_path / "whole", "-q", "--threads", "1")
    assert whole.exit_code == 0, whole.output
    netfl = Path(sys.executable).parent / "netfl"
    every = ["--checkpoint-every", "10rounds"]
    process = subprocess.Popen(
        [netfl, "simulate", topology, "--out", tmp_path / "cut", "-q", "--threads", "1", *every],
        preexec_fn=with_ctrl_c,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline, saved = time.monotonic() + 120, checkpoint_path(tmp_path / "cut")
    while not saved.exists():  # the first checkpoint (round 10): the run is under way
        assert time.monotonic() < deadline and process.poll() is None, "the run never got under way"
        time.sleep(0.01)
    process.send_signal(sig)
    _, stderr = process.communicate(timeout=60)
    return process.returncode, stderr


@pytest.mark.slow
def test_killed_outright_and_resumed_from_the_command_line(tmp_path: Path) -> None:
    """SIGKILL (no chance to write anything) after a checkpoint: netfl resume finishes the run to the same bits."""
    signalled_after_the_first_checkpoint(tmp_path, 300, signal.SIGKILL)
    assert not (tmp_path / "cut").exists() and checkpoint_path(tmp_path / "cut").is_file()
    resumed = run("resume", tmp_path / "cut", "-q", "--threads", "1")
    assert resumed.exit_code == 0, resumed.output
    same_bytes(tmp_path / "whole", tmp_path / "cut")


@pytest.mark.slow
def test_ctrl_c_on_the_command_line_then_resume_gives_the_run_that_never_stopped(tmp_path: Path) -> None:
    """The user's path: netfl simulate --checkpoint-every, Ctrl-C (exit 130, saying where it stopped), then
    netfl resume from there, to the same bytes as a run that was never interrupted."""
    code, stderr = signalled_after_the_first_checkpoint(tmp_path, 60, signal.SIGINT)
    assert code == 130, stderr
    assert "checkpoint written where it stopped" in stderr and f"netfl resume {tmp_path / 'cut'}" in stderr
    stopped = Checkpoint.load(checkpoint_path(tmp_path / "cut"))
    assert stopped.stopped_at_s is not None and stopped.stopped_at_s >= stopped.sim_time_s  # at or past round 10
    resumed = run("resume", tmp_path / "cut", "--threads", "1")
    assert resumed.exit_code == 0, resumed.output
    assert f"resumed from round {stopped.rounds} (" in resumed.stdout and "where it was interrupted" in resumed.stdout
    same_bytes(tmp_path / "whole", tmp_path / "cut")
