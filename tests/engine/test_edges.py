"""Hierarchical FL's tiers in the engine (Liu et al., Client-Edge-Cloud Hierarchical Federated Learning, HierFAVG):
devices download from and upload to their edge; every cloud_every rounds the edges' models cross their wired links
to the cloud and back; an edge that is down keeps its devices out -- on timelines by hand."""

from __future__ import annotations

from dataclasses import replace

from engine_support import AlwaysRound, FakeBackend, NeverRound, PluggedBetween, approx, events, info, network_scenario

from netfl.assemble import build_world
from netfl.rng import RandomStreams
from netfl.sim.simulation import Simulation

# Two edges, one device under each, 1 Mbit/s links and broadcasts. A job moves 250 kB (2 Mbit) each way and computes
# 2.5 GFLOP: device 0 (1 GFLOP/s) under east takes 2 + 2.5 + 2 = 6.5 s, device 1 (2.5 GFLOP/s) under west 5 s.
# An edge model is 250 kB too: east -> server at 2 Mbit/s + 100 ms is 1.1 s, west -> server at 1 Mbit/s + 50 ms 2.05 s.
NETWORK = {
    "nodes": {"east": {"kind": "edge", "downlink": 1e6}, "west": {"kind": "edge", "downlink": 1e6}},
    "links": [
        {"from": "east", "to": "server", "rate": 2e6, "latency": 0.1},
        {"from": "west", "to": "server", "rate": 1e6, "latency": 0.05},
    ],
}
DEVICES = [
    {"group": "e", "count": 1, "compute": {"flops_per_s": 1e9}, "link": {"to": "east", "uplink": 1e6}},
    {"group": "w", "count": 1, "compute": {"flops_per_s": 2.5e9}, "link": {"to": "west", "uplink": 1e6}},
]


def run(cloud_every: int = 1, rounds: int = 2, west_down: bool = False):
    sc = network_scenario(
        DEVICES, network=NETWORK, server={"round": {"cloud_every": cloud_every}}, stop={"rounds": rounds}
    )
    streams = RandomStreams(sc.seed)
    policies = [AlwaysRound(AlwaysRound.Params(), info(i), streams.numpy("availability", i)) for i in range(2)]
    edge_policies = {"west": NeverRound(NeverRound.Params(), info(-2), streams.numpy("x"))} if west_down else {}
    world = build_world(sc, streams, policies=policies, edge_policies=edge_policies)
    world.hierarchy = replace(world.hierarchy, model_bytes=250_000)
    backend = FakeBackend()
    sim = Simulation(world, backend)
    return sim, backend, sim.run()


def times(sim, kind: str) -> list[tuple[float, str]]:
    """(time, the edge or the edges heard) of each event of ``kind``."""
    return [(e.time, f"edge={e.values['edge']}" if "edge" in e.values else e.detail) for e in events(sim, kind)]


def test_a_two_tier_round_by_hand() -> None:
    """Round 0: the updates reach their edges at 6.5 s and 5 s; the edges send their models at 6.5 s (east's arrives
    at 7.6 s, west's at 8.55 s), the cloud aggregates at 8.55 s and sends back (east has it at 9.65 s, west at
    10.6 s), and round 1 starts at 10.6 s."""
    sim, backend, result = run()
    assert [e.time for e in events(sim, "download_end")][:2] == [
        approx(2.0),
        approx(2.0),
    ]  # from the edge: no wired hop
    assert sorted(e.time for e in events(sim, "upload_end"))[:2] == [approx(5.0), approx(6.5)]
    assert times(sim, "edge_upload_start")[:2] == [(approx(6.5), "edge=east"), (approx(6.5), "edge=west")]
    assert times(sim, "edge_upload_end")[:2] == [(approx(7.6), "edge=east"), (approx(8.55), "edge=west")]
    assert times(sim, "cloud_aggregate")[0] == (approx(8.55), "edges=east,west")
    assert events(sim, "cloud_aggregate")[0].values["applied"] == 2
    assert times(sim, "edge_download_end")[:2] == [(approx(9.65), "edge=east"), (approx(10.6), "edge=west")]
    assert [e.time for e in events(sim, "round_start")] == [0.0, approx(10.6)]
    assert [c.edges for c in backend.clouds] == [(0, 1), (0, 1)] and backend.clouds[0].round_index == 0
    assert [e.values["bytes"] for e in events(sim, "edge_upload_start")] == [250_000] * 4
    assert result.rounds == 2


def test_the_cloud_aggregates_every_k_rounds() -> None:
    sim, backend, _ = run(cloud_every=2, rounds=4)
    assert [c.round_index for c in backend.clouds] == [1, 3]
    starts = [e.time for e in events(sim, "round_start")]
    assert starts[1] == approx(6.5)  # no cloud round after round 0


def test_a_down_edge_keeps_its_devices_out_and_misses_the_cloud() -> None:
    sim, backend, _ = run(west_down=True)
    assert [e.values["edge"] for e in events(sim, "edge_offline")] == ["west"]
    assert {e.device for e in events(sim, "selected")} == {0}
    assert [c.edges for c in backend.clouds] == [(0,), (0,)]
    assert [e.values["available"] for e in events(sim, "round_start")] == [1, 1]


def test_an_edge_with_a_continuous_time_policy_comes_back() -> None:
    """West is down until 7 s: round 0 has device 0 alone (its update at east at 6.5 s, east's model at the cloud at
    7.6 s and back at 8.7 s); round 1, from 8.7 s, has both, and both edges reach the cloud."""
    sc = network_scenario(DEVICES, network=NETWORK, stop={"rounds": 2})
    streams = RandomStreams(sc.seed)
    policies = [AlwaysRound(AlwaysRound.Params(), info(i), streams.numpy("availability", i)) for i in range(2)]
    west = PluggedBetween(PluggedBetween.Params(start=7.0), info(-2), streams.numpy("x"))
    world = build_world(sc, streams, policies=policies, edge_policies={"west": west})
    world.hierarchy = replace(world.hierarchy, model_bytes=250_000)
    backend = FakeBackend()
    sim = Simulation(world, backend)
    sim.run()
    assert times(sim, "edge_offline") == [(0.0, "edge=west")] and times(sim, "edge_online") == [(7.0, "edge=west")]
    assert [c.edges for c in backend.clouds] == [(0,), (0, 1)]
    assert [e.time for e in events(sim, "round_start")] == [0.0, approx(8.7)]
