"""Channel math against closed forms: hand-computed values exactly, random
quantities by Monte Carlo with tolerances of 4 standard errors of the
estimator at the stated sample size (a false failure about 1 in 16 000)."""

import math

import numpy as np
import pytest
from engine_support import channel

from netfl.registry.device_params import ChannelSpec
from netfl.sim.channel import (
    Channel,
    db_to_linear,
    dbm_to_w,
    noise_power_w,
    path_loss_db,
    rayleigh_outage_probability,
    shannon_rate,
    transfer_time,
)


def block_times(ch: Channel, n: int) -> np.ndarray:
    """Midpoints of the first n coherence blocks: one independent fading draw each."""
    return (np.arange(n) + 0.5) * ch.spec.coherence


# ------------------------------------------------------------ unit math


def test_shannon_rate_exact():
    assert shannon_rate(1e6, 15.0) == 4e6  # log2(16) = 4
    assert shannon_rate(2e6, 3.0) == 4e6
    assert shannon_rate(1e6, 0.0) == 0.0


def test_path_loss_by_hand():
    assert path_loss_db(1000.0) == pytest.approx(128.1, abs=1e-12)  # log10(1) = 0
    assert path_loss_db(100.0) == pytest.approx(128.1 - 37.6, abs=1e-12)  # 90.5 dB
    assert path_loss_db(10_000.0) == pytest.approx(128.1 + 37.6, abs=1e-12)
    assert path_loss_db(0.0) == path_loss_db(1.0) == pytest.approx(128.1 - 3 * 37.6, abs=1e-12)


def test_noise_power_and_units():
    assert noise_power_w(1e6) == pytest.approx(10 ** (-114 / 10) / 1000, rel=1e-12)  # -174 + 60 dBm
    assert noise_power_w(1e6, noise_figure_db=7.0) == pytest.approx(10 ** (-107 / 10) / 1000, rel=1e-12)
    assert dbm_to_w(30.0) == pytest.approx(1.0) and dbm_to_w(0.0) == pytest.approx(1e-3)
    assert db_to_linear(10.0) == pytest.approx(10.0) and db_to_linear(-3.0) == pytest.approx(0.501187, rel=1e-5)


def test_mean_snr_by_hand_and_bandwidth_scaling():
    # 0.2 W = 23.0103 dBm; 100 m: 90.5 dB; noise over 1 MHz with NF 7 dB: -107 dBm
    ch = channel(0, kind="awgn", distance_m=100.0, tx_power=0.2, bandwidth_hz=1e6)
    expected_db = 10 * math.log10(200.0) - 90.5 + 107.0  # 39.5103 dB
    assert 10 * math.log10(ch.mean_snr()) == pytest.approx(expected_db, abs=1e-9)
    # half the band, half the noise: twice the SNR; capacity b/2 log2(1 + 2 snr) > C(b) / 2
    assert ch.mean_snr(0.5e6) == pytest.approx(2 * ch.mean_snr())
    assert ch.shannon_capacity(0.0, 0.5e6) > ch.shannon_capacity(0.0) / 2
    assert ch.shannon_capacity(0.0) == shannon_rate(1e6, ch.mean_snr())


def test_rayleigh_outage_formula():
    # R/b = 1 bit/s/Hz -> threshold 2^1 - 1 = 1; mean SNR 10: 1 - e^-0.1
    assert rayleigh_outage_probability(1e6, 1e6, 10.0) == pytest.approx(1 - math.exp(-0.1), rel=1e-12)
    assert rayleigh_outage_probability(0.0, 1e6, 10.0) == 0.0


