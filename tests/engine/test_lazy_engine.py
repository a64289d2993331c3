"""The array form of the engine (idle devices as rows) against the actor form, its refusals, and at scale.

Both forms draw one world from one seed (tests/engine/test_one_world.py checks every policy); here, the
array form's own consistency, what it refuses and what a million devices cost in memory.
"""

from __future__ import annotations

import math
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from engine_support import WORK_KINDS, FakeBackend, events, group, scenario, simulate

from netfl.assemble import build_world, population_models
from netfl.config.schema import Every
from netfl.rng import RandomStreams
from netfl.sim.fleet import EagerFleet
from netfl.sim.fleet_readings import summed
from netfl.sim.idle_rows import IdleRows
from netfl.sim.lazy_fleet import LazyFleet
from netfl.sim.simulation import Simulation


def lazy(sc, backend: FakeBackend) -> tuple[Simulation, object]:
    streams = RandomStreams(sc.seed)
    backend.participants = sc.server.round.asked
    mix = np.full((sc.num_devices, 10), 0.1)
    sim = Simulation(build_world(sc, streams, population=population_models(sc, streams, mix)), backend)
    return sim, sim.run()


def work_events(sim) -> list[tuple]:
    return [e for e in events(sim) if e.kind in WORK_KINDS]


def batteries_world(over_commit: float = 0.0):
    """Phones whose idle drain and work take some below min_level and some to empty within the run."""
    phones = group(
        "phones",
        5,
        flops=2e9,
        up=2e6,
        power={"compute": 2.0, "transmit": 0.5, "idle": 0.5},
        battery={"capacity": 60.0, "initial": {"uniform": [0.2, 1.0]}, "min_level": 0.3},
        availability={"policy": "always"},
    )
    boards = group("boards", 4, flops=0.5e9, up=1e6, availability={"policy": "always"})
    return scenario(
        [phones, boards], stop={"rounds": 12}, round={"participants": 3, "deadline": 4.0, "over_commit": over_commit}
    )


@pytest.mark.parametrize("over_commit", [0.0, 0.5])
def test_lazy_and_eager_engines_agree_where_they_draw_the_same_world(over_commit: float) -> None:
    """Also when over-commit stops stragglers (asked 5, the first 3 kept)."""
    eager_sim, eager = simulate(batteries_world(over_commit), FakeBackend(), policy_cls=None)
    lazy_sim, lazily = lazy(batteries_world(over_commit), FakeBackend())
    if over_commit:
        assert "over_commit" in eager_sim.recorder.column("cause")
    assert [(c.round_index, tuple(c.available), c.selected, c.delivered) for c in eager_sim.backend.contexts] == [
        (c.round_index, tuple(c.available), c.selected, c.delivered) for c in lazy_sim.backend.contexts
    ]
    assert work_events(eager_sim) == work_events(lazy_sim)
    assert eager.rounds == lazily.rounds and eager.sim_time_s == pytest.approx(lazily.sim_time_s, rel=1e-12)
    a, b = eager.stats, lazily.stats
    for activity in ("idle", "compute", "transmit", "receive"):
        assert a.energy_by_activity_j[activity] == pytest.approx(
            b.energy_by_activity_j[activity], rel=1e-9, abs=1e-9
        ), activity
    assert np.array_equal(a.tasks_started, b.tasks_started) and np.array_equal(a.updates_delivered, b.updates_delivered)
    assert np.allclose(a.battery_fraction, b.battery_fraction, equal_nan=True, rtol=1e-9)
    assert np.array_equal(a.battery_empty, b.battery_empty)
    assert a.online_time_s == pytest.approx(b.online_time_s, rel=1e-9)
    assert 0 < b.battery_empty.sum() < 5  # the world is interesting: some phones empty, some do not
    assert len(lazy_sim.recorder) < len(eager_sim.recorder)  # idle devices' marks are not logged


@pytest.mark.parametrize("over_commit", [0.0, 0.5])
def test_lazy_engine_keeps_no_actor_between_rounds(over_commit: float) -> None:
    sim, _ = lazy(batteries_world(over_commit), FakeBackend())
    assert sim.devices.active == {} and not sim.devices.busy.any()


