"""Medium access: how devices attached to one access point share its band.

A device's task calls ``report = yield from medium.transmit(sender, channel,
bits, radio)``; the medium decides when the bits are through, turns the
sender's radio on only while it is on the air (so energy follows airtime,
not waiting), and returns a :class:`TxReport`. Kinds (``MEDIA``):

- ``dedicated``: no contention, each sender has the whole band;
- ``fdma``: n concurrent senders get b/n each (processor sharing, exact);
- ``tdma``: one sender at a time with the whole band, first come first served;
- ``slotted_aloha``: random access on a common slot grid, collisions lose
  every packet in the slot (Roberts 1975; throughput N q (1-q)^(N-1)).

A ``simpy.Interrupt`` thrown into the sender (device offline or battery
empty) leaves every queue, turns the radio off and is re-raised, so the
medium stays usable by the others. Log lines (optional) are per
transmission (``tx_start`` when the sender asks for the medium, queueing
included; ``tx_end``, also on abort; ``retransmission`` with a count when
there were any) plus one ``collision`` line per collided sender and slot.
"""

from __future__ import annotations

import math
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np
import simpy

from netfl.registry import implementations
from netfl.registry.choices import AlohaBackoff, values
from netfl.registry.media import MEDIUM_KINDS
from netfl.sim.channel import Channel, transfer_time

LogFn = Callable[..., None]  # (device, kind, detail="", **typed columns), as EventRecorder.log after time and round


@dataclass
class TxReport:
    """What one transmission cost.

    ``duration_s`` runs from the call to the end (queueing included);
    ``airtime_s`` is the time the radio was on; ``attempts`` counts packet
    transmissions (packets + retransmissions; an adaptive-rate transfer counts
    the packets its bits fill).
    """

    airtime_s: float
    duration_s: float
    attempts: int
    collisions: int
    retransmissions: int
    success: bool


class RadioHooks(Protocol):
    """The sender's radio: the device switches its transmit load (energy) on and off."""

    def on(self) -> None: ...

    def off(self) -> None: ...


class Medium(ABC):
    """Access points' shared band. ``bandwidth_hz=None``: each sender uses its channel's own bandwidth."""

    kind: ClassVar[str] = ""

    def __init__(
        self,
        env: simpy.Environment,
        *,
        bandwidth_hz: float | None = None,
        log: LogFn | None = None,
        rng: np.random.Generator | None = None,
    ):
        if bandwidth_hz is not None and not bandwidth_hz > 0:
            raise ValueError(f"{self.kind} medium: bandwidth_hz must be > 0, got {bandwidth_hz!r}")
        self.env = env
        self.bandwidth_hz = bandwidth_hz
        self._log = log
        self.rng = rng
        # totals of what the log lines report, aborted transmissions included (their reports are never returned)
        self.collisions = 0
        self.retransmissions = 0

    @abstractmethod
    def transmit(
        self, sender: int, channel: Channel, bits: float, radio: RadioHooks
    ) -> Generator[simpy.Event, Any, TxReport]:
        """Send ``bits`` from ``sender``; use as ``report = yield from medium.transmit(...)``."""

    # ------------------------------------------------------------- logging

    def log(self, sender: int, kind: str, detail: str = "", **fields: Any) -> None:
        if self._log is not None:
            self._log(sender, kind, detail, **fields)

    def _log_start(self, sender: int, bits: float) -> None:
        self.log(sender, "tx_start", bytes=bits / 8, medium=self.kind)

    def _log_retransmissions(self, sender: int, count: int) -> None:
        if count:
            self.retransmissions += count
            self.log(sender, "retransmission", retransmissions=count)

    def _log_end(self, sender: int, bits: float, r: TxReport, radio: RadioHooks) -> None:
        self._log_retransmissions(sender, r.retransmissions)
        self.log(
            sender,
            "tx_end",
            bytes=bits / 8,
            airtime_s=r.airtime_s,
            attempts=r.attempts,
            energy_j=_energy(radio, r.airtime_s),
            collisions=r.collisions,
            success=int(r.success),
        )

    def _log_abort(self, sender: int, start: float, interrupt: simpy.Interrupt, retransmissions: int = 0) -> None:
        self._log_retransmissions(sender, retransmissions)
        self.log(sender, "tx_end", f"aborted after={self.env.now - start:.6g}", cause=interrupt.cause)


