"""A world built in code, with no scenario: the engine runs on plain objects (netfl.sim.world)."""

from __future__ import annotations

import math

import numpy as np
from engine_support import AlwaysRound, FakeBackend, approx, events, info, network_scenario

from netfl.assemble import build_world
from netfl.backend import Evaluation
from netfl.registry.device_params import ChannelSpec, LinkSpec
from netfl.registry.network_params import MediumSpec, NodeSpec, WiredLinkSpec
from netfl.registry.run_params import Every, StopSpec
from netfl.registry.server_params import RoundSpec
from netfl.rng import RandomStreams
from netfl.sim.device_table import DeviceTable
from netfl.sim.simulation import Simulation
from netfl.sim.world import World


def _table(
    groups: list[tuple[str, int]], *, uplink: list[float], downlink: list[float], distance: list[float]
) -> DeviceTable:
    n = sum(count for _, count in groups)
    return DeviceTable(
        group=np.repeat(np.arange(len(groups), dtype=np.int32), [count for _, count in groups]),
        group_names=[name for name, _ in groups],
        flops_per_s=np.full(n, 1e9),
        compute_w=np.full(n, 2.0),
        transmit_w=np.full(n, 0.2),
        receive_w=np.full(n, 0.1),
        idle_w=np.full(n, 0.05),
        capacity_j=np.full(n, math.inf),
        initial_j=np.full(n, math.inf),
        min_level=np.zeros(n),
        charge_w=np.zeros(n),
        uplink_bps=np.asarray(uplink),
        downlink_bps=np.asarray(downlink),
        distance_m=np.asarray(distance),
    )


def _always(n: int, streams: RandomStreams) -> list[AlwaysRound]:
    return [AlwaysRound(AlwaysRound.Params(), info(i), streams.numpy("availability", i)) for i in range(n)]


def test_one_device_world_in_code_follows_the_hand_computed_timeline():
    """250 kB down and up at 1 Mbit/s (2 s each) and 2.5 GFLOP at 1 GFLOP/s (2.5 s): a round takes 6.5 s."""
    streams = RandomStreams(0)
    world = World(
        devices=_table([("phone", 1)], uplink=[1e6], downlink=[1e6], distance=[math.nan]),
        links=[LinkSpec(uplink=1e6)],
        streams=streams,
        stop=StopSpec(rounds=2),
        policies=_always(1, streams),
    )
    sim = Simulation(world, FakeBackend())
    result = sim.run()
    assert result.rounds == 2
    assert result.sim_time_s == approx(13.0)
    assert [m.sim_time_s for m in result.metrics] == [0.0, approx(6.5), approx(13.0)]
    assert result.network.bytes_up == approx(500_000)


def test_a_world_in_code_runs_like_the_same_world_from_a_scenario():
    """Two wired devices and two behind a TDMA access point over Rayleigh channels: the same event log."""
    sc = network_scenario(
        [
            {
                "group": "wired",
                "count": 2,
                "compute": {"flops_per_s": 1e9},
                "power": {"transmit": 0.2},
                "link": {"uplink": 2e6, "latency": 0.01},
            },
            {
                "group": "radio",
                "count": 2,
                "compute": {"flops_per_s": 1e9},
                "link": {"to": "ap", "channel": {"kind": "rayleigh", "distance_m": {"choice": [50.0, 80.0]}}},
            },
        ],
        network={
            "nodes": {"ap": {"kind": "access_point", "medium": {"kind": "tdma", "bandwidth": 5e6}, "downlink": 20e6}},
            "links": [{"from": "ap", "to": "server", "rate": 1e8, "latency": 0.005}],
        },
        server={"round": {"participants": 3, "deadline": 60.0}},
        stop={"rounds": 4},
    )
    streams = RandomStreams(sc.seed)
    from_scenario = build_world(sc, streams, policies=_always(4, streams))
    distances = from_scenario.devices.distance_m  # drawn from the scenario seed; copied, not re-derived
    streams = RandomStreams(sc.seed)
    by_hand = World(
        devices=_table(
            [("wired", 2), ("radio", 2)],
            uplink=[2e6, 2e6, math.nan, math.nan],
            downlink=[2e6, 2e6, math.nan, math.nan],
            distance=[math.nan, math.nan, *distances[2:]],
        ),
        links=[
            LinkSpec(uplink=2e6, latency=0.01),
            LinkSpec(to="ap", channel=ChannelSpec(kind="rayleigh", distance_m={"choice": [50.0, 80.0]})),
        ],
        streams=streams,
        stop=StopSpec(rounds=4),
        server=RoundSpec(participants=3, deadline=60.0),
        nodes={"ap": NodeSpec(kind="access_point", medium=MediumSpec(kind="tdma", bandwidth=5e6), downlink=20e6)},
        wires=[WiredLinkSpec(source="ap", to="server", rate=1e8, latency=0.005)],
        policies=_always(4, streams),
    )
    assert set(distances[2:]) <= {50.0, 80.0}
    logs = []
    for world in (from_scenario, by_hand):
        backend = FakeBackend(participants=3)
        sim = Simulation(world, backend)
        sim.run()
        logs.append(sim.recorder.columns())
    assert len(logs[0]["kind"]) > 40 and "tx_start" in logs[0]["kind"]
    assert logs[0] == logs[1]