def sessions_world(count: int = 400, rounds: int = 40):
    churn = {"policy": "sessions", "on": {"exponential": {"mean": "20s"}}, "off": {"exponential": {"mean": "60s"}}}
    phones = group("phones", count, flops=1e9, up=2e6, availability=churn)
    return scenario([phones], stop={"rounds": rounds}, round={"participants": 20, "deadline": 6.0})


def test_lazy_sessions_select_online_devices_and_lose_work_when_they_leave() -> None:
    sim, result = lazy(sessions_world(), FakeBackend())
    contexts = sim.backend.contexts
    # about a quarter of the devices online at each round start (20 / (20 + 60))
    assert np.mean([len(c.available) for c in contexts]) / 400 == pytest.approx(0.25, abs=0.04)
    assert all(set(c.selected) <= set(map(int, c.available)) for c in contexts)
    assert "policy:sessions" in {e.field("cause") for e in events(sim, "dropout")}  # 20 s sessions end in 5 s tasks
    online = result.stats.online_time_s / result.sim_time_s
    assert online.mean() == pytest.approx(0.25, abs=0.03)
    assert result.updates_received == sum(len(c.delivered) for c in contexts)


def test_lazy_runs_repeat_bit_for_bit() -> None:
    first, a = lazy(sessions_world(rounds=15), FakeBackend())
    second, b = lazy(sessions_world(rounds=15), FakeBackend())
    assert first.recorder.columns() == second.recorder.columns()
    assert np.array_equal(a.stats.online_time_s, b.stats.online_time_s)


def test_lazy_per_round_patterns_and_diurnal_run() -> None:
    groups = [
        group("markov", 50, availability={"policy": "markov", "p": 0.3}),
        group("cyclic", 50, availability={"policy": "cyclic", "p": 0.5, "period": "4 rounds"}),
        group("night", 50, availability={"policy": "diurnal", "mixing": "1min"}),
    ]
    sim, result = lazy(scenario(groups, stop={"rounds": 30}, round={"participants": 10}), FakeBackend())
    assert result.rounds == 30
    cyclic = [sum(50 <= c < 100 for c in map(int, ctx.available)) for ctx in sim.backend.contexts]
    assert np.mean(cyclic) == pytest.approx(25, abs=3)  # half of each 4-round cycle, all phases
    online = result.stats.online_time_s / result.sim_time_s
    assert online[50:100].mean() == pytest.approx(0.5, abs=0.1)


def test_a_hundred_thousand_lazy_devices_stay_small() -> None:
    """100 k devices with session churn: memory, not time, is what this pins (per device, well under 1 KB)."""
    sc = sessions_world(count=100_000, rounds=5)
    tracemalloc.start()
    sim, result = lazy(sc, FakeBackend())
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert result.rounds == 5 and len(sim.backend.contexts[0].available) > 10_000
    assert peak / 100_000 < 600, f"{peak / 100_000:.0f} bytes per device"
    assert math.isfinite(result.energy_j)


# ------------------------------------------------------------- from the YAML


def _problems(data: dict) -> list[tuple[str, str]]:
    from netfl.config import scenario_from_dict
    from netfl.errors import ScenarioError

    try:
        scenario_from_dict(data)
    except ScenarioError as exc:
        return exc.problems
    return []


def _lazy_dict(**changes) -> dict:
    data = {
        "name": "lazy",
        "seed": 1,
        "stop": {"rounds": 3},
        "task": {
            "dataset": {"name": "digits", "partition": {"kind": "iid", "samples_per_client": 5}},
            "model": {"name": "logistic"},
        },
        "devices": [group("phones", 3000, availability={"policy": "sessions", "on": "10min", "off": "30min"})],
        "server": {"round": {"participants": 30}},
        "engine": {"devices": "lazy"},
    }
    data.update(changes)
    return data


def test_the_array_form_refuses_what_it_cannot_keep_as_arrays_once_per_cause() -> None:
    mine = group("mine", 2, availability={"policy": "my_policies.py:Mine"})
    charged = group("charged", 2, battery={"charging": {"policy": "daily", "start": "22:00", "end": "07:00"}})
    problems = _problems(_lazy_dict(devices=[mine, charged], server={"mode": "async"}))
    by_path = {path: [m for p, m in problems if p == path] for path, _ in problems}
    assert by_path["devices[0].availability.policy"] == [  # the one true problem, not also the engine's form's
        "policy 'my_policies.py:Mine': file not found: " + str(Path.cwd() / "my_policies.py")
    ]
    assert not any(path.startswith("devices[1]") for path in by_path)  # chargers have an array form
    assert _problems(_lazy_dict()) == []


