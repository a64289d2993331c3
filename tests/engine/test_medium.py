"""Media against hand-computed schedules (AWGN links: constant rates) and
slotted ALOHA against its closed-form throughput. Monte Carlo tolerances are
4 standard errors at the stated number of slots."""

import math

import numpy as np
import pytest
import simpy
from engine_support import channel

from netfl.registry.network_params import MediumSpec
from netfl.sim.channel import Channel
from netfl.sim.medium import MEDIA, Medium, SlottedAlohaMedium, TxReport

B = 1e6  # access point band, Hz


class Radio:
    """Stands in for the device: accumulates on-air time, refuses to be switched on twice."""

    def __init__(self, env: simpy.Environment):
        self.env = env
        self.since: float | None = None
        self.airtime = 0.0
        self.ons = 0

    def on(self) -> None:
        assert self.since is None, "radio switched on twice"
        self.since = self.env.now
        self.ons += 1

    def off(self) -> None:
        if self.since is not None:
            self.airtime += self.env.now - self.since
            self.since = None

    @property
    def is_on(self) -> bool:
        return self.since is not None


def medium(kind: str, env: simpy.Environment, *, log=None, rng=None, q_min=None, **fields) -> Medium:
    """The medium of ``kind`` over the band B, built from its declaration (slotted ALOHA at 1 Mbit/s unless
    ``rate`` is given)."""
    if kind == "slotted_aloha":
        fields.setdefault("rate", 1e6)
    spec = MediumSpec(kind=kind, bandwidth=B, **fields)
    return MEDIA[kind](env, spec, log=log, rng=rng, **({} if q_min is None else {"q_min": q_min}))


def awgn(distance_m: float = 100.0, seed: int = 0, **kw) -> Channel:
    return channel(seed, kind="awgn", distance_m=distance_m, bandwidth_hz=B, **kw)


def send(env, medium, sender, channel, bits, radio, results, delay=0.0):
    """A device's upload in miniature: records (finish time, report) or the interrupt."""
    if delay:
        yield env.timeout(delay)
    try:
        report = yield from medium.transmit(sender, channel, bits, radio)
        results[sender] = (env.now, report)
    except simpy.Interrupt as i:
        results[sender] = ("interrupted", env.now, i.cause)


def test_registry_and_errors():
    assert set(MEDIA) == {"dedicated", "fdma", "tdma", "slotted_aloha"}
    env = simpy.Environment()
    with pytest.raises(ValueError, match="rng"):
        MEDIA["slotted_aloha"](env, MediumSpec(kind="slotted_aloha", rate=1e6))
    with pytest.raises(ValueError, match="a tdma medium is built from a declaration of kind tdma, not fdma"):
        MEDIA["tdma"](env, MediumSpec(kind="fdma"))
    with pytest.raises(ValueError, match="q_min <= q"):
        medium("slotted_aloha", env, q=1 / 2048, q_min=1 / 1024, rng=np.random.default_rng(0))


def test_the_backoff_floor_is_q_over_1024_whatever_q():
    """The declaration's rule (halved down to q/1024): a q below 1/1024 is accepted by the schema and runs."""
    for q in (0.5, 1 / 4096):
        aloha = medium(
            "slotted_aloha", simpy.Environment(), q=q, backoff="binary_exponential", rng=np.random.default_rng(0)
        )
        assert aloha.q_min == q / 1024


# ------------------------------------------------------------ dedicated


def test_dedicated_is_transfer_time_and_radio_follows_airtime():
    env = simpy.Environment()
    log = []
    m = medium("dedicated", env, log=lambda s, k, d="", **fields: log.append((s, k, fields)))
    ch, r, res = awgn(), Radio(env), {}
    bits = 8e6
    env.process(send(env, m, 0, ch, bits, r, res, delay=1.0))
    env.process(send(env, m, 1, ch, bits, Radio(env), res, delay=1.0))  # no sharing: same finish
    env.run()
    T = bits / ch.capacity(0.0, B)
    t0, rep = res[0]
    assert t0 == pytest.approx(1.0 + T, rel=1e-12) and res[1][0] == t0
    assert rep.duration_s == T and rep.airtime_s == T and rep.success and rep.collisions == 0
    assert r.airtime == pytest.approx(T, rel=1e-12) and not r.is_on
    assert [k for _, k, _ in log] == ["tx_start", "tx_start", "tx_end", "tx_end"]
    assert [f["bytes"] for _, _, f in log] == [bits / 8] * 4 and log[-1][2]["airtime_s"] == T


