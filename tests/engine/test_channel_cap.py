"""Adaptive rates stop at the radio's top spectral efficiency (LTE 64-QAM, CQI 15: 5.5547 bit/s/Hz by default).

Hand-computed: 0.2 W = 23.0103 dBm; path loss 128.1 + 37.6 log10(d / km) dB;
noise -174 dBm/Hz + 7 dB over 5 MHz = -100.0103 dBm. At 20 m the SNR is
23.0103 - 64.2201 + 100.0103 = 58.80 dB: Shannon gives 19.5 bit/s/Hz, the
cap 5.5547. At 400 m it is 23.0103 - 113.1378 + 100.0103 = 9.883 dB:
log2(1 + 9.733) = 3.424 bit/s/Hz, below the cap.
"""

from __future__ import annotations

import math

import pytest
from engine_support import FakeBackend, approx, channel, kinds, network_scenario, run_network

from netfl.registry.device_params import ChannelSpec
from netfl.sim.channel import Channel, transfer_time

B = 5e6
CAP = 5.5547


def snr_by_hand(distance_m: float) -> float:
    rx_dbm = 10 * math.log10(200.0) - (128.1 + 37.6 * math.log10(distance_m / 1000))
    noise_dbm = -174.0 + 7.0 + 10 * math.log10(B)
    return 10 ** ((rx_dbm - noise_dbm) / 10)


def awgn(distance_m: float, **kw) -> Channel:
    return channel(0, kind="awgn", distance_m=distance_m, tx_power=0.2, bandwidth_hz=B, **kw)


def test_a_close_device_hits_the_cap_a_far_one_stays_below_it():
    near, far = awgn(20.0), awgn(400.0)
    assert math.log2(1 + snr_by_hand(20.0)) == pytest.approx(19.53, abs=0.01)
    assert near.shannon_capacity(0.0) == pytest.approx(B * math.log2(1 + snr_by_hand(20.0)), rel=1e-12)
    assert near.capacity(0.0) == CAP * B  # 27.77 Mbit/s, not 97.7
    assert math.log2(1 + snr_by_hand(400.0)) == pytest.approx(3.424, abs=0.001)
    assert (
        far.capacity(0.0)
        == far.shannon_capacity(0.0)
        == pytest.approx(B * math.log2(1 + snr_by_hand(400.0)), rel=1e-12)
    )
    # 8 Mbit at each rate
    assert transfer_time(near, 8e6, 0.0).duration_s == pytest.approx(8e6 / (CAP * B), rel=1e-12)
    assert transfer_time(far, 8e6, 0.0).duration_s == pytest.approx(
        8e6 / (B * math.log2(1 + snr_by_hand(400.0))), rel=1e-12
    )
    # the cap is the channel's own: 256-QAM LTE's 7.4063, or none
    assert awgn(20.0, max_spectral_efficiency=7.4063).capacity(0.0) == 7.4063 * B
    assert awgn(20.0, max_spectral_efficiency=math.inf).capacity(0.0) == near.shannon_capacity(0.0)


def test_a_fixed_rate_is_decided_by_shannon_not_by_the_cap():
    """A fixed rate is the modulation the user chose: above the cap it still gets through where SNR allows."""
    near = awgn(20.0, rate=8 * B)  # 8 bit/s/Hz > 5.5547, < 19.5
    assert not near.outage(0.0) and near.outage_probability() == 0.0


@pytest.mark.parametrize("value", [0.0, -1.0, math.nan])
def test_the_cap_must_be_positive(value):
    with pytest.raises(ValueError, match="max_spectral_efficiency"):
        ChannelSpec(distance_m=100.0, max_spectral_efficiency=value)


def test_uploads_over_tdma_take_bits_over_the_capped_rate_near_and_shannon_far():
    """Two AWGN devices on one 5 MHz TDMA access point, 20 m and 400 m away: each upload's airtime by hand."""
    sc = network_scenario(
        [
            {
                "group": "near",
                "count": 1,
                "compute": {"flops_per_s": 1e9},
                "link": {"to": "ap", "channel": {"kind": "awgn", "distance_m": 20.0}},
            },
            {
                "group": "far",
                "count": 1,
                "compute": {"flops_per_s": 1e9},
                "link": {"to": "ap", "channel": {"kind": "awgn", "distance_m": 400.0}},
            },
        ],
        network={
            "nodes": {"ap": {"kind": "access_point", "medium": {"kind": "tdma", "bandwidth": B}, "downlink": 50e6}},
            "links": [{"from": "ap", "to": "server", "rate": 1e9}],
        },
        stop={"rounds": 1},
    )
    backend = FakeBackend(model_bytes=250_000, flops=1e9)
    sim, _ = run_network(sc, backend)
    airtime = {device: e.field("airtime_s") for _, device, e in kinds(sim, "tx_end")}
    assert airtime[0] == approx(2e6 / (CAP * B))  # 72.0 ms at 27.8 Mbit/s (Shannon: 20.5 ms)
    assert airtime[1] == approx(2e6 / (B * math.log2(1 + snr_by_hand(400.0))))  # 116.8 ms at 17.1 Mbit/s
