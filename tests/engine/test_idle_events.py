"""Idle devices' events in the array form (netfl/sim/idle_events.py): the actor form's events, from one seed.

The actor form logs an idle device's changes as its processes have them; the array form takes them when the
engine asks and logs them from its rows. Both hold the same events -- kind, device, time, round, cause, level --
for every built-in policy, chargers, the owner's use, traces and a user's population policy. Times and levels
agree to the last bits: an actor wakes at ``now + (at - now)`` (SimPy's sum, which may round ``at`` by an ulp),
and its battery is settled at more instants (where it reaches min_level on the way down, and when a device's
actor is folded back), so its sums round otherwise.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from engine_support import WORK_KINDS, events, group, scenario
from test_idle_rows import Windows, phone
from test_one_world import CHARGERS, POLICIES, USE, csv_trace, fedscale_trace, user_policy, world
from test_one_world import run as one_world_run

from netfl.policies.population import AlwaysModel
from netfl.registry.device_params import UsageSpec
from netfl.results.events_file import events_frame
from netfl.sim.idle_events import KINDS, IdleEvents
from netfl.sim.idle_rows import GroupRows, IdleRows, UsageSetup
from netfl.sim.recorder import EventRecorder


def run(sc, form: str, idle_events: bool = True):
    """tests/engine/test_one_world.py's run, the array form logging idle devices' events unless told not to."""
    return one_world_run(sc, form, idle_events)


def idle(sim) -> list:
    return sorted((e for e in events(sim) if e.kind in KINDS), key=lambda e: (e.time, e.device, e.kind))


def assert_same_idle_events(sc) -> list:
    """Both forms' idle devices' events, compared row by row; the actor form's."""
    actors, _ = run(sc, "actors")
    arrays, _ = run(sc, "arrays")
    mine, theirs = idle(actors), idle(arrays)
    assert len(mine) == len(theirs)
    for x, y in zip(mine, theirs):
        assert (x.device, x.kind, x.round, x.detail, x.values.keys()) == (
            y.device,
            y.kind,
            y.round,
            y.detail,
            y.values.keys(),
        ), (x, y)
        assert x.time == pytest.approx(y.time, rel=1e-12), (x, y)
        assert x.values.get("cause") == y.values.get("cause")
        if "level" in x.values:
            assert x.values["level"] == pytest.approx(y.values["level"], rel=1e-12, abs=1e-12), (x, y)
    return mine


#: A day of phones: their availability, a nightly charger, their owners' use (the phone preset), batteries that
#: empty, fall below min_level and fill up.
NIGHTS = {"policy": "daily", "start": "22:00", "end": "07:00", "jitter": "1h"}
DAY_POLICIES = {
    "diurnal": {"policy": "diurnal", "mixing": "20min"},
    "sessions": {"policy": "sessions", "on": {"exponential": {"mean": "1h"}}, "off": {"exponential": {"mean": "2h"}}},
    "daily": {"policy": "daily", "start": "08:00", "end": "20:00", "jitter": "1h"},
    "always": {"policy": "always"},
}


def day(policy: dict, count: int = 30):
    battery = {
        "capacity": "20kJ",
        "initial": {"uniform": [0.05, 0.6]},
        "min_level": "30%",
        "charging": NIGHTS,
        "charge_power": 1.0,
    }
    phones = group("phones", count, flops=2e9, up=2e6, power={"idle": 0.1}, battery=battery, availability=policy)
    phones["usage"] = "phone"
    boards = group("boards", 3, flops=0.5e9, up=1e6, availability=policy)
    return scenario(
        [phones, boards],
        stop={"sim_time": 86_400.0},
        round={"participants": 4, "deadline": 60.0, "interval": 1200.0},
    )


@pytest.mark.parametrize("name", list(DAY_POLICIES))
def test_a_day_of_phones_logs_the_same_idle_events_in_both_forms(name: str) -> None:
    logged = assert_same_idle_events(day(DAY_POLICIES[name]))
    kinds = {e.kind for e in logged}
    assert {"charge_start", "charge_stop", "use_start", "use_end", "below_min_level", "above_min_level"} <= kinds
    assert "battery_full" in kinds or name == "always"  # a charger of 1 W fills some batteries by morning
    assert name == "always" or {"online", "offline"} <= kinds