def _energy(radio: RadioHooks, airtime_s: float) -> float | None:
    """The transmitter's energy over ``airtime_s`` for the log, when the radio says its power (the device's does)."""
    watts = getattr(radio, "watts", None)
    return None if watts is None else watts * airtime_s


def _empty_report() -> TxReport:
    return TxReport(0.0, 0.0, 0, 0, 0, True)


# --------------------------------------------------------------- dedicated


class DedicatedMedium(Medium):
    """No sharing: every sender has the whole band (a wired port, or a cell far from saturation)."""

    kind = "dedicated"

    def __init__(self, env: simpy.Environment, *, max_attempts: int = 8, **kw: Any):
        super().__init__(env, **kw)
        self.max_attempts = max_attempts

    def transmit(self, sender, channel, bits, radio):
        if bits <= 0:
            return _empty_report()
        start = self.env.now
        out = transfer_time(channel, bits, start, self.bandwidth_hz, self.max_attempts)
        self._log_start(sender, bits)
        radio.on()
        try:
            yield self.env.timeout(out.duration_s)
        except simpy.Interrupt as interrupt:
            radio.off()
            self._log_abort(sender, start, interrupt)
            raise
        radio.off()
        report = TxReport(out.airtime_s, out.duration_s, out.attempts, 0, out.retransmissions, out.success)
        self._log_end(sender, bits, report, radio)
        return report


# -------------------------------------------------------------------- tdma


class TdmaMedium(Medium):
    """One sender at a time with the whole band, FIFO; the radio is off while queued."""

    kind = "tdma"

    def __init__(self, env: simpy.Environment, *, max_attempts: int = 8, **kw: Any):
        super().__init__(env, **kw)
        self.max_attempts = max_attempts
        self._slot = simpy.Resource(env, capacity=1)

    @property
    def queue_length(self) -> int:
        return len(self._slot.queue)

    def transmit(self, sender, channel, bits, radio):
        if bits <= 0:
            return _empty_report()
        start = self.env.now
        self._log_start(sender, bits)
        on = False
        try:
            with self._slot.request() as turn:  # leaving the block cancels or releases the turn
                yield turn
                out = transfer_time(channel, bits, self.env.now, self.bandwidth_hz, self.max_attempts)
                radio.on()
                on = True
                yield self.env.timeout(out.duration_s)
                radio.off()
                on = False
        except simpy.Interrupt as interrupt:
            if on:
                radio.off()
            self._log_abort(sender, start, interrupt)
            raise
        report = TxReport(out.airtime_s, self.env.now - start, out.attempts, 0, out.retransmissions, out.success)
        self._log_end(sender, bits, report, radio)
        return report


# -------------------------------------------------------------------- fdma


@dataclass(eq=False)
class _Flow:
    sender: int
    channel: Channel
    bits: float
    start: float
    done: simpy.Event
    remaining: float
    rate: float = 0.0  # goodput now, bit/s
    finish: float = math.inf
    lost_bits: float = 0.0  # fixed-rate links: bits sent during outage blocks (fluid ARQ)
    failed: bool = False