# ------------------------------------------------------------ tdma


def test_tdma_fifo_finishes_at_T_2T_3T():
    env = simpy.Environment()
    m = medium("tdma", env)
    ch, bits, res = awgn(), 4e6, {}
    radios = [Radio(env) for _ in range(3)]
    for i in range(3):
        env.process(send(env, m, i, ch, bits, radios[i], res))
    env.run()
    T = bits / ch.capacity(0.0, B)
    for i in range(3):
        t, rep = res[i]
        assert t == pytest.approx((i + 1) * T, rel=1e-12)
        assert rep.duration_s == pytest.approx((i + 1) * T, rel=1e-12)
        assert rep.airtime_s == T and radios[i].airtime == pytest.approx(T, rel=1e-12)  # not on while queued


def test_tdma_interrupts_free_the_slot_and_the_queue():
    env = simpy.Environment()
    m = medium("tdma", env)
    ch, bits, res = awgn(), 4e6, {}
    T = bits / ch.capacity(0.0, B)
    radios = [Radio(env) for _ in range(3)]
    procs = [env.process(send(env, m, i, ch, bits, radios[i], res)) for i in range(3)]

    def kill():
        yield env.timeout(T / 2)
        procs[1].interrupt("offline")  # queued: leaves the queue, radio never on
        procs[0].interrupt("battery_empty")  # on air: radio off, slot released

    env.process(kill())
    env.run()
    assert res[0] == ("interrupted", T / 2, "battery_empty") and res[1][0] == "interrupted"
    assert radios[0].airtime == pytest.approx(T / 2) and not radios[0].is_on
    assert radios[1].ons == 0
    assert res[2][0] == pytest.approx(T / 2 + T, rel=1e-12)  # the third starts at once
    assert m.queue_length == 0


# ------------------------------------------------------------ fdma


def test_fdma_two_equal_senders_get_half_band_capacity():
    env = simpy.Environment()
    m = medium("fdma", env)
    ch, bits, res = awgn(300.0, max_spectral_efficiency=math.inf), 4e6, {}  # Shannon's gain from less noise
    radios = [Radio(env), Radio(env)]
    for i in range(2):
        env.process(send(env, m, i, ch, bits, radios[i], res))
    env.run()
    c_half = ch.capacity(0.0, B / 2)  # (b/2) log2(1 + 2 snr): half the band, half the noise
    assert c_half > ch.capacity(0.0, B) / 2
    for i in range(2):
        assert res[i][0] == pytest.approx(bits / c_half, rel=1e-12)
        assert radios[i].airtime == pytest.approx(bits / c_half, rel=1e-12)
    assert m.active == 0


def test_fdma_late_joiner_slows_the_first_by_hand():
    env = simpy.Environment()
    m = medium("fdma", env)
    a, b = awgn(200.0), awgn(400.0)
    bits_a, bits_b, t1 = 6e6, 3e6, 0.2
    res = {}
    env.process(send(env, m, 0, a, bits_a, Radio(env), res))
    env.process(send(env, m, 1, b, bits_b, Radio(env), res, delay=t1))
    env.run()
    ca_full, ca_half = a.capacity(0, B), a.capacity(0, B / 2)
    cb_full, cb_half = b.capacity(0, B), b.capacity(0, B / 2)
    left_a = bits_a - ca_full * t1  # A alone until t1
    left_b = bits_b
    # both at half band from t1: whoever empties first leaves, the other gets the full band
    da, db = left_a / ca_half, left_b / cb_half
    if da < db:
        ta = t1 + da
        tb = ta + (left_b - cb_half * da) / cb_full
    else:
        tb = t1 + db
        ta = tb + (left_a - ca_half * db) / ca_full
    assert res[0][0] == pytest.approx(ta, rel=1e-12)
    assert res[1][0] == pytest.approx(tb, rel=1e-12)


