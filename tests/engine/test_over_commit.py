"""Over-commit (Bonawitz et al., "Towards Federated Learning at Scale: System Design"): ask more devices than a
round needs, close it at the first K updates and stop the rest -- on worlds whose timeline is computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from engine_support import AlwaysRound, FakeBackend, approx, events, group, info, scenario, simulate

from netfl.assemble import build_world
from netfl.registry.device_params import LinkSpec
from netfl.registry.run_params import StopSpec
from netfl.registry.server_params import RoundSpec
from netfl.rng import RandomStreams
from netfl.sim.device_table import DeviceTable
from netfl.sim.simulation import Simulation
from netfl.sim.world import World

# Four mains-powered devices, 1 Mbit/s both ways, no latency; each job moves 250 kB down and up (2 s each) and
# computes 2.5 GFLOP: 2.5, 5, 1 and 2 s at these speeds. So device d's update arrives 6.5, 9, 5 and 6 s after
# the round starts, in the order 2, 3, 0, 1.
SPEEDS = [1e9, 0.5e9, 2.5e9, 1.25e9]


def world(goal: int | None, *, deadline_s: float | None = None, rounds: int = 2) -> World:
    n = len(SPEEDS)
    table = DeviceTable(
        group=np.zeros(n, dtype=np.int32),
        group_names=["phones"],
        flops_per_s=np.asarray(SPEEDS),
        compute_w=np.full(n, 2.0),
        transmit_w=np.full(n, 0.2),
        receive_w=np.full(n, 0.1),
        idle_w=np.full(n, 0.05),
        capacity_j=np.full(n, math.inf),
        initial_j=np.full(n, math.inf),
        min_level=np.zeros(n),
        charge_w=np.zeros(n),
        uplink_bps=np.full(n, 1e6),
        downlink_bps=np.full(n, 1e6),
        distance_m=np.full(n, math.nan),
    )
    streams = RandomStreams(0)
    return World(
        devices=table,
        links=[LinkSpec(uplink=1e6)],
        streams=streams,
        stop=StopSpec(rounds=rounds),
        server=RoundSpec(
            participants=goal or n,
            over_commit=0.3 if goal else 0.0,
            **({} if deadline_s is None else {"deadline": deadline_s}),
        ),
        policies=[AlwaysRound(AlwaysRound.Params(), info(i), streams.numpy("availability", i)) for i in range(n)],
    )


def run(w: World) -> tuple[Simulation, object]:
    sim = Simulation(w, FakeBackend(participants=len(SPEEDS)))  # asks all four: K = 3 over-committed by 30%
    return sim, sim.run()


def test_the_round_closes_at_the_kth_arrival_and_stops_the_straggler() -> None:
    sim, result = run(world(goal=3))
    backend = sim.backend
    # round 0: jobs 0..3 on devices 0..3; arrivals 2 (5 s), 3 (6 s), 0 (6.5 s): closed at 6.5 s, device 1 stopped.
    # round 1 starts at 6.5 s with all four free again and closes at 6.5 + 6.5 = 13 s.
    assert [c.delivered for c in backend.contexts] == [(2, 3, 0), (6, 7, 4)]
    assert [m.sim_time_s for m in result.metrics] == [0.0, approx(6.5), approx(13.0)]
    assert backend.cancelled == [1, 5]
    dropouts = [(e.time, e.device, e.field("job"), e.field("cause")) for e in events(sim, "dropout")]
    assert dropouts == [(approx(6.5), 1, 1, "over_commit"), (approx(13.0), 1, 5, "over_commit")]
    counts = [tuple(e.field(c) for c in ("received", "applied", "dropped")) for e in events(sim, "aggregate")]
    assert counts == [(3, 3, 1)] * 2 and [e.detail for e in events(sim, "aggregate")] == ["", ""]
    assert result.updates_received == 6 and result.updates_dropped == 2
    # device 1 trained 6.5 - 2 = 4.5 s of each round before it was stopped (2 W), and never transmitted
    stats = result.stats
    assert stats.energy_by_activity_j["compute"][1] == approx(2 * 2.0 * 4.5)
    assert stats.energy_by_activity_j["receive"][1] == approx(2 * 0.1 * 2.0)
    assert stats.energy_by_activity_j["transmit"][1] == 0.0
    assert stats.tasks_started.tolist() == [2, 2, 2, 2] and stats.updates_delivered.tolist() == [2, 0, 2, 2]


def test_without_a_goal_the_round_waits_for_everyone() -> None:
    sim, result = run(world(goal=None))
    assert [m.sim_time_s for m in result.metrics] == [0.0, approx(9.0), approx(18.0)]
    assert [c.delivered for c in sim.backend.contexts] == [(2, 3, 0, 1), (6, 7, 4, 5)]
    assert events(sim, "dropout") == []


def test_a_deadline_before_the_kth_arrival_closes_the_round_as_a_deadline() -> None:
    sim, result = run(world(goal=3, deadline_s=6.2, rounds=1))
    assert sim.backend.contexts[0].delivered == (2, 3)
    assert result.sim_time_s == approx(6.2)
    assert [(e.device, e.field("job"), e.field("cause")) for e in events(sim, "dropout")] == [
        (0, 0, "deadline"),
        (1, 1, "deadline"),
    ]


def test_a_deadline_after_the_kth_arrival_changes_nothing() -> None:
    early, _ = run(world(goal=3))
    late, _ = run(world(goal=3, deadline_s=7.0))
    assert early.recorder.columns() == late.recorder.columns()


def test_a_straggler_stopped_mid_upload_counts_its_airtime() -> None:
    """K = 2: the round closes at 6 s, when device 0 (upload from 4.5 s to 6.5 s) has sent 1.5 s of it."""
    sim, result = run(world(goal=2, rounds=1))
    assert sim.backend.contexts[0].delivered == (2, 3)
    assert [(e.device, e.field("job"), e.field("cause")) for e in events(sim, "dropout")] == [
        (0, 0, "over_commit"),
        (1, 1, "over_commit"),
    ]
    assert result.stats.energy_by_activity_j["transmit"][0] == approx(0.2 * 1.5)


def test_over_commit_from_a_scenario_asks_ceil_of_130_percent() -> None:
    """Ten devices, K = 4, over_commit 30%: ceil(5.2) = 6 asked; the four fastest of them are aggregated."""
    speeds = [float(s) for s in np.linspace(0.5e9, 5e9, 10)]
    devices = [group(f"d{i}", flops=s, up=1e6) for i, s in enumerate(speeds)]
    sc = scenario(devices, stop={"rounds": 3}, round={"participants": 4, "over_commit": "30%"})
    assert sc.server.round.asked == 6
    sim, _ = simulate(sc, FakeBackend())
    for c in sim.backend.contexts:
        assert len(c.selected) == 6 and len(c.delivered) == 4
        clients = [sim.backend.client_of(job) for job in c.delivered]
        assert clients == sorted(c.selected, key=lambda d: -speeds[d])[:4]  # fastest first
    assert len(events(sim, "dropout")) == 3 * 2


def test_the_same_seed_gives_the_same_over_committed_log() -> None:
    sessions = {"policy": "sessions", "on": {"exponential": {"mean": "20s"}}, "off": {"exponential": {"mean": "40s"}}}
    phones = group("d", 30, flops={"uniform": [0.3e9, 3e9]}, up=1e6, availability=sessions)
    sc = scenario([phones], stop={"rounds": 8}, round={"participants": 5, "over_commit": "40%", "deadline": 8.0})
    first, _ = simulate(sc, FakeBackend(), policy_cls=None)
    second, _ = simulate(sc, FakeBackend(), policy_cls=None)
    assert "over_commit" in first.recorder.column("cause")
    assert first.recorder.columns() == second.recorder.columns()


def test_updates_arriving_at_the_same_instant_as_the_kth_are_late() -> None:
    """Three identical devices, K = 1 over-committed 200%: all three arrive at 6.5 s; the first is kept."""
    sc = scenario([group("d", 3, flops=1e9, up=1e6)], stop={"rounds": 1}, round={"participants": 1, "over_commit": 2})
    sim, result = simulate(sc, FakeBackend())
    assert sim.backend.contexts[0].delivered == (0,) and result.sim_time_s == approx(6.5)
    assert [(e.time, e.device, e.field("job")) for e in events(sim, "late")] == [
        (approx(6.5), 1, 1),
        (approx(6.5), 2, 2),
    ]
    assert sim.backend.cancelled == [1, 2] and events(sim, "dropout") == []


@pytest.mark.parametrize(
    "participants,over_commit,asked",
    [(10, 0.3, 13), (10, "30%", 13), (10, "10%", 11), (10, 0.0, 10), (3, 0.3, 4), (1, 0.3, 2), (7, 1.0, 14)],
)
def test_asked_is_the_ceiling_without_float_noise(participants: int, over_commit, asked: int) -> None:
    sc = scenario([group("d", 2)], round={"participants": participants, "over_commit": over_commit})
    assert sc.server.round.asked == asked


def test_no_over_commit_builds_the_world_of_today() -> None:
    """over_commit absent or 0: no goal, and the learner asks exactly ``participants``."""
    for rnd in ({"participants": 3}, {"participants": 3, "over_commit": 0}):
        sc = scenario([group("d", 5)], round=rnd)
        server = build_world(
            sc,
            RandomStreams(0),
            policies=[AlwaysRound(AlwaysRound.Params(), info(i), np.random.default_rng(i)) for i in range(5)],
        ).server
        assert server is sc.server.round and server.goal is None and server.asked == 3