class FdmaMedium(Medium):
    """Equal bandwidth shares, b/n each for n concurrent senders (processor sharing).

    Exact: on every join, leave and coherence-block boundary of an active
    sender, one manager process brings every sender's remaining bits up to
    the present at its old rate, recomputes rates as capacity(t, b/n) (each
    share also sees n times less noise) and sleeps until the next
    completion or boundary. A fixed-rate channel sends at ``rate_bps`` and
    gets nothing through in blocks where its share is in outage (fluid ARQ,
    no attempt limit); one that can never get through alone fails.
    """

    kind = "fdma"

    def __init__(self, env: simpy.Environment, **kw: Any):
        super().__init__(env, **kw)
        self._flows: list[_Flow] = []
        self._t = env.now
        self._wake: simpy.Event | None = None
        self._proc: simpy.Process | None = None

    @property
    def active(self) -> int:
        return len(self._flows)

    def _share(self, flow: _Flow) -> float:
        total = flow.channel.bandwidth_hz if self.bandwidth_hz is None else self.bandwidth_hz
        return total / len(self._flows)

    def _goodput(self, flow: _Flow, now: float) -> float:
        b = self._share(flow)
        fixed = flow.channel.spec.rate
        if fixed is None:
            return flow.channel.capacity(now, b)
        return 0.0 if flow.channel.outage(now, b, fixed) else fixed

    def _advance(self) -> None:
        now = self.env.now
        dt = now - self._t
        if dt > 0:
            for f in self._flows:
                f.remaining = max(0.0, f.remaining - f.rate * dt)
                fixed = f.channel.spec.rate
                if fixed is not None and f.rate == 0.0:
                    f.lost_bits += fixed * dt
        self._t = now

    def _reschedule(self) -> None:
        """Recompute rates and completion times at the present; wake the manager."""
        now = self.env.now
        for f in self._flows:
            f.rate = self._goodput(f, now)
            f.finish = now + f.remaining / f.rate if f.rate > 0 else math.inf
        if len(self._flows) == 1:
            f = self._flows[0]
            if f.rate == 0 and math.isinf(f.channel.block_end(now)):  # alone, in outage forever
                f.failed = True
                f.finish = now
        if self._flows and self._proc is None:
            self._proc = self.env.process(self._manage())
        if self._wake is not None and not self._wake.triggered:
            self._wake.succeed()

    def _manage(self):
        env = self.env
        while self._flows:
            now = env.now
            nxt = min(min(f.finish for f in self._flows), min(f.channel.block_end(now) for f in self._flows))
            self._wake = env.event()
            events = [self._wake]
            if not math.isinf(nxt):
                events.append(env.timeout(max(0.0, nxt - now)))
            yield env.any_of(events)
            self._wake = None
            self._advance()
            now = env.now
            tol = 1e-12 * max(1.0, abs(now))  # now = t + (finish - t) may miss finish by an ulp
            for f in [f for f in self._flows if f.finish <= now + tol]:
                f.remaining = 0.0 if not f.failed else f.remaining
                self._flows.remove(f)
                f.done.succeed()
            self._reschedule()
        self._proc = None

    def transmit(self, sender, channel, bits, radio):
        if bits <= 0:
            return _empty_report()
        env = self.env
        flow = _Flow(sender, channel, float(bits), env.now, env.event(), float(bits))
        self._advance()
        self._flows.append(flow)
        self._reschedule()
        self._log_start(sender, bits)
        radio.on()
        try:
            yield flow.done
        except simpy.Interrupt as interrupt:
            if flow in self._flows:
                self._advance()
                self._flows.remove(flow)
                self._reschedule()
            radio.off()
            self._log_abort(sender, flow.start, interrupt, round(flow.lost_bits / channel.spec.packet_bits))
            raise
        radio.off()
        duration = env.now - flow.start
        packets = math.ceil(bits / channel.spec.packet_bits)
        retx = round(flow.lost_bits / channel.spec.packet_bits)
        report = TxReport(duration, duration, packets + retx, 0, retx, not flow.failed)
        self._log_end(sender, bits, report, radio)
        return report


# ----------------------------------------------------------- slotted ALOHA


@dataclass(eq=False)
class _Station:
    sender: int
    channel: Channel
    radio: RadioHooks
    bits: float
    packets_left: int
    q: float
    start: float
    done: simpy.Event
    attempts: int = 0
    tries: int = 0  # attempts of the current packet
    collisions: int = 0
    delivered: int = 0
    on_air: bool = False
    left: bool = False
    success: bool = True


@dataclass
class AlohaStats:
    """Slot outcomes since the medium was built (idle slots are the rest of the elapsed slots)."""

    busy_slots: int = 0
    successes: int = 0
    collisions: int = 0
    outages: int = 0  # a lone sender whose channel could not carry the slot's rate


