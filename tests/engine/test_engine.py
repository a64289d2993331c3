"""The SimPy engine on its own: timing, batteries, selection, deadlines, stop rules.

The learner is replaced by a fake :class:`~netfl.backend.TrainingBackend`
with a fixed model size and job cost that records what the engine asked of
it, so every simulated instant below is computed by hand from the physics
(bytes / rate + latency, FLOPs / speed, joules / watts). No torch.
"""

from __future__ import annotations

import math

import pytest
from engine_support import AlwaysRound, FakeBackend, NeverRound, approx, by_job, events, group, scenario, simulate

from netfl.config import scenario_from_dict
from netfl.events import AGGREGATION_EVENTS, JOB_EVENTS
from netfl.sim.battery import Battery
from netfl.sim.recorder import SERVER

B = 250_000  # model bytes
W = 2.5e9  # FLOPs per job
UP, DOWN, LAT = 1e6, 4e6, 0.05  # bit/s, bit/s, s
FAST, SLOW = 2e9, 5e8  # FLOP/s


def task_duration(speed: float) -> float:
    return (LAT + 8 * B / DOWN) + W / speed + (8 * B / UP + LAT)


# ------------------------------------------------------------------- timing


def test_task_phases_take_bytes_over_rate_plus_latency_and_flops_over_speed() -> None:
    sc = scenario(
        [
            group("a", 2, flops=FAST, up=UP, down=DOWN, latency=LAT),
            group("b", 1, flops=SLOW, up=UP, down=DOWN, latency=LAT),
        ]
    )
    backend = FakeBackend(B, W)
    sim, result = simulate(sc, backend)

    assert len(backend.submitted) == 9  # 3 devices x 3 rounds
    down_start, down_end = by_job(sim, "download_start"), by_job(sim, "download_end")
    train_start, train_end = by_job(sim, "train_start"), by_job(sim, "train_end")
    up_start, up_end = by_job(sim, "upload_start"), by_job(sim, "upload_end")
    for job, client, _ in backend.submitted:
        speed = SLOW if client == 2 else FAST
        assert down_end[job] - down_start[job] == approx(8 * B / DOWN + LAT)
        assert train_end[job] - train_start[job] == approx(W / speed)
        assert up_end[job] - up_start[job] == approx(8 * B / UP)  # the last bit left; LAT later it arrives
        # the phases follow each other without gaps
        assert train_start[job] == down_end[job]
        assert up_start[job] == train_end[job]


def test_round_aggregates_when_the_slowest_participant_finishes() -> None:
    sc = scenario(
        [
            group("a", 2, flops=FAST, up=UP, down=DOWN, latency=LAT),
            group("b", 1, flops=SLOW, up=UP, down=DOWN, latency=LAT),
        ]
    )
    backend = FakeBackend(B, W)
    sim, result = simulate(sc, backend)

    slowest = task_duration(SLOW)  # 0.05 + 0.5 + 5 + 2 + 0.05 = 7.6 s
    assert slowest == approx(7.6)
    aggregates = events(sim, "aggregate")
    starts = events(sim, "round_start")
    assert [e.time for e in aggregates] == [approx(slowest * (r + 1)) for r in range(3)]
    up_end = by_job(sim, "upload_end")
    for r, (start, agg) in enumerate(zip(starts, aggregates)):
        jobs = [job for job, _, rnd in backend.submitted if rnd == r]
        assert agg.time == approx(max(up_end[j] for j in jobs) + LAT)
        assert agg.time - start.time == approx(slowest)
        assert agg.round == r
    assert result.sim_time_s == approx(3 * slowest)
    assert [c.sim_time_s for c in backend.contexts] == [e.time for e in aggregates]
    assert result.updates_received == 9 and result.updates_dropped == 0
    assert backend.cancelled == []