def test_params_validation():
    """The declaration's rules hold for a channel made in code too (one declaration, checked once)."""
    with pytest.raises(ValueError, match="rician_k"):
        ChannelSpec(kind="rician", distance_m=100.0)
    with pytest.raises(ValueError, match="'awgn', 'rayleigh' or 'rician'"):
        ChannelSpec(kind="nakagami", distance_m=100.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rate"):
        ChannelSpec(rate=0.0, distance_m=100.0)
    with pytest.raises(ValueError, match="distance_m > 0"):
        Channel(ChannelSpec(distance_m=100.0), 0, distance_m=math.nan, bandwidth_hz=1e6)


# ------------------------------------------------------------ fading


def test_rayleigh_outage_monte_carlo():
    # mean SNR ~ 10 dB at 1 MHz; R = 1 Mbit/s -> threshold 1, P_out ~ 0.1
    ch = channel(11, kind="rayleigh", distance_m=600.0, rate=1e6)
    p = ch.outage_probability()
    assert p == rayleigh_outage_probability(1e6, 1e6, ch.mean_snr())
    n = 20_000
    measured = np.mean([ch.outage(t) for t in block_times(ch, n)])
    tol = 4 * math.sqrt(p * (1 - p) / n)  # binomial standard error, n independent blocks
    assert abs(measured - p) < tol, (measured, p, tol)


def test_rician_outage_monte_carlo():
    # non-central chi-square CDF against sampled blocks; K = 0 must equal the Rayleigh closed form
    ch = channel(5, kind="rician", rician_k=3.0, distance_m=500.0, rate=1e6)
    p = ch.outage_probability()
    n = 20_000
    measured = np.mean([ch.outage(t) for t in block_times(ch, n)])
    assert abs(measured - p) < 4 * math.sqrt(p * (1 - p) / n), (measured, p)
    k0 = channel(11, kind="rician", rician_k=0.0, distance_m=600.0, rate=1e6)
    assert k0.outage_probability() == pytest.approx(rayleigh_outage_probability(1e6, 1e6, k0.mean_snr()), rel=1e-9)


def test_fading_gain_means():
    n = 20_000
    ray = channel(3, kind="rayleigh")
    g = np.array([ray.gain(t) for t in block_times(ray, n)])
    assert abs(g.mean() - 1.0) < 4 / math.sqrt(n)  # Exp(1): sd 1
    assert abs(np.mean(g < 0.5) - (1 - math.exp(-0.5))) < 4 * math.sqrt(0.4 * 0.6 / n)  # its CDF at 0.5

    k0 = channel(4, kind="rician", rician_k=0.0)  # K = 0 is Rayleigh
    g0 = np.array([k0.gain(t) for t in block_times(k0, n)])
    assert abs(g0.mean() - 1.0) < 4 / math.sqrt(n)
    assert abs(np.mean(g0 < 0.5) - (1 - math.exp(-0.5))) < 4 * math.sqrt(0.4 * 0.6 / n)

    K = 5.0
    k5 = channel(5, kind="rician", rician_k=K)
    g5 = np.array([k5.gain(t) for t in block_times(k5, n)])
    var = (1 + 2 * K) / (1 + K) ** 2  # variance of the unit-mean Rician power gain
    assert abs(g5.mean() - 1.0) < 4 * math.sqrt(var / n)
    assert abs(g5.var() - var) < 0.05  # sample variance: sd ~ 0.006 at this n; loose on purpose

    awgn = channel(6, kind="awgn")
    assert awgn.gain(123.4) == 1.0 and math.isinf(awgn.block_end(0.0))


def test_shadowing_std():
    std = 8.0  # macro cell, TR 36.814
    draws = np.array([channel(s, kind="awgn", shadowing_db=std).shadowing_db for s in range(4000)])
    assert abs(draws.mean()) < 4 * std / math.sqrt(4000)
    assert abs(draws.std() - std) < 4 * std / math.sqrt(2 * 4000)  # sd of a sample sd ~ sigma / sqrt(2n)
    ch = channel(9, kind="awgn", shadowing_db=std)
    assert ch.path_loss_db == pytest.approx(path_loss_db(100.0) + ch.shadowing_db)


def test_gain_is_deterministic_and_order_free():
    params = {"kind": "rayleigh", "coherence": 0.1}
    times = np.random.default_rng(0).uniform(0, 50, 300)
    a = channel(np.random.SeedSequence(42), **params)
    forward = [a.gain(t) for t in times]
    b = channel(42, **params)  # an int seed is SeedSequence(int)
    for t in times[::-1]:  # other order, repeated calls, extra calls
        b.gain(t), b.gain(t + 7.0)
    assert [b.gain(t) for t in times] == forward
    assert a.gain(0.01) == a.gain(0.099) != a.gain(0.1)  # one draw per block, boundary starts a block
    # block k is [k c, (k+1) c) with k c as computed in floats: 3 * 0.1 = 0.30000000000000004 > 0.3
    assert a.block_index(3 * 0.1) == 3 and a.block_index(0.3) == 2 and a.block_end(0.25) == 3 * 0.1
    other = channel(43, **params)
    assert [other.gain(t) for t in times[:20]] != forward[:20]


def test_seed_sequence_is_not_consumed():
    ss = np.random.SeedSequence(7, spawn_key=(1, 2))
    channel(ss)
    assert ss.n_children_spawned == 0
    assert channel(ss).gain(1.0) == channel(ss).gain(1.0)


# ------------------------------------------------------------ transfers


def test_awgn_adaptive_transfer_is_bits_over_capacity():
    ch = channel(0, kind="awgn", distance_m=250.0)
    bits = 8 * 2_500_000
    out = transfer_time(ch, bits, 12.3)
    assert out.duration_s == bits / ch.capacity(0.0)
    assert out.airtime_s == out.duration_s and out.success and out.retransmissions == 0
    assert out.packets == math.ceil(bits / 12000)


def test_fading_adaptive_transfer_integrates_capacity():
    ch = channel(1, kind="rayleigh", distance_m=400.0, coherence=0.05)
    bits, start = 4e6, 0.237
    out = transfer_time(ch, bits, start)
    end = start + out.duration_s
    # integrate capacity over the transfer independently, block by block
    delivered, t = 0.0, start
    while t < end:
        nxt = min(ch.block_end(t), end)
        delivered += ch.capacity(t) * (nxt - t)
        t = nxt
    assert delivered == pytest.approx(bits, rel=1e-9)
    assert out.duration_s > 0.05  # spans several blocks


def test_fixed_rate_awgn():
    ok = channel(0, kind="awgn", distance_m=100.0, rate=2e6)
    bits = 100_000  # 8 full packets + 4000 bits
    out = transfer_time(ok, bits, 0.0)
    assert out.duration_s == pytest.approx(bits / 2e6, rel=1e-12) and out.packets == 9 and out.success
    far = channel(0, kind="awgn", distance_m=5000.0, rate=2e6)
    assert far.outage(0.0)
    out = transfer_time(far, bits, 0.0, max_attempts=5)  # first packet fails 5 times: give up
    assert not out.success and out.packets == 1 and out.retransmissions == 4
    assert out.duration_s == pytest.approx(5 * 12000 / 2e6)


def test_outage_block_kills_back_to_back_retries():
    # packets (12 ms) much shorter than a block (1 s): retries land in the same faded block
    ch = channel(2, kind="rayleigh", distance_m=600.0, rate=1e6, coherence=1.0)
    k = next(k for k in range(1000) if ch.outage(k + 0.5))
    out = transfer_time(ch, 1e6, float(k), max_attempts=3)
    assert not out.success and out.retransmissions == 2 and out.duration_s == pytest.approx(3 * 0.012)


def test_fixed_rate_arq_attempts_monte_carlo():
    # coherence = half a packet: every attempt starts in a fresh block, so attempts per packet
    # are geometric with mean 1 / (1 - P_out)
    air = 12000 / 1e6
    ch = channel(8, kind="rayleigh", distance_m=600.0, rate=1e6, coherence=air / 2)
    p = ch.outage_probability()
    n = 20_000
    out = transfer_time(ch, n * 12000, 0.0, max_attempts=10**9)
    assert out.success and out.packets == n
    measured = out.attempts / n
    expected = 1 / (1 - p)
    tol = 4 * math.sqrt(p) / (1 - p) / math.sqrt(n)  # geometric: sd sqrt(p) / (1 - p) per packet
    assert abs(measured - expected) < tol, (measured, expected, tol)
    assert out.duration_s == pytest.approx(out.attempts * air, rel=1e-9)