def test_fdma_single_fading_sender_matches_dedicated():
    from netfl.sim.channel import transfer_time

    ch = channel(5, kind="rayleigh", distance_m=400.0, coherence=0.05, bandwidth_hz=B)
    env = simpy.Environment()
    m = medium("fdma", env)
    res = {}
    env.process(send(env, m, 0, ch, 4e6, Radio(env), res, delay=0.237))
    env.run()
    expected = transfer_time(ch, 4e6, 0.237, B).duration_s
    assert expected > 0.5  # many block boundaries crossed
    assert res[0][1].duration_s == pytest.approx(expected, rel=1e-9)


def test_fdma_interrupt_returns_the_band():
    env = simpy.Environment()
    m = medium("fdma", env)
    ch, bits, res = awgn(300.0), 4e6, {}
    ra, rb = Radio(env), Radio(env)
    pa = env.process(send(env, m, 0, ch, bits, ra, res))
    env.process(send(env, m, 1, ch, bits, rb, res))
    t1 = 0.1

    def kill():
        yield env.timeout(t1)
        pa.interrupt("offline")

    env.process(kill())
    env.run()
    c_half, c_full = ch.capacity(0, B / 2), ch.capacity(0, B)
    assert res[0] == ("interrupted", t1, "offline") and not ra.is_on and ra.airtime == pytest.approx(t1)
    assert res[1][0] == pytest.approx(t1 + (bits - c_half * t1) / c_full, rel=1e-12)


def test_fdma_fixed_rate_in_outage_alone_fails():
    env = simpy.Environment()
    m = medium("fdma", env)
    res = {}
    env.process(send(env, m, 0, awgn(5000.0, rate=2e6), 1e6, Radio(env), res))
    env.run()
    assert res[0][0] == 0.0 and not res[0][1].success


# ------------------------------------------------------------ slotted ALOHA


def saturate(n: int, q: float, slots: int, seed: int = 1, **kw):
    """n senders with endless backlogs over ``slots`` slots; high-SNR AWGN links (no outage)."""
    env = simpy.Environment()
    collisions = []
    m = medium(
        "slotted_aloha",
        env,
        q=q,
        rng=np.random.default_rng(seed),
        log=lambda s, k, d, **fields: collisions.append(s) if k == "collision" else None,
        **kw,
    )
    radios = [Radio(env) for _ in range(n)]
    for i in range(n):
        env.process(m.transmit(i, awgn(10.0, seed=i), 1e15, radios[i]))
    env.run(until=(slots + 0.5) * m.slot_s)  # slot ends at (k+1) s: exactly `slots` slots resolved
    return m, radios, collisions


@pytest.mark.parametrize("n, q", [(10, 0.1), (100, 0.01)])
def test_aloha_saturated_throughput(n, q):
    slots = 20_000
    m, radios, collisions = saturate(n, q, slots)
    p_success = n * q * (1 - q) ** (n - 1)  # exactly one of n transmits
    p_idle = (1 - q) ** n
    se = lambda p: 4 * math.sqrt(p * (1 - p) / slots)  # slots are independent trials  # noqa: E731
    s = m.stats
    assert abs(s.successes / slots - p_success) < se(p_success), (s.successes / slots, p_success)
    assert abs(s.collisions / slots - (1 - p_idle - p_success)) < se(1 - p_idle - p_success)
    assert s.busy_slots == s.successes + s.collisions and s.outages == 0
    # every transmission turns a radio on for one slot, collided ones included: n q per slot
    on_air = sum(r.airtime for r in radios) / (slots * m.slot_s)
    assert abs(on_air - n * q) < 4 * math.sqrt(n * q * (1 - q) / slots)
    assert len(collisions) > 2 * s.collisions - 1  # one line per collided sender, >= 2 per slot
    if n == 100:  # Poisson limit G e^-G with G = n q = 1: 1/e, off the exact value by 0.0018
        G = n * q
        assert abs(s.successes / slots - G * math.exp(-G)) < se(p_success) + abs(p_success - G * math.exp(-G))