@pytest.mark.parametrize("charger", list(CHARGERS))
@pytest.mark.parametrize("name", ["sessions", "daily", "diurnal", "always", "markov", "eligible on the charger"])
def test_chargers_that_empty_and_revive_phones_log_alike(name: str, charger: str) -> None:
    """Chargers out-drawn by the owner's use, phones that empty and power on again on the charger."""
    policy = POLICIES[name] if name in POLICIES else {**POLICIES["eligible"], "charging": True}
    logged = assert_same_idle_events(world(policy, count=40, rounds=40, charging=CHARGERS[charger], usage=USE))
    kinds = {e.kind for e in logged}
    assert {"battery_empty", "power_on", "charge_start", "charge_stop", "use_start", "below_min_level"} <= kinds
    offline = {e.values["cause"] for e in logged if e.kind == "offline"}
    assert "battery_empty" in offline or name == "eligible on the charger"  # online only while plugged in there


FILES = {
    "trace_csv": csv_trace,
    "fedscale_trace": fedscale_trace,
    "population policy": user_policy("Flicker"),
    "population policy per round": user_policy("Runs"),
}


LABELS = {
    "trace_csv": "trace_csv",
    "fedscale_trace": "fedscale_trace",
    "population policy": "population.py:Flicker",
    "population policy per round": "population.py:Runs",
    "bernoulli": "bernoulli",
    "cyclic": "cyclic",
    "eligible": "eligible",
}


@pytest.mark.parametrize("name", list(LABELS))
def test_traces_and_users_policies_log_alike(name: str, tmp_path: Path) -> None:
    logged = assert_same_idle_events(world(FILES[name](tmp_path) if name in FILES else POLICIES[name]))
    causes = {e.values["cause"] for e in logged if e.kind in ("online", "offline")}
    assert f"policy:{LABELS[name]}" in causes


@pytest.mark.parametrize("pause", ["0s", "5s"])
@pytest.mark.parametrize("name", ["sessions", "eligible on the charger"])
def test_asynchronous_arrivals_log_alike(name: str, pause: str) -> None:
    """Workers that pull whenever they are available: a device waiting for its battery pulls at the instant it
    reaches min_level, handed to an actor at exactly that level (which is not below it); waiting devices are
    taken through their changes ahead of the clock (netfl/sim/workers.py), their events put in time order."""
    policy = POLICIES[name] if name in POLICIES else {**POLICIES["eligible"], "charging": True}
    sc = world(policy, count=30, charging=CHARGERS["sessions"], usage={**USE, "train_while_in_use": False})
    server = {"mode": "async", "async": {"buffer": 4, "pause": pause, "local_steps": {"uniform": [1, 4]}}}
    sc = sc.model_copy(
        update={
            "server": type(sc.server).model_validate(server),
            "stop": type(sc.stop).model_validate({"sim_time": 150.0}),
        }
    )
    logged = assert_same_idle_events(sc)
    assert {"above_min_level", "below_min_level", "charge_start"} <= {e.kind for e in logged}


def test_logging_idle_events_changes_nothing_else() -> None:
    """The same world with and without the idle devices' events: the same rounds, work and accounts, to the bit."""
    sc = world(POLICIES["sessions"], count=40, rounds=40, charging=CHARGERS["daily"], usage=USE)
    off_sim, off = run(sc, "arrays", idle_events=False)
    on_sim, on = run(sc, "arrays")
    work = [(e.time, e.round, e.device, e.kind, e.values) for e in events(off_sim) if e.kind in WORK_KINDS]
    assert work == [(e.time, e.round, e.device, e.kind, e.values) for e in events(on_sim) if e.kind in WORK_KINDS]
    assert len(on.recorder) > len(off.recorder)
    for name in ("online_time_s", "charged_j", "battery_fraction", "battery_empty", "tasks_started"):
        assert np.array_equal(getattr(off.stats, name), getattr(on.stats, name), equal_nan=True), name
    for activity, joules in off.stats.energy_by_activity_j.items():
        assert np.array_equal(joules, on.stats.energy_by_activity_j[activity]), activity
    assert [m.energy_j for m in off.metrics] == [m.energy_j for m in on.metrics]


