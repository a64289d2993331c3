"""Work estimated before it is built: a run's rounds, evaluations and events from its schedule, a study's size
counted without expanding it, the trace converter's output counted before it is written. Each refusal is one
message with the figure, in bounded memory, before anything runs."""

from __future__ import annotations

import pickle
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from cli_support import TINY, assert_user_error, run

from netfl.config import load_scenario
from netfl.config.schedule import estimate_schedule
from netfl.policies.traces import MAX_CSV_ROWS
from netfl.study.local import LocalRunner
from netfl.study.spec import MAX_RUNS, RUN_EVENTS_ALLOWANCE

#: TINY's job on its 4 boards, by hand: logistic regression on 8x8 digits has 64 x 10 + 10 = 650 parameters
#: (2600 bytes as float32) and 2 x 640 + 10 = 1290 forward FLOPs a sample; a job of 2 steps of 8 samples trains
#: 3 x 1290 x 16 = 61,920 FLOPs at 1 GFLOP/s, and sends the model down and up at 10 Mbit/s (8 x 2600 bits each).
TINY_JOB_S = 2 * 8 * 2600 / 10e6 + 3 * 1290 * 16 / 1e9


def tiny(tmp_path: Path, *settings: str):
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    return load_scenario(path, overrides=settings)


def peak_memory(call: Callable[[], Any]) -> tuple[Any, int]:
    """What ``call()`` returns and the most memory Python allocated meanwhile, in bytes."""
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_schedule_estimate_by_hand(tmp_path: Path) -> None:
    two_rounds = estimate_schedule(tiny(tmp_path))
    assert two_rounds.round_s == pytest.approx(TINY_JOB_S)  # no deadline: the job, 4.22 ms
    assert two_rounds.rounds == 2
    assert two_rounds.evaluations == 2 + 2  # the initial, one per round (eval.every: 1), the final
    # all 4 devices each round: a start and an aggregate, 7 per job; and the 4 always-on boards' "online" at time 0
    # (idle devices' events: logged by default below 10^4 devices)
    assert two_rounds.events == 2 * (2 + 7 * 4) + 4
    assert two_rounds.idle_events == 4
    ten_seconds = estimate_schedule(tiny(tmp_path, "stop={sim_time: 10s}", "eval.every=1s"))
    assert ten_seconds.rounds == pytest.approx(10 / TINY_JOB_S)
    assert ten_seconds.evaluations == 2 + 10
    paced = estimate_schedule(tiny(tmp_path, "stop={sim_time: 10s}", "server.round.interval=2s"))
    assert (paced.round_s, paced.round_set_by, paced.rounds) == (2.0, "the interval", 5)
    buffered = estimate_schedule(tiny(tmp_path, "stop={sim_time: 10s}", "server.mode=async", "server.async.buffer=2"))
    assert buffered.round_s == pytest.approx(2 * TINY_JOB_S / 4)  # 2 updates from 4 devices working at once
    assert buffered.events == pytest.approx(10 / buffered.round_s * (2 + 7 * 2) + 4)
    timeless = estimate_schedule(tiny(tmp_path, "stop={sim_time: 10s}", "devices[0].link={uplink: 1e300}"))
    assert timeless.rounds == pytest.approx(10 / (3 * 1290 * 16 / 1e9))


def test_evaluating_every_nanosecond_is_refused_with_the_figure_before_the_run(tmp_path: Path) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY.replace("stop: {rounds: 2}", "stop: {sim_time: 2h}"))
    result, peak = peak_memory(lambda: run("simulate", path, "--set", "eval.every=1e-9s", "--out", tmp_path / "o"))
    assert_user_error(result, "eval.every: evaluating every 1e-09 simulated s over about 7.2e+03 simulated s")
    assert "about 7.2e+12 times; netfl refuses more than 1e+07 evaluations" in result.stderr
    assert peak < 20 * 2**20 and not (tmp_path / "o").exists() and "rounds in" not in result.stdout


def test_a_run_that_would_log_without_end_is_refused_with_the_figure(tmp_path: Path) -> None:
    """A stop at 10^9 simulated seconds with rounds of 1 ms: 10^12 rounds of 30 events."""
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    result = run(
        "validate",
        path,
        "--set",
        "stop={sim_time: 1e9s}",
        "--set",
        "server.round.deadline=1ms",
        "--set",
        "eval.every=1h",
    )
    assert_user_error(
        result,
        "stop.sim_time: about 1e+12 rounds: 1e+09 simulated s at rounds of about 0.001 s (the deadline) would log "
        "about 3e+13 engine events",
        "(its memory, or this process's limit), room for about",
    )
    assert "eval.every" not in result.stderr  # hourly evaluations are fine


