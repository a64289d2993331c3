"""The world over time (netfl/sim/timeline.py): counts by hand, both engines alike, and reading changes nothing."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from engine_support import FakeBackend, simulate
from test_lazy_engine import batteries_world, lazy, sessions_world

from netfl.sim import timeline as timeline_module
from netfl.sim.fleet import EagerFleet
from netfl.sim.fleet_readings import FleetState
from netfl.sim.lazy_fleet import LazyFleet
from netfl.sim.recorder import EventRecorder
from netfl.sim.simulation import Simulation
from netfl.sim.timeline import Timeline


def state(**flags) -> FleetState:
    """Four devices: 0-2 phones with batteries, 3 a board on mains power."""
    base = dict(
        online=[1, 1, 0, 1],
        available=[1, 0, 0, 1],
        working=[1, 0, 0, 0],
        charging=[0, 1, 0, 0],
        dead=[0, 0, 1, 0],
        below_min=[0, 1, 1, 0],
        battery=[0.8, 0.2, 0.0, math.nan],
        tasks_started=[1, 0, 0, 2],
        updates_delivered=[0, 0, 0, 2],
    )
    base.update(flags)
    return FleetState(
        **{
            k: np.asarray(
                v,
                dtype=float
                if k == "battery"
                else bool
                if k not in ("tasks_started", "updates_delivered")
                else np.int64,
            )
            for k, v in base.items()
        }
    )


def test_a_reading_cut_short_by_ctrl_c_leaves_whole_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C may strike in the middle of a reading (here in the second group's battery levels); the partial
    results are written from whole rows, every column as long as the others."""
    timeline = Timeline(np.array([0, 0, 0, 1]), ["phones", "boards"], EventRecorder())
    timeline.read(0.0, state(), start=True)
    calls = iter([False, True])
    real = timeline_module.battery_stats

    def interrupted(levels: np.ndarray) -> tuple[float, ...]:
        if next(calls):
            raise KeyboardInterrupt
        return real(levels)

    monkeypatch.setattr(timeline_module, "battery_stats", interrupted)
    with pytest.raises(KeyboardInterrupt):
        timeline.read(10.0, state())
    columns = timeline.columns()
    assert {len(values) for values in columns.values()} == {3}
    assert columns["sim_time_s"] == [0.0, 0.0, 10.0] and columns["group"] == ["phones", "boards", "phones"]


def test_a_reading_counts_each_group_and_what_happened_since_the_last_one() -> None:
    recorder = EventRecorder()
    timeline = Timeline(np.array([0, 0, 0, 1]), ["phones", "boards"], recorder)
    timeline.read(0.0, state(), start=True)  # what started at time 0 is the next reading's
    recorder.log(5.0, 0, 1, "dropout", cause="deadline")
    recorder.log(6.0, 0, 1, "dropout", cause="deadline")  # the same device twice: one device dropped
    timeline.read(10.0, state(tasks_started=[2, 1, 0, 2], updates_delivered=[1, 0, 0, 3]))
    rows = timeline.columns()
    assert rows["sim_time_s"] == [0.0, 0.0, 10.0, 10.0] and rows["group"] == ["phones", "boards"] * 2
    assert rows["devices"] == [3, 1, 3, 1]
    assert rows["online"] == [2, 1, 2, 1] and rows["available"] == [1, 1, 1, 1] and rows["working"] == [1, 0, 1, 0]
    assert rows["charging"] == [1, 0, 1, 0] and rows["battery_empty"] == [1, 0, 1, 0]
    assert rows["below_min_level"] == [2, 0, 2, 0]
    assert rows["participated"] == [0, 0, 2, 1]  # devices 0, 1 and 3 started work since the start (0 and 3 at it)
    assert rows["dropped"] == [0, 0, 1, 0] and rows["delivered"] == [0, 0, 1, 3]
    # phones' levels 0.8, 0.2, 0.0: mean 1/3, percentiles by linear interpolation; the board has no battery
    assert rows["battery_mean"][0] == pytest.approx(1 / 3) and rows["battery_min"][0] == 0.0
    assert rows["battery_p10"][0] == pytest.approx(0.04) and rows["battery_p50"][0] == pytest.approx(0.2)
    assert rows["battery_p90"][0] == pytest.approx(0.68) and rows["battery_max"][0] == 0.8
    assert all(math.isnan(rows[f"battery_{s}"][1]) for s in ("mean", "min", "p10", "p50", "p90", "max"))