def test_deadline_aggregates_at_the_deadline_and_drops_the_stragglers() -> None:
    deadline = 5.0  # fast devices need 3.85 s, the slow one 7.6 s
    power = {"compute": 2.0, "transmit": 0.0, "idle": 0.0}
    sc = scenario(
        [
            group("a", 2, flops=FAST, up=UP, down=DOWN, latency=LAT, power=power),
            group("b", 1, flops=SLOW, up=UP, down=DOWN, latency=LAT, power=power),
        ],
        round={"deadline": deadline},
    )
    backend = FakeBackend(B, W)
    sim, result = simulate(sc, backend)

    assert task_duration(FAST) == approx(3.85)
    assert [e.time for e in events(sim, "aggregate")] == [approx(deadline * (r + 1)) for r in range(3)]
    assert [e.time for e in events(sim, "round_start")] == [approx(deadline * r) for r in range(3)]

    slow_jobs = [job for job, client, _ in backend.submitted if client == 2]
    fast_jobs = [job for job, client, _ in backend.submitted if client != 2]
    drops = events(sim, "dropout")
    assert [e.job for e in drops] == slow_jobs
    assert all(e.field("cause") == "deadline" and e.device == 2 for e in drops)
    assert [e.time for e in drops] == [approx(deadline * (r + 1)) for r in range(3)]
    assert sorted(backend.cancelled) == slow_jobs
    assert sorted(j for c in backend.contexts for j in c.delivered) == fast_jobs
    for c in backend.contexts:
        assert c.selected == (0, 1, 2)
    assert result.updates_dropped == 3
    assert result.updates_received == result.updates_applied == 6
    # no slow job ever reached train_end: its work stopped at the deadline...
    assert not set(slow_jobs) & set(by_job(sim, "train_end"))
    # ...and so did its compute load: 3 rounds x (5 - 0.55) s x 2 W
    slow = result.devices[2]
    assert slow.battery.energy_j["compute"] == approx(3 * (deadline - (LAT + 8 * B / DOWN)) * 2.0)
    assert slow.updates_delivered == 0 and slow.tasks_started == 3


# ------------------------------------------------------------------ battery


def test_battery_drain_over_a_known_schedule() -> None:
    b = Battery(capacity_j=100.0)
    b.set_load(0.0, "idle", 0.5)
    b.set_load(4.0, "compute", 2.0)  # 0.5 W for 4 s: 2 J
    b.set_load(10.0, "compute", 0.0)  # 2.5 W for 6 s: 15 J
    b.set_load(10.0, "transmit", 1.0)
    b.set_load(12.0, "transmit", 0.0)  # 1.5 W for 2 s: 3 J
    b.settle(20.0)  # 0.5 W for 8 s: 4 J
    assert b.energy_j == {"idle": approx(10.0), "compute": approx(12.0), "transmit": approx(2.0)}
    assert b.total_energy_j == approx(24.0)
    assert b.level_j == approx(76.0)
    assert b.fraction(20.0) == approx(0.76)
    assert b.time_to_empty(20.0) == approx(76.0 / 0.5)
    b.set_load(20.0, "compute", 3.5)
    assert b.time_to_empty(20.0) == approx(76.0 / 4.0)
    b.settle(1000.0)  # far past empty: the level stops at zero
    assert b.level_j == 0.0
    with pytest.raises(ValueError):
        b.settle(999.0)


def test_mains_never_empties_but_energy_is_counted() -> None:
    b = Battery.on_mains()
    assert b.mains
    b.set_load(0.0, "idle", 1.5)
    b.settle(10.0)
    assert b.energy_j["idle"] == approx(15.0)
    assert math.isinf(b.level_j) and math.isinf(b.time_to_empty(10.0))
    assert b.fraction(10.0) == 1.0


def test_a_battery_without_load_never_empties() -> None:
    assert Battery(100.0, 0.0).time_to_empty(0.0) == math.inf


