"""The network in the engine: wired hops, the RAM relay, anarchic arrivals, and their validation.

A fake backend (no torch) stands in for the learner, so every instant is
hand-computed from bytes / rate + latency and FLOPs / speed.
"""

from __future__ import annotations

import numpy as np
import pytest
from engine_support import FakeBackend, approx, kinds, network_scenario, run_network

from netfl.config import scenario_from_dict
from netfl.errors import ScenarioError


def test_wired_hops_add_up_store_and_forward():
    # device -(2 Mb/s, 10 ms)-> ap -(10 Mb/s, 5 ms)-> agg -(100 Mb/s, 1 ms)-> server; 250 kB = 2 Mbit
    sc = network_scenario(
        [
            {
                "group": "g",
                "count": 1,
                "compute": {"flops_per_s": 1e9},
                "link": {"to": "ap", "uplink": 2e6, "downlink": 4e6, "latency": 0.01},
            }
        ],
        network={
            "nodes": {"ap": {"kind": "access_point"}, "agg": {"kind": "relay"}},
            "links": [
                {"from": "ap", "to": "agg", "rate": 10e6, "latency": 0.005},
                {"from": "agg", "to": "server", "rate": 100e6, "latency": 0.001},
            ],
        },
        stop={"rounds": 1},
    )
    backend = FakeBackend(model_bytes=250_000, flops=1e9)
    sim, result = run_network(sc, backend)
    wired = (2e6 / 100e6 + 0.001) + (2e6 / 10e6 + 0.005)
    download = wired + 0.01 + 2e6 / 4e6
    assert kinds(sim, "download_end")[0][0] == approx(download)
    upload_end = download + 1.0 + 2e6 / 2e6  # the last bit leaves the device; it reaches ap 10 ms later
    assert kinds(sim, "upload_end")[0][0] == approx(upload_end)
    assert kinds(sim, "aggregate")[0][0] == approx(upload_end + 0.01 + wired)
    assert result.network.bytes_up == 250_000 and result.network.bytes_down == 250_000
    assert result.network.airtime_s == approx(1.0)


def test_ram_relay_passes_one_update_per_round_with_frequencies_rho():
    rho = [0.5, 0.3, 0.15, 0.05]
    rounds = 2000
    sc = network_scenario(
        [{"group": "u", "count": 4, "compute": {"flops_per_s": 1e12}, "link": {"to": "relay", "uplink": 1e9}}],
        network={
            "nodes": {"relay": {"kind": "relay", "ram": {"mode": "abstract", "rho": rho}}},
            "links": [{"from": "relay", "to": "server", "rate": 1e9}],
        },
        stop={"rounds": rounds},
    )
    backend = FakeBackend(model_bytes=1000, flops=1.0)
    sim, result = run_network(sc, backend)
    assert all(len(c.delivered) == 1 for c in backend.contexts)
    passed = np.bincount([backend.client_of(c.delivered[0]) for c in backend.contexts], minlength=4)
    expected = rounds * np.asarray(rho)
    chi2 = float(((passed - expected) ** 2 / expected).sum())
    # chi-square with 3 degrees of freedom: P(chi2 > 16.27) = 0.001
    assert chi2 < 16.27, (passed, expected)
    assert result.relays == {"relay": {"passed": rounds, "dropped": 3 * rounds, "erasures": 0}}
    assert result.updates_dropped == 3 * rounds
    assert len(kinds(sim, "relay_drop")) == 3 * rounds
    assert all(
        e.field("bytes") == 1000 and e.field("relay") == "relay"
        for kind in ("relay_arrive", "relay_pass", "relay_drop")
        for _, _, e in kinds(sim, kind)
    )


def test_ram_relay_first_mode_passes_the_earliest_arrival():
    sc = network_scenario(
        [
            {"group": "slow", "count": 1, "compute": {"flops_per_s": 1e9}, "link": {"to": "relay", "uplink": 1e6}},
            {"group": "fast", "count": 1, "compute": {"flops_per_s": 1e10}, "link": {"to": "relay", "uplink": 1e6}},
        ],
        network={
            "nodes": {"relay": {"kind": "relay", "ram": {"mode": "first"}}},
            "links": [{"from": "relay", "to": "server", "rate": 1e9}],
        },
    )
    backend = FakeBackend(model_bytes=1000, flops=1e9)
    run_network(sc, backend)
    assert [backend.client_of(c.delivered[0]) for c in backend.contexts] == [1, 1, 1]