class RisingAccuracy(FakeBackend):
    """Accuracy 0.1 per aggregation so far: a curve whose crossing of a target is known by hand."""

    def evaluate(self):
        self.evaluations += 1
        return Evaluation(accuracy=0.1 * len(self.contexts), loss=1.0)


def _one_device(stop: StopSpec, server: RoundSpec | None = None, every_s: float | None = None) -> Simulation:
    streams = RandomStreams(0)
    world = World(
        devices=_table([("phone", 1)], uplink=[1e6], downlink=[1e6], distance=[math.nan]),
        links=[LinkSpec(uplink=1e6)],
        streams=streams,
        stop=stop,
        policies=_always(1, streams),
        **({"server": server} if server is not None else {}),
        **({"evaluate": Every(seconds=every_s)} if every_s is not None else {}),
    )
    return Simulation(world, RisingAccuracy())


def test_evaluation_on_a_time_grid_falls_on_its_multiples_and_at_the_stop():
    """Rounds of 6.5 s, evaluated every 4 s up to 20 s: rows at 0, 4, ..., 20 with the rounds done by then."""
    result = _one_device(StopSpec(sim_time=20.0), every_s=4.0).run()
    assert [m.sim_time_s for m in result.metrics] == [0.0, 4.0, 8.0, 12.0, 16.0, 20.0]
    assert [m.round for m in result.metrics] == [0, 0, 1, 1, 2, 3]  # rounds end at 6.5, 13, 19.5
    assert result.stopped_by == "sim_time"


def test_a_round_due_at_the_stop_time_is_not_started():
    """Rounds of 6.5 s started every 10 s, stopped at 20 s: the third round would start at 20 s exactly and never
    finish, so nothing of it is logged (no round_start, selected or download_start at the stop instant)."""
    sim = _one_device(StopSpec(sim_time=20.0), RoundSpec(interval=10.0), every_s=4.0)
    result = sim.run()
    assert result.stopped_by == "sim_time" and result.sim_time_s == 20.0 and result.rounds == 2
    assert [e.time for e in events(sim, "round_start")] == [0.0, 10.0]
    assert not [e for e in events(sim) if e.time == 20.0] and sim.devices[0].tasks_started == 2
    assert result.metrics[-1].sim_time_s == 20.0 and result.metrics[-1].round == 2


def test_the_run_stops_at_the_first_evaluation_reaching_the_target_accuracy():
    result = _one_device(StopSpec(rounds=50, accuracy=0.3)).run()
    assert result.stopped_by == "accuracy"
    assert result.rounds == 3 and result.sim_time_s == approx(19.5)
    assert [m.test_accuracy for m in result.metrics] == [0.0, 0.1, 0.2, approx(0.3)]


def test_a_target_never_reached_leaves_the_other_limits_in_charge():
    result = _one_device(StopSpec(rounds=4, accuracy=0.9)).run()
    assert result.stopped_by == "rounds" and result.rounds == 4


def _energy_by_hand(t: float) -> float:
    """The one-device world's energy at ``t``: idle 50 mW all along; in each 6.5 s round, receive 0.1 W over
    [0, 2] s, compute 2 W over [2, 4.5] s and transmit 0.2 W over [4.5, 6.5] s (5.6 J besides idle)."""
    rounds, s = divmod(t, 6.5)

    def on(start: float, end: float) -> float:
        return min(max(s - start, 0.0), end - start)

    return 0.05 * t + 5.6 * rounds + 0.1 * on(0.0, 2.0) + 2.0 * on(2.0, 4.5) + 0.2 * on(4.5, 6.5)


def test_cumulative_energy_at_each_evaluation_is_the_hand_computed_draw():
    """Evaluated every second, in the middle of downloads, training and uploads, up to the stop at 13 s (where the
    grid's evaluation comes just before the second round ends, and the final one just after)."""
    sim = _one_device(StopSpec(rounds=2), every_s=1.0)
    result = sim.run()
    times = [*range(14), 13]
    assert [m.sim_time_s for m in result.metrics] == [approx(t) for t in times]
    assert [m.energy_j for m in result.metrics] == [approx(_energy_by_hand(t)) for t in times]
    assert result.metrics[-1].energy_j == result.energy_j == approx(2 * (0.05 * 6.5 + 5.6))  # to the bit
    by_kind = {(e.kind, e.round): e.field("energy_j") for e in events(sim) if "energy_j" in e.values}
    assert by_kind == {
        ("download_end", 0): approx(0.2),
        ("train_end", 0): approx(5.0),
        ("upload_end", 0): approx(0.4),
        ("download_end", 1): approx(0.2),
        ("train_end", 1): approx(5.0),
        ("upload_end", 1): approx(0.4),
    }