def test_device_whose_battery_cannot_last_a_job_drops_out_when_empty() -> None:
    # Device 0: 10 J left, 1 W idle, 3 W computing, no radio power, no latency.
    # Download: 8 * 125000 B / 1 Mbit/s = 1 s idle (1 J), then a 10 s job at 4 W:
    # empty 9 J / 4 W = 2.25 s after the job starts, at t = 3.25 s.
    power = {"compute": 3.0, "transmit": 0.0, "idle": 1.0}
    sc = scenario(
        [
            group("weak", 1, flops=1e9, up=1e6, power=power, battery={"capacity": 100.0, "initial": 0.1}),
            group("mains", 1, flops=1e9, up=1e6, power=power),
        ],
        stop={"rounds": 3},
    )
    backend = FakeBackend(model_bytes=125_000, flops=1e10)
    sim, result = simulate(sc, backend)

    level_at_start = 10.0 - 1.0 * 1.0
    empty_at = 1.0 + level_at_start / (1.0 + 3.0)
    assert empty_at == 3.25
    (train_start,) = events(sim, "train_start", device=0)
    assert train_start.time == approx(1.0)
    (empty,) = events(sim, "battery_empty")
    assert empty.device == 0 and empty.time == approx(empty_at)
    assert empty.time - train_start.time == approx(level_at_start / (1.0 + 3.0))
    (drop,) = events(sim, "dropout")
    assert drop.device == 0 and drop.time == approx(empty_at)
    assert drop.field("cause") == "battery_empty" and drop.job == 0
    assert backend.client_of(0) == 0
    assert backend.cancelled == [0]
    assert result.updates_dropped == 1

    # never selected (nor even available) again
    assert len(events(sim, "selected", device=0)) == 1
    assert all(0 not in c.available for c in backend.contexts[1:])
    assert [c.selected for c in backend.contexts] == [(0, 1), (1,), (1,)]
    weak = result.devices[0]
    assert weak.dead and weak.battery.level_j == 0.0
    assert weak.battery.energy_j["idle"] == approx(1.0 * empty_at)
    assert weak.battery.energy_j["compute"] == approx(3.0 * (empty_at - 1.0))
    assert weak.battery.total_energy_j == approx(10.0)  # everything it had, nothing more


def test_device_below_min_level_is_not_eligible() -> None:
    power = {"compute": 2.0, "transmit": 0.0, "idle": 0.0}
    sc = scenario(
        [
            group("low", 1, power=power, battery={"capacity": 100.0, "initial": 0.1, "min_level": 0.2}),
            group("high", 1, power=power, battery={"capacity": 100.0, "initial": 1.0, "min_level": 0.2}),
        ]
    )
    backend = FakeBackend(model_bytes=1000, flops=1e9)
    sim, result = simulate(sc, backend)

    assert [c.available for c in backend.contexts] == [(1,), (1,), (1,)]
    assert [c.selected for c in backend.contexts] == [(1,), (1,), (1,)]
    assert events(sim, "selected", device=0) == []
    (below,) = events(sim, "below_min_level")  # logged once, when it is first seen
    assert below.device == 0 and below.time == 0.0


def test_device_that_drains_below_min_level_drops_out_of_selection() -> None:
    # 50 J of 100, min level 30 %: one 1 s job at 25 W leaves 25 J = 25 % < 30 %.
    power = {"compute": 25.0, "transmit": 0.0, "idle": 0.0}
    sc = scenario(
        [group("d", 1, flops=1e9, up=1e6, power=power, battery={"capacity": 100.0, "initial": 0.5, "min_level": 0.3})],
        round={"idle_wait": 4.0},
    )
    backend = FakeBackend(model_bytes=125_000, flops=1e9)  # 1 s down, 1 s train, 1 s up
    sim, result = simulate(sc, backend)

    assert [c.selected for c in backend.contexts] == [(0,), (), ()]
    (below,) = events(sim, "below_min_level")
    # logged at the exact crossing, mid-training: 50 J - 25 W x 0.8 s = 30 J (1 s download + 0.8 s)
    assert below.time == approx(1.8) and below.round == 0
    assert result.devices[0].battery.level_j == approx(25.0)
    assert [e.time for e in events(sim, "aggregate")] == [approx(3.0), approx(7.0), approx(11.0)]