def test_async_server_aggregates_every_m_updates_and_records_staleness():
    # two workers: fast (1 s per job) and slow (3.5 s per job); buffer 1 => every arrival is a version
    sc = network_scenario(
        [
            {"group": "fast", "count": 1, "compute": {"flops_per_s": 1e9}, "link": {"uplink": 1e12}},
            {"group": "slow", "count": 1, "compute": {"flops_per_s": 1e9 / 3.5}, "link": {"uplink": 1e12}},
        ],
        server={"mode": "async", "async": {"buffer": 1}},
        stop={"rounds": 8},
    )
    backend = FakeBackend(model_bytes=1, flops=1e9)
    sim, result = run_network(sc, backend, policy_cls=None)
    # fast delivers at 1, 2, 3 (fresh), slow at 3.5 (pulled version 0; versions 1-3 exist by then: 3 stale),
    # fast at 4 (pulled version 3 at t=3; version 4 appeared at 3.5: 1 stale), then fast at 5, 6 (fresh)
    times = [t for t, _, _ in kinds(sim, "aggregate")]  # transfers of 8 bits at 1 Tbit/s add picoseconds
    assert times[:5] == [pytest.approx(t, abs=1e-9) for t in (1.0, 2.0, 3.0, 3.5, 4.0)]
    assert result.rounds == 8 and result.staleness[:7] == [0, 0, 0, 3, 1, 0, 0]


def test_network_reference_errors_name_their_paths():
    devices = [{"group": "g", "count": 2, "compute": {"flops_per_s": 1e9}, "link": {"to": "ap9", "uplink": 1e6}}]
    with pytest.raises(ScenarioError) as err:
        network_scenario(
            devices,
            network={
                "nodes": {"ap": {"kind": "access_point"}, "relay": {"kind": "relay", "ram": {"rho": [1.0]}}},
                "links": [{"from": "ap", "to": "servr", "rate": 1e9}],
            },
        )
    problems = dict(err.value.problems)
    assert "unknown node 'servr'" in problems["network.links[0].to"]
    assert "unknown node 'ap9'" in problems["devices[0].link.to"]
    assert "no route to the server" in problems["network.nodes.relay"]


def test_async_mode_refuses_per_round_policies_and_relays():
    devices = [
        {
            "group": "g",
            "count": 2,
            "compute": {"flops_per_s": 1e9},
            "link": {"uplink": 1e6},
            "availability": {"policy": "bernoulli", "p": 0.5},
        }
    ]
    with pytest.raises(ScenarioError) as err:
        network_scenario(devices, server={"mode": "async"})
    assert "per-round" in dict(err.value.problems)["devices[0].availability.policy"]


def test_wireless_link_needs_an_access_point():
    devices = [{"group": "g", "count": 1, "compute": {"flops_per_s": 1e9}, "link": {"channel": {"distance_m": 100}}}]
    with pytest.raises(ScenarioError, match="needs `to: <access point>`"):
        network_scenario(devices)


def test_async_run_with_no_live_workers_stops_as_stalled():
    # one worker whose 1 J battery empties 0.5 s into training (2 W) before any update arrives
    sc = network_scenario(
        [
            {
                "group": "g",
                "count": 1,
                "compute": {"flops_per_s": 1e9},
                "link": {"uplink": 1e9},
                "power": {"compute": 2.0, "transmit": 0.0, "idle": 0.0},
                "battery": {"capacity": 1.0},
            }
        ],
        server={"mode": "async", "async": {"buffer": 1}},
        stop={"rounds": 5},
    )
    sim, result = run_network(sc, FakeBackend(model_bytes=1, flops=1e9), policy_cls=None)
    assert result.stopped_by == "stalled" and result.rounds == 0
    assert kinds(sim, "battery_empty")[0][0] == approx(8e-9 + 0.5)  # 8-bit download at 1 Gbit/s, then 1 J at 2 W


def test_async_run_writes_the_staleness_histogram_even_when_every_update_is_fresh(tmp_path):
    from netfl.runner import run_scenario

    sc = scenario_from_dict(
        {
            "name": "fresh",
            "seed": 1,
            "stop": {"rounds": 3},
            "task": {"dataset": {"name": "digits"}, "model": {"name": "logistic"}, "local": {"steps": 1}},
            "devices": [{"group": "solo", "count": 1, "compute": {"flops_per_s": 1e9}, "link": {"uplink": 1e6}}],
            "server": {"mode": "async", "async": {"buffer": 1}},
        }
    )
    out = run_scenario(sc, out_dir=tmp_path / "run").out_dir
    assert (out / "staleness.csv").read_text() == "staleness,updates\n0,3\n"
    assert (out / "staleness.png").is_file()