def test_a_million_asynchronous_devices_without_a_pause_are_refused_for_that_alone() -> None:
    """Every available device would pull at once; the refusal is not buried under estimates it makes moot."""
    million = [group("phones", 1_000_000, availability={"policy": "diurnal"})]
    for engine in ("lazy", "arrays", "auto"):
        problems = _problems(_lazy_dict(devices=million, server={"mode": "async"}, engine={"devices": engine}))
        assert [path for path, _ in problems] == ["server.async.pause"], (engine, problems)
        assert "pause: 1d" in problems[0][1]
    paused = {"mode": "async", "async": {"pause": "1d", "buffer": 100}}
    assert _problems(_lazy_dict(devices=million, server=paused, engine={"devices": "auto"})) == []


def test_samples_per_client_combines_only_with_sampled_kinds() -> None:
    task = _lazy_dict()["task"]
    for partition, words in (
        ({"kind": "by_label", "samples_per_client": 5}, "kind 'iid', 'dirichlet' or 'classes'"),
        (
            {"kind": "iid", "samples_per_client": 5, "exclusive": [{"clients": [0], "labels": [1]}]},
            "cannot be combined",
        ),
    ):
        data = _lazy_dict(task={**task, "dataset": {"name": "digits", "partition": partition}})
        assert any(words in msg for _, msg in _problems(data)), partition


def test_more_devices_than_samples_needs_samples_per_client(tmp_path) -> None:
    import yaml
    from click.testing import CliRunner

    from netfl.cli.main import main

    data = _lazy_dict(task={"dataset": {"name": "digits"}, "model": {"name": "logistic"}})
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(data))
    result = CliRunner().invoke(main, ["simulate", str(tmp_path / "t.yaml"), "--out", str(tmp_path / "o"), "-q"])
    assert result.exit_code == 2 and "samples_per_client" in result.output and "Traceback" not in result.output


def test_lazy_engine_from_the_cli_writes_every_device(tmp_path) -> None:
    import json

    import pyarrow.parquet as pq
    import yaml
    from click.testing import CliRunner

    from netfl.cli.main import main

    (tmp_path / "t.yaml").write_text(yaml.safe_dump(_lazy_dict()))
    result = CliRunner().invoke(main, ["simulate", str(tmp_path / "t.yaml"), "--out", str(tmp_path / "o"), "-q"])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    devices = pq.read_table(tmp_path / "o" / "devices.parquet").to_pandas()
    assert summary["complete"] and summary["rounds"] == 3 and summary["num_devices"] == len(devices) == 3000
    assert devices.tasks_started.sum() == 90 and devices.online_fraction.between(0, 1).all()
    assert summary["updates_received"] == devices.updates_delivered.sum()


# ------------------------------------------------------- energy at evaluations


def _on_a_grid(sc, seconds: float):
    return sc.model_copy(update={"eval": sc.eval.model_copy(update={"every": Every(seconds=seconds)})})


def _run(engine: str, sc):
    sim, result = simulate(sc, FakeBackend(), policy_cls=None) if engine == "eager" else lazy(sc, FakeBackend())
    stats = result.stats
    state = (
        sim.recorder.columns(),
        {a: e.tobytes() for a, e in stats.energy_by_activity_j.items()},
        stats.battery_fraction.tobytes(),
        stats.online_time_s.tobytes(),
        stats.battery_empty.tobytes(),
    )
    return state, [m.energy_j for m in result.metrics], result