def test_energy_by_activity_matches_the_schedule() -> None:
    # Each job: download 0.5 s at 0.5 x 0.2 W receive, train W/S = 1.25 s at 2 W,
    # upload 2 s at 0.2 W; idle 0.05 W all the time; two rounds of one job.
    power = {"compute": 2.0, "transmit": 0.2, "idle": 0.05}
    sc = scenario(
        [
            group(
                "d",
                1,
                flops=FAST,
                up=UP,
                down=DOWN,
                latency=LAT,
                power=power,
                battery={"capacity": 1000.0, "initial": 1.0},
            )
        ],
        stop={"rounds": 2},
    )
    backend = FakeBackend(B, W)
    sim, result = simulate(sc, backend)

    end = 2 * task_duration(FAST)
    assert result.sim_time_s == approx(end)
    battery = result.devices[0].battery
    expected = {
        "idle": 0.05 * end,
        "compute": 2 * 2.0 * W / FAST,
        "transmit": 2 * 0.2 * 8 * B / UP,
        "receive": 2 * 0.1 * 8 * B / DOWN,
    }
    assert battery.energy_j == {k: approx(v) for k, v in expected.items()}
    assert sum(battery.energy_j.values()) == approx(battery.total_energy_j)
    assert battery.total_energy_j == approx(sum(expected.values()))
    assert 1000.0 - battery.level_j == approx(battery.total_energy_j)
    assert result.energy_j == approx(battery.total_energy_j)


# ---------------------------------------------------------------- selection


@pytest.mark.parametrize("participants,n", [(3, 5), (5, 5), (7, 5), (None, 4)])
def test_exactly_min_k_n_selected(participants: int | None, n: int) -> None:
    rnd = {} if participants is None else {"participants": participants}
    sc = scenario([group("d", n, flops=1e9, up=1e7)], round=rnd, stop={"rounds": 20})
    backend = FakeBackend(model_bytes=1000, flops=1e6)
    sim, result = simulate(sc, backend)

    want = n if participants is None else min(participants, n)
    assert len(backend.contexts) == 20
    for r, c in enumerate(backend.contexts):
        assert len(c.available) == n
        assert len(c.selected) == want == len(set(c.selected))
        assert set(c.selected) <= set(c.available)
        assert sorted(e.device for e in events(sim, "selected") if e.round == r) == sorted(c.selected)
    assert result.updates_received == 20 * want
    if want < n:  # uniform choice: over 20 rounds every device gets picked at some point
        assert {d for c in backend.contexts for d in c.selected} == set(range(n))


def test_bernoulli_availability_fraction() -> None:
    p, n, rounds, k = 0.3, 10, 400, 2
    sc = scenario(
        [group("d", n, flops=1e9, up=1e7, availability={"policy": "bernoulli", "p": p})],
        round={"participants": k, "idle_wait": 1.0},
        stop={"rounds": rounds},
    )
    backend = FakeBackend(model_bytes=1000, flops=1e6)
    sim, result = simulate(sc, backend, policy_cls=None)

    assert len(backend.contexts) == rounds
    available = sum(len(c.available) for c in backend.contexts)
    trials = n * rounds
    sigma = math.sqrt(p * (1 - p) / trials)
    assert abs(available / trials - p) < 4 * sigma
    for c in backend.contexts:
        assert len(c.selected) == min(k, len(c.available))
    # and per device, with the looser per-device bound
    sigma_one = math.sqrt(p * (1 - p) / rounds)
    for d in range(n):
        frac = sum(d in c.available for c in backend.contexts) / rounds
        assert abs(frac - p) < 4.5 * sigma_one


# ------------------------------------------------------------ stop, idle wait


def test_stop_after_rounds() -> None:
    sc = scenario([group("d", 1, flops=FAST, up=UP, down=DOWN, latency=LAT)], stop={"rounds": 4})
    backend = FakeBackend(B, W)
    sim, result = simulate(sc, backend)
    assert result.stopped_by == "rounds"
    assert result.rounds == 4 and len(backend.contexts) == 4 and len(events(sim, "aggregate")) == 4
    assert result.sim_time_s == approx(4 * task_duration(FAST))
    assert result.metrics[0].round == 0 and result.metrics[-1].round == 4  # eval every round by default
    assert backend.evaluations == 5


def test_stop_at_sim_time_mid_round() -> None:
    sc = scenario([group("d", 1, flops=FAST, up=UP, down=DOWN, latency=LAT)], stop={"sim_time": 10.0})
    backend = FakeBackend(B, W)
    sim, result = simulate(sc, backend)
    # rounds end at 3.85 and 7.7; the third is cut off at 10 s
    assert result.stopped_by == "sim_time"
    assert result.sim_time_s == 10.0 and sim.env.now == 10.0
    assert result.rounds == 2 and len(backend.contexts) == 2
    assert max(sim.recorder.times) <= 10.0


