"""An update whose last bit has left its device arrives, whatever becomes of the device during the link latency.

Worlds built in code (netfl.sim.world), with the fake backend: 250 kB each
way at 1 Mbit/s (2 s), 2.5 GFLOP at 1 GFLOP/s (2.5 s), 0.5 s latency on the
device's link. A task: download 0.5 + 2 = 2.5 s, train to 5.0 s, upload to
7.0 s (the last bit leaves: ``upload_end``), arrival 7.5 s.
"""

from __future__ import annotations

import math

import numpy as np
from engine_support import AlwaysRound, FakeBackend, PluggedBetween, approx, events, info

from netfl.registry.device_params import LinkSpec
from netfl.registry.run_params import StopSpec
from netfl.registry.server_params import AsyncSpec, RoundSpec
from netfl.rng import RandomStreams
from netfl.sim.device_table import DeviceTable
from netfl.sim.simulation import Simulation
from netfl.sim.world import World

LATENCY = 0.5
UPLOAD_END, ARRIVAL = 7.0, 7.5
OFFLINE_AT = 7.2  # inside (UPLOAD_END, ARRIVAL)
EMPTY_AT = 7.25
# Energy drawn by EMPTY_AT: idle 0.05 W all along, receive 0.1 W x 2 s, compute 2 W x 2.5 s, transmit 0.2 W x 2 s
CAPACITY_J = 0.05 * EMPTY_AT + 0.1 * 2.0 + 2.0 * 2.5 + 0.2 * 2.0


def _table(capacity_j: list[float]) -> DeviceTable:
    n = len(capacity_j)
    return DeviceTable(
        group=np.zeros(n, dtype=np.int32),
        group_names=["phone"],
        flops_per_s=np.full(n, 1e9),
        compute_w=np.full(n, 2.0),
        transmit_w=np.full(n, 0.2),
        receive_w=np.full(n, 0.1),
        idle_w=np.full(n, 0.05),
        capacity_j=np.asarray(capacity_j),
        initial_j=np.asarray(capacity_j),
        min_level=np.zeros(n),
        charge_w=np.zeros(n),
        uplink_bps=np.full(n, 1e6),
        downlink_bps=np.full(n, 1e6),
        distance_m=np.full(n, math.nan),
    )


def _world(server: RoundSpec | AsyncSpec, stop: StopSpec) -> World:
    """Device 0 goes offline at 7.2 s (its session ends); device 1's battery empties at 7.25 s."""
    streams = RandomStreams(0)
    policies = [
        PluggedBetween(PluggedBetween.Params(start=0.0, end=OFFLINE_AT), info(0), streams.numpy("a", 0)),
        AlwaysRound(AlwaysRound.Params(), info(1), streams.numpy("a", 1)),
    ]
    return World(
        devices=_table([math.inf, CAPACITY_J]),
        links=[LinkSpec(uplink=1e6, latency=LATENCY)],
        streams=streams,
        stop=stop,
        server=server,
        policies=policies,
    )


def test_device_offline_or_dead_during_the_latency_still_delivers_at_upload_end_plus_latency():
    backend = FakeBackend()
    sim = Simulation(_world(RoundSpec(), StopSpec(rounds=1)), backend)
    result = sim.run()

    assert [e.time for e in events(sim, "upload_end")] == [approx(UPLOAD_END)] * 2
    assert [(e.time, e.device, e.field("cause")) for e in events(sim, "offline")] == [
        (approx(OFFLINE_AT), 0, "policy:PluggedBetween"),  # built in code: named by its class
        (approx(EMPTY_AT), 1, "battery_empty"),
    ]
    assert [e.time for e in events(sim, "battery_empty")] == [approx(EMPTY_AT)]
    assert events(sim, "dropout") == []
    (aggregate,) = events(sim, "aggregate")
    assert aggregate.time == approx(UPLOAD_END + LATENCY)
    assert backend.contexts[0].delivered == (0, 1) and backend.cancelled == []
    assert result.updates_received == 2 and result.updates_dropped == 0
    assert list(result.stats.updates_delivered) == [1, 1]


def test_a_deadline_inside_the_latency_makes_the_update_late_not_a_dropout():
    """The deadline (7.3 s) closes the round while both updates are in flight: they arrive late at 7.5 s
    (during the second round, in which nobody is available)."""
    backend = FakeBackend()
    sim = Simulation(_world(RoundSpec(deadline=7.3), StopSpec(rounds=2)), backend)
    result = sim.run()

    assert events(sim, "dropout") == []
    assert [(e.time, e.device) for e in events(sim, "late")] == [(approx(ARRIVAL), 0), (approx(ARRIVAL), 1)]
    assert [e.time for e in events(sim, "aggregate")] == [approx(7.3), approx(7.3 + 10.0)]  # idle_wait 10 s
    assert result.updates_received == 0 and sorted(backend.cancelled) == [0, 1]


def test_async_worker_offline_during_the_latency_still_delivers():
    """An asynchronous worker whose session ends in flight: its update is aggregated at 7.5 s all the same."""
    backend = FakeBackend()
    sim = Simulation(_world(AsyncSpec(buffer=1), StopSpec(rounds=1)), backend)
    result = sim.run()

    mine = [e for e in events(sim) if e.device == 0]
    assert [(e.kind, e.time) for e in mine if e.kind in ("upload_end", "offline")] == [
        ("upload_end", approx(UPLOAD_END)),
        ("offline", approx(OFFLINE_AT)),
    ]
    assert events(sim, "dropout") == []
    assert events(sim, "aggregate")[0].time == approx(ARRIVAL)
    # device 1's update arrives at the same instant, into the buffer the stop leaves: received, not applied
    assert result.updates_received == 2 and result.updates_applied == 1