def test_the_log_is_in_time_order_whatever_the_step(monkeypatch) -> None:
    """The array form takes changes in bounded steps of devices and whenever the engine asks; the log it writes
    is in time order, the same whatever the step, and a per-round availability's answers at a round's start come
    before that round's start, in its round, as the actor form logs them."""
    sc = world(POLICIES["markov"], count=40, rounds=30, charging=CHARGERS["daily"], usage=USE)
    whole_sim, _ = run(sc, "arrays")
    monkeypatch.setattr(IdleRows, "ROWS_PER_STEP", 3)
    stepped_sim, _ = run(sc, "arrays")
    frame = events_frame(whole_sim.recorder.columns())
    assert frame.equals(events_frame(stepped_sim.recorder.columns()))
    assert frame["sim_time_s"].is_monotonic_increasing
    flips = frame["kind"].isin(["online", "offline"])
    answered = 0
    for row in frame.index[frame["kind"] == "round_start"]:
        start = frame.loc[row]
        at = frame.index[flips & (frame["sim_time_s"] == start["sim_time_s"])]
        assert (at < row).all() and (frame.loc[at, "round"] == start["round"]).all()
        answered += len(at)
    assert answered > 20


@pytest.mark.parametrize("name", ["bernoulli", "markov", "cyclic"])
def test_a_per_round_world_without_battery_marks_logs_the_actor_forms_very_log(name: str) -> None:
    """Per-round availability answered at each round's start, logged then, by device, before the round's start;
    no battery reaches a mark (their times are the battery's sums, rounded otherwise by the actors): the whole log
    is the actor form's, row for row."""
    battery = {"capacity": 400.0, "initial": {"uniform": [0.6, 1.0]}, "min_level": 0.1}
    phones = group("phones", 30, flops=2e9, up=2e6, power={"idle": 0.3}, battery=battery, availability=POLICIES[name])
    boards = group("boards", 5, flops=0.5e9, up=1e6, availability=POLICIES[name])
    sc = scenario([phones, boards], stop={"rounds": 25}, round={"participants": 6, "deadline": 5.0})
    actors, _ = run(sc, "actors")
    arrays, _ = run(sc, "arrays")
    frame = events_frame(actors.recorder.columns())
    assert frame["kind"].isin(["online", "offline"]).sum() > 100
    assert frame.equals(events_frame(arrays.recorder.columns()))


# ----------------------------------------------------------------- by hand


def day_phone(events: IdleEvents, initial_j: float = 50.0, charger: tuple[float, ...] = (10.0, 45.0, 200.0, 260.0)):
    """The phone of tests/engine/test_idle_rows.py with its charger over [10, 45) and [200, 260)."""
    table = phone().table
    table.initial_j[:] = initial_j
    always = AlwaysModel(None, 1, 0, np.ones((1, 1)), 0)
    always.policy = "always"
    usage = UsageSetup(Windows(50.0, 60.0), UsageSpec(sessions={"policy": "windows"}, power=2.0))
    return IdleRows(table, [GroupRows(always, Windows(*charger), usage)], events)


def logged(events: IdleEvents, clock: list[tuple] = (), round_ends: list[float] = ()) -> list[tuple]:
    """The log, clock rows (time, round, kind) of the server and the idle events merged."""
    recorder = EventRecorder()
    for t, r, kind in clock:
        recorder.log(t, r, -1, kind)
    events.into(recorder, round_ends)
    columns = zip(recorder.times, recorder.rounds, recorder.devices, recorder.kinds)
    return [(*row, recorder.column("cause")[i], recorder.column("level")[i]) for i, row in enumerate(columns)]