def test_validate_states_the_estimate(tmp_path: Path) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    result = run("validate", path)
    assert "estimate   about 2 rounds, 4 evaluations and 64 engine events (~12.5 KiB, 4 of them idle devices')" in (
        result.stdout
    )


NIGHTS = "devices[0].availability={policy: daily, start: '22:00', end: '07:00'}"


def test_idle_devices_events_by_hand(tmp_path: Path) -> None:
    """100 boards online from 22:00 to 07:00 over two days: each online at midnight, then off at 07:00 and on at
    22:00 each day -- 100 + 4 x 100 events, whatever the rounds."""
    days = estimate_schedule(
        tiny(tmp_path, "devices[0].count=100", NIGHTS, "stop={sim_time: 2d}", "server.round.interval=1h")
    )
    assert days.idle_events == 100 + 4 * 100
    left_out = tiny(
        tmp_path,
        "devices[0].count=100",
        NIGHTS,
        "stop={sim_time: 2d}",
        "server.round.interval=1h",
        "events.idle_devices=false",
    )
    assert estimate_schedule(left_out).idle_events == 0
    per_round = estimate_schedule(
        tiny(tmp_path, "devices[0].count=100", "devices[0].availability={policy: bernoulli, p: 0.5}")
    )
    # independent rounds at p = 1/2 flip a device at a round with probability 2 p (1 - p) = 1/2; a sample of 100
    assert per_round.idle_events - 100 * per_round.rounds / 2 == pytest.approx(50, abs=25)


def test_the_estimate_of_idle_events_is_near_the_events_a_run_logs(tmp_path: Path) -> None:
    """Sessions of availability and of the owner's use on 40 boards for 6 simulated hours."""
    settings = (
        "devices[0].count=40",
        "devices[0].availability={policy: sessions, on: {exponential: {mean: 20min}}, "
        "off: {exponential: {mean: 40min}}}",
        "devices[0].usage=phone",
        "devices[0].battery={capacity: 55kJ}",
        "stop={sim_time: 6h}",
        "server.round.interval=10min",
        "eval.every=6h",
    )
    estimate = estimate_schedule(tiny(tmp_path, *settings)).idle_events
    out = tmp_path / "out"
    assert (
        run("simulate", tmp_path / "tiny.yaml", *[a for s in settings for a in ("--set", s)], "--out", out).exit_code
        == 0
    )
    kinds = pq.read_table(out / "events.parquet", columns=["kind"]).column("kind").to_pylist()
    logged = sum(kind in ("online", "offline", "use_start", "use_end") for kind in kinds)
    assert estimate == pytest.approx(logged, rel=0.2), (estimate, logged)


def test_a_world_whose_idle_events_would_fill_memory_is_refused_with_the_way_out(tmp_path: Path) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    phones = ("--set", "devices[0].count=3000000", "--set", NIGHTS, "--set", "stop={sim_time: 400d}")
    hourly = (
        "--set",
        "server.round.interval=1h",
        "--set",
        "server.round.participants=10",
        "--set",
        "eval.every=10d",
        "--set",
        "task.dataset.partition={kind: iid, samples_per_client: 1}",
    )
    assert_user_error(
        run("validate", path, *phones, *hourly, "--set", "events.idle_devices=true"),
        "events.idle_devices: about 9,600 rounds",
        "set events: {idle_devices: false} (idle devices then log nothing), or stop sooner",
    )
    assert run("validate", path, *phones, *hourly).exit_code == 0  # above 10^4 devices: not logged by default


def study(tmp_path: Path, text: str) -> Path:
    (tmp_path / "tiny.yaml").write_text(TINY)
    path = tmp_path / "study.yaml"
    path.write_text("base: tiny.yaml\n" + text)
    return path