def test_aloha_single_sender_exact_accounting():
    env = simpy.Environment()
    m = medium("slotted_aloha", env, q=0.25, rng=np.random.default_rng(3))
    r, res = Radio(env), {}
    env.process(send(env, m, 0, awgn(10.0), 10 * 12000 - 5, r, res, delay=0.005))  # 10 packets, mid-slot start
    env.run()
    t, rep = res[0]
    assert rep.attempts == 10 and rep.collisions == 0 and rep.retransmissions == 0 and rep.success
    assert rep.airtime_s == pytest.approx(10 * m.slot_s) and r.airtime == pytest.approx(10 * m.slot_s)
    k = round(t / m.slot_s)
    assert t == pytest.approx(k * m.slot_s) and k > 10  # ends on the slot grid; q < 1 leaves idle slots
    assert rep.duration_s == pytest.approx(t - 0.005)


def test_aloha_deterministic_per_seed():
    def run(seed):
        env = simpy.Environment()
        m = medium("slotted_aloha", env, q=0.3, rng=np.random.default_rng(seed))
        res = {}
        for i in range(4):
            env.process(send(env, m, i, awgn(10.0, seed=i), 20 * 12000, Radio(env), res, delay=0.001 * i))
        env.run()
        return [(res[i][0], res[i][1].collisions) for i in range(4)]

    assert run(5) == run(5) != run(6)


def test_aloha_binary_exponential_backoff_beats_greedy_q():
    slots = 5000
    fixed, _, _ = saturate(10, 0.5, slots)  # 10 * 0.5^10 ~ 0.0098 per slot
    beb, _, _ = saturate(10, 0.5, slots, backoff="binary_exponential", q_min=1 / 64)
    assert fixed.stats.successes / slots < 0.02 < 0.2 < beb.stats.successes / slots


def test_aloha_interrupt_mid_slot_and_others_carry_on():
    env = simpy.Environment()
    m: SlottedAlohaMedium = medium("slotted_aloha", env, q=1.0, rng=np.random.default_rng(0))
    ra, rb, res = Radio(env), Radio(env), {}
    pa = env.process(send(env, m, 0, awgn(10.0), 50 * 12000, ra, res))

    def kill():
        yield env.timeout(2.5 * m.slot_s)  # alone with q = 1: on air in every slot
        assert ra.is_on
        pa.interrupt("offline")  # delivered as an event at the same instant
        yield env.timeout(0)
        assert not ra.is_on

    env.process(kill())
    env.process(send(env, m, 1, awgn(10.0), 3 * 12000, rb, res, delay=10 * m.slot_s))
    env.run()
    assert res[0][0] == "interrupted" and ra.airtime == pytest.approx(2.5 * m.slot_s)
    t, rep = res[1]
    assert rep.success and rep.collisions == 0 and t == pytest.approx(13 * m.slot_s)  # q = 1: slots 10, 11, 12
    assert m.backlogged == 0 and m._proc is None  # no process left ticking


def test_aloha_outage_is_lost_and_retried():
    env = simpy.Environment()
    m = medium("slotted_aloha", env, q=1.0, rate=2e6, rng=np.random.default_rng(0), max_attempts=4)
    res = {}
    env.process(send(env, m, 0, awgn(5000.0), 12000, Radio(env), res))  # far: capacity < 2 Mbit/s
    env.run()
    rep: TxReport = res[0][1]
    assert not rep.success and rep.attempts == 4 and rep.retransmissions == 3 and m.stats.outages == 4