@pytest.mark.parametrize("engine", ["eager", "lazy"])
def test_reading_the_energy_at_evaluations_settles_nothing(engine, monkeypatch) -> None:
    """metrics' cumulative energy is read without settling a battery: the run is the same, bit for bit, with it or
    without, evaluated every 0.7 s (in the middle of tasks, idle drains, batteries emptying)."""
    sc = _on_a_grid(batteries_world(), 0.7)
    state, energy, result = _run(engine, sc)
    for fleet in (EagerFleet, LazyFleet):
        monkeypatch.setattr(fleet, "energy_spent_at", lambda self, now: (math.nan, math.nan))
    unread, nothing, _ = _run(engine, sc)
    assert state == unread and all(math.isnan(e) for e in nothing)
    assert energy == sorted(energy) and energy[-1] == result.energy_j  # the last evaluation is at the stop
    work = [m.work_energy_j for m in result.metrics]
    assert work == sorted(work) and work[-1] == result.work_energy_j
    assert result.work_energy_j == pytest.approx(result.energy_j - result.stats.energy_by_activity_j["idle"].sum())


def test_lazy_and_eager_engines_agree_on_the_energy_at_every_evaluation() -> None:
    sc = _on_a_grid(batteries_world(), 0.7)
    (_, eager, _), (_, lazily, _) = _run("eager", sc), _run("lazy", sc)
    assert len(eager) > 50 and eager == pytest.approx(lazily, rel=1e-12)


def test_the_rows_taken_a_few_at_a_time_give_the_same_run(monkeypatch) -> None:
    """Whole-fleet work (starting the rows, the energy and the timeline at evaluations, the totals at the end) goes
    a bounded step of rows at a time; steps of two rows give the run of one step, to the bit."""
    sc = _on_a_grid(batteries_world(), 0.7)
    whole, whole_energy, whole_result = _run("lazy", sc)
    monkeypatch.setattr(IdleRows, "ROWS_PER_STEP", 2)
    stepped, stepped_energy, stepped_result = _run("lazy", sc)
    assert whole == stepped and whole_energy == stepped_energy and len(whole_energy) > 50
    assert whole_result.timeline.columns() == stepped_result.timeline.columns()
    work = [(m.work_energy_j, m.energy_j) for m in whole_result.metrics]
    assert work == [(m.work_energy_j, m.energy_j) for m in stepped_result.metrics]
    for name in ("tasks_started", "updates_delivered", "charged_j"):
        assert getattr(whole_result.stats, name).tobytes() == getattr(stepped_result.stats, name).tobytes(), name


def test_the_totals_are_made_once_at_the_end() -> None:
    """The idle rows' accounts become the totals in place, so asking again gives the same totals, not twice the
    working devices' energy."""
    sim, result = lazy(batteries_world(), FakeBackend())
    again = sim.devices.stats()
    assert again is result.stats and result.stats.energy_by_activity_j["compute"].sum() > 0


def test_summed_adds_as_sum_does_to_the_bit() -> None:
    rng = np.random.default_rng(2)
    arrays = [rng.random(1000) * 10.0 ** rng.integers(-8, 8, 1000) for _ in range(5)]
    assert summed(arrays, 1000).tobytes() == sum(arrays, np.zeros(1000)).tobytes()
    assert summed([], 3).tolist() == [0.0, 0.0, 0.0]


@pytest.mark.slow
def test_a_million_phones_with_chargers_and_their_owners_use_stay_small() -> None:
    """10^6 devices held as rows with nightly chargers and the owners' use: memory, not time, is what this pins."""
    battery = {
        "capacity": "55kJ",
        "initial": {"uniform": [0.3, 1.0]},
        "min_level": "20%",
        "charging": {"policy": "daily", "start": "22:00", "end": "07:00", "jitter": "1h"},
    }
    phones = group("phones", 1_000_000, flops=1e9, up=2e6, battery=battery, availability={"policy": "diurnal"})
    phones["usage"] = "phone"
    sc = scenario([phones], stop={"rounds": 3}, round={"participants": 100, "interval": 3600.0})
    tracemalloc.start()
    sim, result = lazy(sc, FakeBackend())
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert result.rounds == 3 and len(sim.backend.contexts[-1].available) > 10_000
    assert result.stats.energy_by_activity_j["use"].sum() > 0 and result.stats.charged_j.sum() >= 0
    # 280 B measured (326 before the whole-fleet work went a bounded step of rows at a time, 592 in the first
    # array form): the device table (24 B: only the drawn quantities are per device), idle rows (86), three
    # population models (~75), the label mix this test passes (80; a run computes it only if a policy reads it)
    # and, at the peak, the idle rows' advance to an evaluation
    assert peak / 1_000_000 < 310, f"{peak / 1_000_000:.0f} bytes per device"