def test_an_idle_phones_day_in_events() -> None:
    """100 J holding 50 J, 1 W idle, min_level 20 J, a 3 W charger over [10, 45) and [200, 260), its owner's use
    over [50, 60) at 2 W, always available:

        0     online (policy:always)
        10    charge_start at 40 %        net 2 W in: 40 -> 100 J, full at 40
        40    battery_full
        45    charge_stop at 100 %
        50    use_start; 60 use_end       95 -> 65 J at 3 W
        105   below_min_level (20 %)      65 J at 1 W: 20 J at 105
        125   battery_empty; offline (battery_empty)
        200   charge_start at 0 %; power_on (charging): 3 W out-supply 1 W; online (policy:always)
        210   above_min_level (20 %)      0 -> 20 J at 2 W
        250   battery_full
        260   charge_stop at 100 %

    The server's round went up at 30 and at 125: an event at 125 is in the round that ended then, before the
    round that starts then."""
    events = IdleEvents()
    rows = day_phone(events)
    for t in (7.0, 55.0, 101.0, 230.0, 300.0):  # taken in pieces and read along the way: the same events
        rows.advance(t)
        rows.energy_at(t)
        rows.eligible(t)
    rows.settle(np.array([0]), 300.0)
    assert logged(events, [(0.0, 0, "round_start"), (125.0, 2, "round_start")], [30.0, 125.0]) == [
        (0.0, 0, 0, "online", "policy:always", None),
        (0.0, 0, -1, "round_start", None, None),
        (10.0, 0, 0, "charge_start", None, 0.4),
        (40.0, 1, 0, "battery_full", None, None),
        (45.0, 1, 0, "charge_stop", None, 1.0),
        (50.0, 1, 0, "use_start", None, None),
        (60.0, 1, 0, "use_end", None, None),
        (105.0, 1, 0, "below_min_level", None, 0.2),
        (125.0, 1, 0, "battery_empty", None, None),
        (125.0, 1, 0, "offline", "battery_empty", None),
        (125.0, 2, -1, "round_start", None, None),
        (200.0, 2, 0, "charge_start", None, 0.0),
        (200.0, 2, 0, "power_on", "charging", None),
        (200.0, 2, 0, "online", "policy:always", None),
        (210.0, 2, 0, "above_min_level", None, 0.2),
        (250.0, 2, 0, "battery_full", None, None),
        (260.0, 2, 0, "charge_stop", None, 1.0),
    ]


def test_a_phone_empty_at_the_start() -> None:
    """Time 0 as the actor logs it: below min_level with its level, empty; plugged in at once (3 W out-supply the
    1 W idle draw: it powers on), then online."""
    events = IdleEvents()
    day_phone(events, initial_j=0.0, charger=(0.0, 5.0)).advance(0.0)
    assert logged(events) == [
        (0.0, 0, 0, "below_min_level", None, 0.0),
        (0.0, 0, 0, "battery_empty", None, None),
        (0.0, 0, 0, "charge_start", None, 0.0),
        (0.0, 0, 0, "power_on", "charging", None),
        (0.0, 0, 0, "online", "policy:always", None),
    ]


def test_no_events_no_cost() -> None:
    """Without a place for them, the rows log nothing and keep no state for it."""
    rows = day_phone(None)
    rows.advance(300.0)
    assert rows.events is None and rows.below is None


def test_rows_logged_late_go_before_the_instants_own_with_their_columns() -> None:
    recorder = EventRecorder()
    recorder.log(1.0, 0, -1, "round_start", available=3)
    recorder.log(2.0, 0, 4, "selected", job=7)
    recorder.log(2.0, 0, 4, "dropout", job=7, cause="deadline")
    recorder.log(5.0, 1, -1, "aggregate", "late", received=0)
    recorder.merge(
        np.array([0.5, 2.0, 6.0]),
        np.array([0, 0, 1]),
        np.array([3, 9, 3]),
        np.array(["online", "offline", "charge_start"], dtype=object),
        {
            "cause": (np.array([0, 1]), np.array(["policy:a", "policy:b"], dtype=object)),
            "level": (np.array([2]), np.array([0.25])),
        },
    )
    assert recorder.times == [0.5, 1.0, 2.0, 2.0, 2.0, 5.0, 6.0]
    assert recorder.kinds == ["online", "round_start", "offline", "selected", "dropout", "aggregate", "charge_start"]
    assert recorder.devices == [3, -1, 9, 4, 4, -1, 3]
    assert recorder.details == ["", "", "", "", "", "late", ""]
    assert recorder.column("cause") == ["policy:a", None, "policy:b", None, "deadline", None, None]
    assert recorder.column("job") == [None, None, None, 7, 7, None, None]
    assert recorder.column("level") == [None] * 6 + [0.25]
    assert recorder.column("available") == [None, 3, None, None, None, None, None]
    assert list(recorder.fields["cause"].rows) == sorted(recorder.fields["cause"].rows)