def refuse_to_run(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("a run was started")


@pytest.mark.parametrize(
    "text, field, count",
    [
        (
            "grid:\n" + "".join(f"  devices[0].k{i}: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n" for i in range(10)),
            "grid",
            10**10,
        ),
        ("seeds: 1000000000\n", "seeds", 10**9),
    ],
)
def test_a_huge_study_is_counted_and_refused_in_bounded_memory_before_any_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, field: str, count: int
) -> None:
    monkeypatch.setattr(LocalRunner, "run", refuse_to_run)
    path = study(tmp_path, text)
    result, peak = peak_memory(lambda: run("sweep", path, "--out", tmp_path / "out"))
    assert_user_error(result, f"{field}: the study has {count:,} runs", f"refuses more than {MAX_RUNS:,}")
    assert f"--max-runs {count}" in result.stderr
    assert peak < 5 * 2**20, peak  # the file's few lines, not its runs
    assert not (tmp_path / "out").exists()


def test_max_runs_raises_the_bound(tmp_path: Path) -> None:
    path = study(tmp_path, "seeds: 3\n")
    assert_user_error(run("sweep", path, "--max-runs", "2", "--dry-run"), "seeds: the study has 3 runs")
    result = run("sweep", path, "--max-runs", "3", "--dry-run")
    assert result.exit_code == 0 and result.stdout.count("to run") == 3


def test_a_study_of_long_runs_is_refused_by_their_events_together(tmp_path: Path) -> None:
    """Two runs of 10^6 rounds (30 events each, and 4 at the start): 6e7 events, past 2 runs' allowance, within 10
    runs'."""
    path = study(tmp_path, "set: {stop.rounds: 1000000}\nseeds: 2\n")
    assert_user_error(
        run("sweep", path, "--max-runs", "2", "--dry-run"),
        "the study's 2 runs would log about 6e+07 engine events in all (up to 3e+07 for one run: study, seed 1)",
        f"refuses more than {2 * RUN_EVENTS_ALLOWANCE:.2g}",
        "--max-runs 7",  # 6e7 events and the boards' 4 onlines at the start of each run
    )
    assert run("sweep", path, "--max-runs", "10", "--dry-run").exit_code == 0


def fedscale(path: Path, clients: dict[int, tuple[float, float, float]]) -> Path:
    """A FedScale trace: client -> (active from, until, finish_time)."""
    data = {k: {"active": [a], "inactive": [b], "finish_time": f} for k, (a, b, f) in clients.items()}
    path.write_bytes(pickle.dumps(data))
    return path


def test_trace_convert_counts_its_rows_before_writing_them(tmp_path: Path) -> None:
    """Finish times 10^18 apart would be 10^18 rows (and loops): refused at once, in the memory of its input."""
    trace = fedscale(tmp_path / "t.pkl", {1: (0.0, 5e-10, 1e-9), 2: (0.0, 10.0, 1e9)})
    result, peak = peak_memory(lambda: run("trace", "convert", trace, tmp_path / "t.csv", "--allow-pickle"))
    assert_user_error(result, "the CSV would need 1e+18 rows (client 1's cycle of 1e-09 s tiled over the trace's")
    assert f"netfl writes at most {MAX_CSV_ROWS:,}" in result.stderr and "fedscale_trace" in result.stderr
    assert peak < 5 * 2**20 and not (tmp_path / "t.csv").exists()


def test_trace_convert_devices_are_what_its_help_says(tmp_path: Path) -> None:
    trace = fedscale(tmp_path / "t.pkl", {7: (0.0, 5.0, 10.0), 9: (0.0, 10.0, 20.0)})
    help_text = " ".join(run("trace", "convert", "--help").stdout.split())
    assert "write N devices, device n replaying client n mod the number of clients" in help_text
    result = run("trace", "convert", trace, tmp_path / "t.csv", "--allow-pickle", "--devices", "3")
    assert result.exit_code == 0, result.output
    assert "3 devices from the trace's 2 clients (devices 2 to 2 replay clients again" in result.stdout
    assert (tmp_path / "t.csv").read_text().splitlines()[1:] == [
        "0,0.0,5.0",
        "0,10.0,15.0",
        "1,0.0,10.0",
        "2,0.0,5.0",  # client 7 again
        "2,10.0,15.0",
    ]
    far, peak = peak_memory(
        lambda: run("trace", "convert", trace, tmp_path / "far.csv", "--allow-pickle", "--devices", "1000000000")
    )
    assert_user_error(far, "(1,000,000,000 devices replay the trace's 2 clients 5e+08 times over)")
    assert peak < 5 * 2**20 and not (tmp_path / "far.csv").exists()
