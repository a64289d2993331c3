"""Network accounting the summary and the event log rely on, against hand computation.

Airtime is every second a transmitter was on -- also for a transmission
that failed or was cut off, whose energy was spent all the same -- and each
transmission's ``tx_end`` (each collision) carries its bytes and energy.
The shipped network scenarios give the same event log for the same seed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from engine_support import FakeBackend, approx, channel, events, network_scenario, run_network

from netfl.config import scenario_from_dict
from netfl.sim.channel import path_loss_db
from netfl.sim.network import ram_weights

ROOT = Path(__file__).resolve().parents[2]
PACKET_AIR = 1500 * 8 / 1e6  # 1500-byte packets at 1 Mbit/s: 12 ms
TX_W = 0.2


def ap_network(medium: dict) -> dict:
    return {
        "nodes": {"ap": {"kind": "access_point", "medium": medium, "downlink": 1e9}},
        "links": [{"from": "ap", "to": "server", "rate": 1e9}],
    }


def wireless(name: str, count: int, channel: dict) -> dict:
    return {
        "group": name,
        "count": count,
        "compute": {"flops_per_s": 1e9},
        "power": {"compute": 0.0, "transmit": TX_W, "idle": 0.0},
        "link": {"to": "ap", "channel": channel},
    }


def test_failed_transmission_counts_its_airtime_and_energy():
    # AWGN at 3 km: SNR over 1 MHz is about -16 dB, so a fixed 1 Mbit/s never gets through; the dedicated
    # medium gives up after 8 attempts of the first packet: 8 x 12 ms on the air at 0.2 W.
    sc = network_scenario(
        [wireless("far", 1, {"kind": "awgn", "distance_m": 3000, "rate": "1Mbps", "packet_size": "1500B"})],
        network=ap_network({"kind": "dedicated", "bandwidth": "1MHz"}),
        stop={"rounds": 1},
    )
    sim, result = run_network(sc, FakeBackend(model_bytes=10_000, flops=1e9))
    (drop,) = events(sim, "dropout")
    assert drop.field("cause") == "transmission_failed"
    (end,) = events(sim, "tx_end")
    assert end.field("success") == 0 and end.field("attempts") == 8 and end.field("collisions") == 0
    assert result.network.airtime_s == approx(8 * PACKET_AIR)
    assert end.field("energy_j") == pytest.approx(TX_W * 8 * PACKET_AIR, rel=1e-5)
    assert result.devices[0].battery.energy_j["transmit"] == approx(TX_W * 8 * PACKET_AIR)
    assert result.network.bytes_up == 0


def test_transmission_cut_at_the_deadline_counts_the_airtime_spent():
    # direct 1 Mbit/s link, 1 Mbit model: download [0, 1], train [1, 2], upload from 2; deadline at 2.5 s
    sc = network_scenario(
        [
            {
                "group": "g",
                "count": 1,
                "compute": {"flops_per_s": 1e9},
                "power": {"compute": 0.0, "transmit": TX_W, "idle": 0.0},
                "link": {"uplink": 1e6},
            }
        ],
        server={"round": {"deadline": 2.5}},
        stop={"rounds": 1},
    )
    sim, result = run_network(sc, FakeBackend(model_bytes=125_000, flops=1e9))
    (drop,) = events(sim, "dropout")
    assert drop.time == approx(2.5) and drop.field("cause") == "deadline"
    assert result.network.airtime_s == approx(0.5) and result.network.by_device[0] == approx(0.5)
    assert result.devices[0].battery.energy_j["transmit"] == approx(TX_W * 0.5)
    assert result.network.bytes_up == 0


def test_tx_end_energy_is_transmit_power_times_airtime():
    sc = network_scenario(
        [wireless("near", 2, {"kind": "rayleigh", "distance_m": 50, "coherence": "10ms"})],
        network=ap_network({"kind": "fdma", "bandwidth": "1MHz"}),
        stop={"rounds": 2},
    )
    sim, result = run_network(sc, FakeBackend(model_bytes=50_000, flops=1e6))
    ends = events(sim, "tx_end")
    assert len(ends) == 4
    for end in ends:
        assert end.field("energy_j") == pytest.approx(TX_W * end.field("airtime_s"), rel=1e-5)
    assert result.network.airtime_s == pytest.approx(sum(e.field("airtime_s") for e in ends), rel=1e-5)


def test_aloha_collisions_carry_bytes_and_energy():
    # q = 1: both backlogged senders transmit in every slot, so every slot collides until the deadline
    sc = network_scenario(
        [wireless("pair", 2, {"kind": "awgn", "distance_m": 10})],
        network=ap_network({"kind": "slotted_aloha", "bandwidth": "1MHz", "rate": "1Mbps", "q": 1.0}),
        server={"round": {"deadline": 1.0}},
        stop={"rounds": 1},
    )
    sim, result = run_network(sc, FakeBackend(model_bytes=4_000, flops=1e6))  # 3 packets; the first never gets through
    collisions = events(sim, "collision")
    assert collisions and all(c.field("bytes") == 1500 for c in collisions)
    assert all(c.field("energy_j") == pytest.approx(TX_W * PACKET_AIR) for c in collisions)
    per_device = [sum(1 for c in collisions if c.device == d) for d in (0, 1)]
    assert per_device[0] == per_device[1] == result.network.collisions / 2
    # cut off at the deadline, in a slot that had begun: every collided slot was airtime, and part of one more
    assert 2 * per_device[0] * PACKET_AIR < result.network.airtime_s < 2 * (per_device[0] + 1) * PACKET_AIR
    # each sender tried its first packet in every slot: all but the first attempt were retransmissions
    assert result.network.retransmissions == 2 * per_device[0]
    assert result.updates_dropped == 2 and result.network.bytes_up == 0


def test_channel_quality_rho_is_proportional_to_mean_snr():
    # same power and noise: the mean SNR ratio is the path-loss difference, 37.6 log10(200/100) dB
    near, far = (channel(0, kind="awgn", distance_m=d) for d in (100.0, 200.0))
    w = ram_weights("channel_quality", [near, far])
    ratio_db = path_loss_db(200.0) - path_loss_db(100.0)
    assert ratio_db == pytest.approx(37.6 * np.log10(2.0))
    assert w.sum() == pytest.approx(1.0) and w[0] / w[1] == pytest.approx(10 ** (ratio_db / 10))
    assert np.allclose(ram_weights([2.0, 6.0], [None, None]), [0.25, 0.75])
    assert np.allclose(ram_weights("uniform", [None] * 4), 0.25)


@pytest.mark.parametrize("name", ["campus-wifi", "cellular", "ram-relay-physical", "anarchic"])
def test_shipped_network_scenarios_give_the_same_event_log_for_the_same_seed(name: str):
    data = yaml.safe_load((ROOT / "topologies" / f"{name}.yaml").read_text())
    data["stop"] = {"rounds": 3}

    def log():
        sim, _ = run_network(scenario_from_dict(data), FakeBackend(model_bytes=20_000, flops=1e7), policy_cls=None)
        return sim.recorder.columns()

    first = log()
    assert len(first["kind"]) > 20 and first == log()
    data["seed"] += 1
    assert log() != first


def test_relay_never_passes_a_user_whose_rho_is_zero():
    from netfl.sim.relay import RamRelay

    log = []
    relay = RamRelay(
        "r",
        "abstract",
        {0: 0.0, 1: 0.3, 2: 0.7},
        np.random.default_rng(0),
        lambda d, k, detail="", **fields: log.append((d, k)),
        draw="arrived",
    )
    relay.hold(10, 0, 1000)
    assert relay.release() is None and log[-1] == (0, "relay_drop") and relay.dropped == 1
    # among those that arrived, rho renormalised: users 0 and 2 arrive, 2 always passes
    for job in range(50):
        relay.hold(2 * job, 0, 1000)
        relay.hold(2 * job + 1, 2, 1000)
        assert relay.release() == 2 * job + 1
    assert (relay.passed, relay.dropped) == (50, 51)