class SlottedAlohaMedium(Medium):
    """q-persistent slotted ALOHA on a global slot grid (slot k is [k s, (k+1) s), s = packet_bits / rate_bps).

    In every slot each backlogged sender transmits one packet with
    probability q (its own, under ``backoff="binary_exponential"``: halved
    after a collision down to ``q_min``, reset after a success). One
    transmitter whose channel is not in outage at ``rate_bps`` delivers its
    packet; two or more collide and all are lost (their radios were on: the
    energy counts). Contenders are the senders backlogged at the slot's start.

    One process for the whole medium, none while nobody is backlogged, and
    one timeout per *busy* slot: the number of idle slots before the next
    busy one is geometric with parameter 1 - prod(1 - q_i), so it is drawn
    at once and the transmitter set is drawn conditioned on being non-empty
    (exact in distribution; a join or leave during the wait redraws, which
    memorylessness makes exact as well). Defaults: 1 Mbit/s, 1500-byte
    packets (12 ms slots), q = 0.1 (1/q = 10 expected contenders, where
    q = 1/N maximises throughput at (1 - 1/N)^(N-1) -> 1/e).
    """

    kind = "slotted_aloha"

    def __init__(
        self,
        env: simpy.Environment,
        *,
        rate_bps: float = 1e6,
        packet_bits: int = 12000,
        q: float = 0.1,
        backoff: str | dict | None = None,
        q_min: float = 1.0 / 1024,
        max_attempts: int | None = None,
        **kw: Any,
    ):
        super().__init__(env, **kw)
        if self.rng is None:
            raise ValueError("slotted_aloha medium needs rng (a seeded numpy Generator)")
        if isinstance(backoff, dict):
            backoff = dict(backoff)
            kind = backoff.pop("kind", None)
            q_min = backoff.pop("q_min", q_min)
            if backoff:
                raise ValueError(f"slotted_aloha backoff: unknown fields {sorted(backoff)}; accepted: kind, q_min")
            backoff = kind
        if backoff not in (None, *values(AlohaBackoff)):
            raise ValueError(f"slotted_aloha backoff {backoff!r}: expected none or binary_exponential")
        if not 0 < q <= 1 or not 0 < q_min <= q:
            raise ValueError(f"slotted_aloha needs 0 < q_min <= q <= 1, got q={q!r}, q_min={q_min!r}")
        if not rate_bps > 0 or not packet_bits > 0:
            raise ValueError("slotted_aloha rate_bps and packet_bits must be > 0")
        self.rate_bps = float(rate_bps)
        self.packet_bits = int(packet_bits)
        self.slot_s = self.packet_bits / self.rate_bps
        self.q = float(q)
        self.q_min = float(q_min)
        self.beb = backoff == "binary_exponential"
        self.max_attempts = max_attempts
        self.stats = AlohaStats()
        self._stations: list[_Station] = []
        self._wake: simpy.Event | None = None
        self._proc: simpy.Process | None = None

    @property
    def backlogged(self) -> int:
        return len(self._stations)

    def _next_slot(self, t: float) -> int:
        """Index of the first slot starting at or after ``t``."""
        k = math.ceil(t / self.slot_s)
        while k > 0 and (k - 1) * self.slot_s >= t:
            k -= 1
        while k * self.slot_s < t:
            k += 1
        return k

    def _poke(self) -> None:
        if self._stations and self._proc is None:
            self._proc = self.env.process(self._run())
        if self._wake is not None and not self._wake.triggered:
            self._wake.succeed()

    def _draw_transmitters(self, stations: list[_Station], qs: np.ndarray, p_idle: float) -> list[_Station]:
        """Bernoulli(q_i) transmitters conditioned on at least one: the first by its exact law, the rest freely."""
        before = np.concatenate(([1.0], np.cumprod(1.0 - qs)[:-1]))  # P(nobody before i transmits)
        first_law = np.cumsum(qs * before)
        u = self.rng.random() * (1.0 - p_idle)
        i = min(int(np.searchsorted(first_law, u, side="right")), len(stations) - 1)
        rest = self.rng.random(len(stations) - i - 1) < qs[i + 1 :]
        return [stations[i]] + [s for s, x in zip(stations[i + 1 :], rest) if x]

    def _run(self):
        env = self.env
        while self._stations:
            now = env.now
            stations = list(self._stations)
            qs = np.fromiter((s.q for s in stations), float, len(stations))
            p_idle = float(np.prod(1.0 - qs))
            idle = int(self.rng.geometric(1.0 - p_idle)) - 1 if p_idle < 1.0 else 0
            k = self._next_slot(now) + idle
            wait = k * self.slot_s - now
            if wait > 0:
                self._wake = env.event()
                yield env.any_of([self._wake, env.timeout(wait)])
                woken = self._wake.triggered
                self._wake = None
                if woken:  # someone joined or left: redraw from the next slot
                    continue
            tx = self._draw_transmitters(stations, qs, p_idle)
            for s in tx:
                s.on_air = True
                s.attempts += 1
                s.tries += 1
                s.radio.on()
            yield env.timeout((k + 1) * self.slot_s - env.now)
            for s in tx:
                if s.on_air:
                    s.on_air = False
                    s.radio.off()
            self._resolve(k, tx)
        self._proc = None

    def _resolve(self, k: int, tx: list[_Station]) -> None:
        self.stats.busy_slots += 1
        if len(tx) == 1:
            s = tx[0]
            if s.left:
                return
            b = s.channel.bandwidth_hz if self.bandwidth_hz is None else self.bandwidth_hz
            if s.channel.outage(k * self.slot_s, b, self.rate_bps):
                self.stats.outages += 1
                self._lost(s)
                return
            self.stats.successes += 1
            s.delivered += 1
            s.packets_left -= 1
            s.tries = 0
            s.q = self.q
            if s.packets_left == 0:
                self._finish(s)
            return
        self.stats.collisions += 1
        for s in tx:
            s.collisions += 1
            if s.left:
                continue
            self.collisions += 1
            packet = min(self.packet_bits, s.bits - s.delivered * self.packet_bits)  # the last one may be short
            self.log(
                s.sender,
                "collision",
                bytes=packet / 8,
                energy_j=_energy(s.radio, self.slot_s),
                slot=k,
                others=len(tx) - 1,
            )
            if self.beb:
                s.q = max(self.q_min, s.q / 2.0)
            self._lost(s)

    def _lost(self, s: _Station) -> None:
        if self.max_attempts is not None and s.tries >= self.max_attempts:
            s.success = False
            self._finish(s)

    def _finish(self, s: _Station) -> None:
        self._stations.remove(s)
        s.done.succeed()

    def transmit(self, sender, channel, bits, radio):
        if bits <= 0:
            return _empty_report()
        env = self.env
        s = _Station(
            sender, channel, radio, float(bits), math.ceil(bits / self.packet_bits), self.q, env.now, env.event()
        )
        self._stations.append(s)
        self._log_start(sender, bits)
        self._poke()
        try:
            yield s.done
        except simpy.Interrupt as interrupt:
            s.left = True
            if s in self._stations:
                self._stations.remove(s)
            if s.on_air:
                s.on_air = False
                radio.off()
            self._poke()
            self._log_abort(sender, s.start, interrupt, s.attempts - s.delivered - (1 if s.tries else 0))
            raise
        packets_tried = s.delivered + (0 if s.success else 1)
        report = TxReport(
            s.attempts * self.slot_s, env.now - s.start, s.attempts, s.collisions, s.attempts - packets_tried, s.success
        )
        self._log_end(sender, bits, report, radio)
        return report


#: Each medium of the registry (netfl.registry.media.MEDIUM_KINDS), in its order: the class of this module that
#: names it as its ``kind``.
MEDIA: dict[str, type[Medium]] = implementations(Medium, MEDIUM_KINDS, [sys.modules[__name__]], key="kind")