def test_groups_whose_devices_are_interleaved_are_counted_alike() -> None:
    """A scenario's groups are contiguous ranges, read without copies; devices of interleaved groups (here the
    board first) are counted the same, device by device."""
    order = [3, 0, 1, 2]  # the board, then the three phones

    def shuffled(**flags) -> FleetState:
        return FleetState(**{k: np.asarray(v)[order] for k, v in vars(state(**flags)).items()})

    contiguous = Timeline(np.array([0, 0, 0, 1]), ["phones", "boards"], EventRecorder())
    interleaved = Timeline(np.array([1, 0, 0, 0]), ["phones", "boards"], EventRecorder())
    assert isinstance(contiguous.members[0], slice) and isinstance(contiguous.members[1], slice)
    for timeline, reading in ((contiguous, state), (interleaved, shuffled)):
        timeline.read(0.0, reading(), start=True)
        timeline.read(10.0, reading(tasks_started=[2, 1, 0, 2], updates_delivered=[1, 0, 0, 3]))
    a, b = contiguous.columns(), interleaved.columns()
    assert a["devices"] == [3, 1, 3, 1] and a["participated"] == [0, 0, 2, 1]
    assert a.keys() == b.keys() and all(pd.Series(a[k]).equals(pd.Series(b[k])) for k in a)
    interleaved = Timeline(np.array([0, 1, 0, 1]), ["phones", "boards"], EventRecorder())
    assert not isinstance(interleaved.members[0], slice)


def test_both_engines_read_the_same_world_where_they_draw_the_same_one() -> None:
    """Batteries drained by idle power and work, some to empty: eager and lazy readings agree row for row."""
    eager_sim, eager = simulate(batteries_world(), FakeBackend(), policy_cls=None)
    lazy_sim, lazily = lazy(batteries_world(), FakeBackend())
    a, b = eager.timeline.columns(), lazily.timeline.columns()
    assert len(a["sim_time_s"]) == 2 * (eager.rounds + 1)  # the start and every evaluation (every round), 2 groups
    for column in a:
        if column.startswith("battery_") and column != "battery_empty":
            assert np.allclose(a[column], b[column], rtol=1e-9, equal_nan=True), column
        else:
            assert a[column] == pytest.approx(b[column]), column
    assert max(a["battery_empty"]) > 0 and max(a["below_min_level"]) > 0 and sum(a["participated"]) > 0
    # the last reading, at the stop, is devices.parquet's battery levels
    phones = eager.stats.battery_fraction[:5]
    assert a["battery_mean"][-2] == pytest.approx(phones.mean()) and a["battery_min"][-2] == pytest.approx(phones.min())


@pytest.mark.parametrize("engine", ["eager", "lazy"])
def test_reading_the_timeline_changes_nothing_in_the_run(engine: str, monkeypatch) -> None:
    """The same world run with and without readings: the same events, energies, batteries and online times, to the
    bit (readings neither draw nor settle)."""

    def run():
        if engine == "lazy":
            return lazy(sessions_world(count=200, rounds=15), FakeBackend())
        return simulate(batteries_world(), FakeBackend(), policy_cls=None)

    sim, read = run()
    assert len(read.timeline.columns()["sim_time_s"]) > 10
    monkeypatch.setattr(EagerFleet, "state_at", lambda self, now: None)
    monkeypatch.setattr(LazyFleet, "state_at", lambda self, now: None)
    monkeypatch.setattr(Timeline, "read", lambda self, now, fleet, start=False: None)
    blind_sim, blind = run()
    assert not blind.timeline.columns()["sim_time_s"]
    assert sim.recorder.columns() == blind_sim.recorder.columns()
    for name in ("online_time_s", "battery_fraction", "tasks_started", "charged_j"):
        assert np.array_equal(getattr(read.stats, name), getattr(blind.stats, name), equal_nan=True), name
    for activity, joules in read.stats.energy_by_activity_j.items():
        assert np.array_equal(joules, blind.stats.energy_by_activity_j[activity]), activity
    assert isinstance(sim, Simulation)
