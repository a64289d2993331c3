"""Wireless link physics: path loss, noise, block fading, rates and outage.

Pure math on numpy, no SimPy: a medium (``netfl.sim.medium``) asks a
:class:`Channel` for its rate at a simulated instant and schedules events
from the answer, so transfer times are exact piecewise sums, never polled.

Model (block fading): the large-scale gain (path loss and one log-normal
shadowing draw per device) is fixed; the small-scale fading power gain is
constant during one coherence interval and independent across intervals.
The fading of block ``k`` comes from a counter-based generator keyed by the
channel's seed with counter ``k`` (Philox, Salmon et al., "Parallel random
numbers: as easy as 1, 2, 3", SC 2011), so ``gain(t)`` depends only on the
seed and ``floor(t / coherence_s)``: never on how often, or in which order,
the simulation asked. That keeps event logs identical across runs even when
a change elsewhere adds or removes rate queries.

Defaults and their sources:

- path loss 128.1 + 37.6 log10(d / km) dB: 3GPP TR 36.814 v9.0.0, Table
  A.2.1.1.2-3 (macro cell, 2 GHz carrier);
- thermal noise density -174 dBm/Hz: k T at T = 290 K;
- noise figure 7 dB: UE receiver value in 3GPP TR 36.814 Table A.2.1.1-3
  (9 dB is also used in the same report; 5 dB for base stations);
- shadowing: log-normal, 8 dB standard deviation for macro cells in TR 36.814
  Table A.2.1.1.2-3 (default here 0 dB: off until a topology asks);
- coherence 0.1 s: pedestrian speeds at 2 GHz (Doppler ~ 5 Hz, coherence
  ~ 0.423 / f_D ~ 85 ms, Rappaport, "Wireless Communications", eq. 5.40.c);
- packet 12000 bits: a 1500-byte Ethernet/IP MTU;
- adaptive rates at most 5.5547 bit/s/Hz (``max_spectral_efficiency``):
  LTE's highest modulation and coding, CQI 15 (64-QAM, code rate 948/1024),
  3GPP TS 36.213 Table 7.2.3-1. Shannon capacity keeps growing with the
  SNR (14.8 bit/s/Hz 40 m from a 0.1 W sender over 5 MHz, by the path loss
  above); a radio stops at its top modulation and coding. For comparison:
  256-QAM LTE tops at 7.4063 (Table 7.2.3-2 of the same), one Wi-Fi 5
  stream (IEEE 802.11ac, MCS 9, 80 MHz) at 433.3 Mbit/s, 5.4 bit/s/Hz.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from netfl.registry.device_params import ChannelSpec

MIN_DISTANCE_M = 1.0
#: Thermal noise density k T at T = 290 K, dBm/Hz (the receiver's noise figure comes on top).
THERMAL_NOISE_DBM_HZ = -174.0


# ------------------------------------------------------------------ unit math


def path_loss_db(distance_m: float) -> float:
    """3GPP TR 36.814 macro-cell path loss, 128.1 + 37.6 log10(d / 1 km) dB.

    The model is fitted for d >= 35 m; distances are clipped at 1 m only so
    that a device placed on the access point does not get an infinite gain.
    """
    d = max(float(distance_m), MIN_DISTANCE_M)
    return 128.1 + 37.6 * math.log10(d / 1000.0)


def db_to_linear(db: float) -> float:
    return 10.0 ** (db / 10.0)


def dbm_to_w(dbm: float) -> float:
    return 10.0 ** ((dbm - 30.0) / 10.0)


def noise_power_w(bandwidth_hz: float, noise_psd_dbm_hz: float = -174.0, noise_figure_db: float = 0.0) -> float:
    """Receiver noise N0 b F in watts (N0 = -174 dBm/Hz is thermal noise k T at 290 K)."""
    return dbm_to_w(noise_psd_dbm_hz + noise_figure_db) * bandwidth_hz


def shannon_rate(bandwidth_hz: float, snr_linear: float) -> float:
    """Capacity b log2(1 + SNR) in bit/s: the ideal adaptive-rate link."""
    return bandwidth_hz * math.log2(1.0 + snr_linear)


def rayleigh_outage_probability(rate_bps: float, bandwidth_hz: float, mean_snr_linear: float) -> float:
    """P[b log2(1 + SNR |h|^2) < R] with |h|^2 ~ Exp(1): 1 - exp(-(2^(R/b) - 1) / mean SNR).

    Equivalently 1 - exp(-(2^(R/b) - 1) N0 b / (p g)) with p the transmit
    power, g the large-scale gain. Used to check and to dimension fixed-rate links.
    """
    threshold = math.expm1(rate_bps / bandwidth_hz * math.log(2.0))  # 2^(R/b) - 1, accurate for small R/b
    if mean_snr_linear <= 0:
        return 1.0
    return -math.expm1(-threshold / mean_snr_linear)


# ------------------------------------------------------------------ channel


class Channel:
    """One device's wireless link to its access point (block fading, deterministic per seed).

    ``spec`` is its group's declaration (``devices[].link.channel``): the fading, transmit power, noise figure,
    coherence time and a fixed ``rate`` (a packet sent in a block whose Shannon capacity is below it is lost and
    retransmitted by ARQ in :func:`transfer_time`; the spectral-efficiency cap does not apply, the rate being the
    modulation the user chose) or, without one, adaptive modulation and coding (the Shannon capacity of each
    coherence block, capped at ``max_spectral_efficiency`` bit/s/Hz; ``math.inf``: no cap). ``distance_m`` is the
    device's own (drawn from the group's distribution), ``bandwidth_hz`` its node's band.
    """

    def __init__(
        self, spec: ChannelSpec, seed: np.random.SeedSequence | int, *, distance_m: float, bandwidth_hz: float
    ):
        if not (distance_m > 0 and bandwidth_hz > 0):
            raise ValueError(
                f"a channel needs distance_m > 0 and bandwidth_hz > 0 (got {distance_m!r}, {bandwidth_hz!r})"
            )
        self.spec = spec
        self.distance_m = distance_m
        self.bandwidth_hz = bandwidth_hz
        ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(int(seed))
        # generate_state does not advance the SeedSequence: the caller's object is left as it was.
        words = ss.generate_state(4, dtype=np.uint64)
        self._key = words[:2]  # Philox key for the fading blocks
        shadow = np.random.default_rng(words[2:]).standard_normal() if spec.shadowing_db > 0 else 0.0
        self.shadowing_db = float(spec.shadowing_db * shadow)
        self.path_loss_db = path_loss_db(distance_m) + self.shadowing_db
        self.large_scale_gain = db_to_linear(-self.path_loss_db)
        self._rx_power_w = spec.tx_power * self.large_scale_gain
        self._noise_w_per_hz = noise_power_w(1.0, THERMAL_NOISE_DBM_HZ, spec.noise_figure_db)
        self._cached_block = -1
        self._cached_gain = 1.0

    # --------------------------------------------------------------- blocks

    @property
    def fading(self) -> bool:
        return self.spec.kind != "awgn"

    def block_index(self, t: float) -> int:
        """The coherence block holding ``t``; block k is [k c, (k+1) c) with boundaries computed as k * c."""
        c = self.spec.coherence
        k = math.floor(t / c)
        if (k + 1) * c <= t:  # t / c rounded down across a boundary
            k += 1
        elif k * c > t:
            k -= 1
        return k

    def block_end(self, t: float) -> float:
        """Start of the next coherence block (inf for AWGN: its rate never changes)."""
        if not self.fading:
            return math.inf
        return (self.block_index(t) + 1) * self.spec.coherence

    def block_gain(self, k: int) -> float:
        """Fading power gain |h|^2 of block ``k`` (mean 1): a pure function of (seed, k)."""
        if not self.fading:
            return 1.0
        if k == self._cached_block:
            return self._cached_gain
        rng = np.random.Generator(np.random.Philox(key=self._key, counter=[0, k, 0, 0]))
        if self.spec.kind == "rayleigh":
            g = rng.standard_exponential()  # |h|^2 for h ~ CN(0, 1)
        else:
            kk = float(self.spec.rician_k)
            # |h|^2 = noncentral chi^2(2 dof, nonc 2K) / (2 (K + 1)): LOS power K/(K+1), scatter 1/(K+1)
            g = rng.noncentral_chisquare(2.0, 2.0 * kk) / (2.0 * (kk + 1.0))
        self._cached_block, self._cached_gain = k, float(g)
        return self._cached_gain

    # ---------------------------------------------------------------- rates

    def bandwidth(self, bandwidth_hz: float | None = None) -> float:
        """The bandwidth a transfer uses: ``bandwidth_hz`` (a share of the link's) if given, else the link's."""
        return self.bandwidth_hz if bandwidth_hz is None else bandwidth_hz

    def mean_snr(self, bandwidth_hz: float | None = None) -> float:
        """Average SNR (path loss and shadowing, no fading) over ``bandwidth_hz`` (default: the link's)."""
        return self._rx_power_w / (self._noise_w_per_hz * self.bandwidth(bandwidth_hz))

    def gain(self, t: float) -> float:
        """Small-scale fading power gain at ``t`` (Exp(1) for Rayleigh; 1 for AWGN)."""
        return self.block_gain(self.block_index(t)) if self.fading else 1.0

    def snr(self, t: float, bandwidth_hz: float | None = None) -> float:
        """Instantaneous SNR. Noise grows with the bandwidth used, so an FDMA share of b/n sees n times less noise."""
        return self.mean_snr(bandwidth_hz) * self.gain(t)

    def shannon_capacity(self, t: float, bandwidth_hz: float | None = None) -> float:
        """b log2(1 + SNR(t)): what no code can beat, and what decides a fixed-rate packet's outage."""
        b = self.bandwidth(bandwidth_hz)
        return shannon_rate(b, self.snr(t, b))

    def capacity(self, t: float, bandwidth_hz: float | None = None) -> float:
        """The adaptive link's rate at ``t``: Shannon capacity, at most ``max_spectral_efficiency`` x bandwidth."""
        b = self.bandwidth(bandwidth_hz)
        return min(shannon_rate(b, self.snr(t, b)), self.spec.max_spectral_efficiency * b)

    def outage(self, t: float, bandwidth_hz: float | None = None, rate_bps: float | None = None) -> bool:
        """Whether a fixed-rate packet sent at ``t`` is lost: Shannon capacity below the rate (the link's by
        default)."""
        rate = self.spec.rate if rate_bps is None else rate_bps
        if rate is None:
            raise ValueError("outage needs a fixed rate: set the channel's rate or pass rate_bps")
        return self.shannon_capacity(t, bandwidth_hz) < rate

    def outage_probability(self, bandwidth_hz: float | None = None, rate_bps: float | None = None) -> float:
        """Outage probability of this link: AWGN 0 or 1; Rayleigh 1 - exp(-x); Rician the non-central
        chi-square CDF (2(K+1)|h|^2 ~ chi'^2 with 2 degrees of freedom and non-centrality 2K), x being the
        fading power below which capacity falls short of the rate."""
        rate = self.spec.rate if rate_bps is None else rate_bps
        if rate is None:
            raise ValueError("outage_probability needs a fixed rate")
        b = self.bandwidth(bandwidth_hz)
        if self.spec.kind == "awgn":
            return float(shannon_rate(b, self.mean_snr(b)) < rate)
        if self.spec.kind == "rayleigh":
            return rayleigh_outage_probability(rate, b, self.mean_snr(b))
        from scipy.stats import ncx2  # imported here: scipy.stats costs every process a second and a half

        k = self.spec.rician_k
        threshold = (2.0 ** (rate / b) - 1.0) / self.mean_snr(b)
        return float(ncx2.cdf(2.0 * (k + 1.0) * threshold, 2, 2.0 * k))


# ----------------------------------------------------------- dedicated link


@dataclass(frozen=True)
class TransferOutcome:
    """What sending ``bits`` over an unshared link took.

    ``packets`` counts the packets attempted (for an adaptive link, the
    packets the bits would fill); ``retransmissions`` the extra attempts.
    ``airtime_s`` equals ``duration_s`` on a dedicated link (the radio
    stays on, ARQ retries back to back).
    """

    duration_s: float
    airtime_s: float
    packets: int
    retransmissions: int
    success: bool

    @property
    def attempts(self) -> int:
        return self.packets + self.retransmissions


def _starts_before(t: float, step: float, end: float, limit: int) -> int:
    """How many of t, t + step, t + 2 step, ... (at most ``limit``) are < ``end``."""
    if math.isinf(end):
        return limit
    if t >= end:
        return 0
    n = math.ceil((end - t) / step)
    while n > 0 and t + (n - 1) * step >= end:  # guard the float division both ways
        n -= 1
    while t + n * step < end:
        n += 1
    return min(n, limit)


def transfer_time(
    channel: Channel, bits: float, start_t: float, bandwidth_hz: float | None = None, max_attempts: int = 8
) -> TransferOutcome:
    """Exact time to push ``bits`` through ``channel`` alone, starting at ``start_t``.

    Adaptive rate (no ``rate``): bits flow at capacity(t), integrated
    block by block. Fixed rate: packets of ``packet_size`` (the last one
    shorter) at ``rate``; a packet whose *start* falls in an outage block
    is lost and resent at once (stop-and-wait ARQ without ACK delay, the
    block assumed much longer than a packet); after ``max_attempts`` losses
    of one packet the transfer fails. Work is O(blocks), not O(packets):
    the outage state is constant within a block.
    """
    p = channel.spec
    b = channel.bandwidth(bandwidth_hz)
    if bits <= 0:
        return TransferOutcome(0.0, 0.0, 0, 0, True)
    n_packets = math.ceil(bits / p.packet_bits)
    t = float(start_t)

    if p.rate is None:
        remaining = float(bits)
        elapsed = 0.0  # summed per segment, so an AWGN transfer takes exactly bits / capacity
        while True:
            rate = channel.capacity(t, b)
            end = channel.block_end(t)
            if rate > 0 and (math.isinf(end) or rate * (end - t) >= remaining):
                elapsed += remaining / rate
                break
            if math.isinf(end):
                raise ValueError(f"link capacity is 0 (tx power {p.tx_power} W): the transfer never ends")
            remaining -= rate * (end - t)
            elapsed += end - t
            t = end
        return TransferOutcome(elapsed, elapsed, n_packets, 0, True)

    rate = p.rate
    full_air = p.packet_bits / rate
    last_bits = bits - (n_packets - 1) * p.packet_bits
    last_air = last_bits / rate
    sent = 0  # packets delivered
    tries = 0  # failed attempts of the current packet
    attempts = 0  # all attempts, successful or not
    elapsed = 0.0
    while sent < n_packets:
        end = channel.block_end(t)
        air = full_air if sent < n_packets - 1 else last_air
        if channel.outage(t, b, rate):
            # every attempt starting in this block fails (AWGN below the rate: all of them)
            fails = min(_starts_before(t, air, end, max_attempts), max_attempts - tries)
            t += fails * air
            elapsed += fails * air
            tries += fails
            attempts += fails
            if tries >= max_attempts:
                return TransferOutcome(elapsed, elapsed, sent + 1, attempts - (sent + 1), False)
            continue
        # not in outage: every packet starting in this block gets through
        tries = 0
        n_full = _starts_before(t, full_air, end, max(0, n_packets - 1 - sent))
        t += n_full * full_air
        elapsed += n_full * full_air
        sent += n_full
        attempts += n_full
        if sent == n_packets - 1 and t < end:
            t += last_air
            elapsed += last_air
            sent += 1
            attempts += 1
    return TransferOutcome(elapsed, elapsed, n_packets, attempts - n_packets, True)