@pytest.mark.parametrize(
    "stop,by,rounds,time",
    [
        ({"rounds": 2, "sim_time": 100.0}, "rounds", 2, 2 * 3.85),
        ({"rounds": 100, "sim_time": "10s"}, "sim_time", 2, 10.0),
    ],
)
def test_whichever_limit_comes_first(stop: dict, by: str, rounds: int, time: float) -> None:
    sc = scenario([group("d", 1, flops=FAST, up=UP, down=DOWN, latency=LAT)], stop=stop)
    backend = FakeBackend(B, W)
    sim, result = simulate(sc, backend)
    assert result.stopped_by == by and result.rounds == rounds
    assert result.sim_time_s == approx(time)


def test_empty_round_waits_idle_wait_and_still_counts() -> None:
    sc = scenario([group("d", 3)], round={"idle_wait": 7.0}, stop={"rounds": 3})
    backend = FakeBackend()
    sim, result = simulate(sc, backend, policy_cls=NeverRound)

    assert result.rounds == 3 and result.stopped_by == "rounds"
    assert result.sim_time_s == approx(21.0)
    assert [e.time for e in events(sim, "aggregate")] == [approx(7.0), approx(14.0), approx(21.0)]
    assert backend.submitted == [] and backend.cancelled == []
    assert [c.round_index for c in backend.contexts] == [0, 1, 2]
    for c in backend.contexts:
        assert c.available == c.selected == c.delivered == ()
    assert result.updates_received == result.updates_dropped == 0


@pytest.mark.parametrize("buffer,rounds", [(4, 1), (10, 0)])
def test_updates_still_in_the_buffer_at_the_stop_are_received_not_applied(buffer: int, rounds: int) -> None:
    """3 always-on devices, each job 3.85 s (task_duration): in 10 s each uploads twice (3.85 s, 7.7 s; the third
    would end at 11.55 s), 6 updates in all. A buffer of 4 aggregates once (at 7.7 s) and holds 2 at the stop; a
    buffer of 10 never fills. Every update that reached the server is received, whether applied or not."""
    data = {
        "name": "buffer",
        "stop": {"sim_time": "10s"},
        "task": {"dataset": {"name": "digits", "partition": {"samples_per_client": 10}}, "model": {"name": "logistic"}},
        "devices": [group("g", 3, flops=FAST, up=UP, down=DOWN, latency=LAT)],
        "server": {"mode": "async", "async": {"buffer": buffer}},
        "events": {"idle_devices": False},
    }
    sim, result = simulate(scenario_from_dict(data), FakeBackend(B, W))
    assert task_duration(FAST) == approx(3.85)
    assert [e.time for e in events(sim, "upload_end")] == [approx(3.8), approx(3.8), approx(3.8)] + [approx(7.65)] * 3
    assert result.rounds == rounds
    assert result.updates_received == 6
    assert result.updates_applied == 4 * rounds


# ------------------------------------------------------------------- what the log holds


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_jobs_and_an_aggregations_events_are_the_declared_ones(mode: str) -> None:
    """netfl.events declares what a job and an aggregation log (the schedule estimate counts them from there): a
    world in which nothing fails logs exactly those, in that order."""
    data = {
        "name": "events",
        "stop": {"rounds": 2},
        "task": {"dataset": {"name": "digits", "partition": {"samples_per_client": 10}}, "model": {"name": "logistic"}},
        "devices": [group("g", 3, flops=FAST, up=UP, down=DOWN, latency=LAT)],
        "server": {"mode": mode, **({"async": {"buffer": 2}} if mode == "async" else {})},
        "events": {"idle_devices": False},
    }
    sim, _ = simulate(scenario_from_dict(data), FakeBackend(B, W), AlwaysRound)
    logged = events(sim)
    server = [e.kind for e in logged if e.device == SERVER]
    assert server == list(AGGREGATION_EVENTS) * 2
    jobs: dict[int, list[str]] = {}
    for e in logged:
        if "job" in e.values:
            jobs.setdefault(e.job, []).append(e.kind)
    finished = [kinds for kinds in jobs.values() if kinds[-1] == "upload_end"]
    assert len(finished) >= 4 and all(kinds == list(JOB_EVENTS[mode]) for kinds in finished), jobs
