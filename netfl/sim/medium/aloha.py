"""``slotted_aloha``: random access on a common slot grid; a collision loses every packet in the slot (Roberts
1975; throughput N q (1-q)^(N-1))."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import simpy

from netfl.registry.network_params import BACKOFF_STAGES, MediumSpec
from netfl.sim.channel import Channel
from netfl.sim.medium.base import Medium, RadioHooks, TxReport, _empty_report, _energy


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
    """q-persistent slotted ALOHA on a global slot grid (slot k is [k s, (k+1) s), s = packet_bits / rate), as its
    declaration gives ``rate``, ``packet_size``, ``q``, ``backoff`` and ``max_attempts``.

    In every slot each backlogged sender transmits one packet with
    probability q (its own, under ``backoff="binary_exponential"``: halved
    after a collision down to ``q_min``, reset after a success). One
    transmitter whose channel is not in outage at ``rate`` delivers its
    packet; two or more collide and all are lost (their radios were on: the
    energy counts). Contenders are the senders backlogged at the slot's start.

    One process for the whole medium, none while nobody is backlogged, and
    one timeout per *busy* slot: the number of idle slots before the next
    busy one is geometric with parameter 1 - prod(1 - q_i), so it is drawn
    at once and the transmitter set is drawn conditioned on being non-empty
    (exact in distribution; a join or leave during the wait redraws, which
    memorylessness makes exact as well). The declaration's defaults: 1500-byte
    packets (12 ms slots at 1 Mbit/s), q = 0.1 (1/q = 10 expected contenders,
    where q = 1/N maximises throughput at (1 - 1/N)^(N-1) -> 1/e).
    """

    kind = "slotted_aloha"

    def __init__(self, env: simpy.Environment, spec: MediumSpec, *, q_min: float | None = None, **kw: Any):
        """``q_min``: the backoff's floor; ``q / 2**BACKOFF_STAGES`` (the declaration's q/1024) if None."""
        super().__init__(env, spec, **kw)
        if self.rng is None:
            raise ValueError("slotted_aloha medium needs rng (a seeded numpy Generator)")
        if spec.rate is None:
            raise ValueError("slotted_aloha needs rate (the packet rate, e.g. rate: 1Mbps)")
        q_min = spec.q / 2**BACKOFF_STAGES if q_min is None else q_min
        if not 0 < q_min <= spec.q:
            raise ValueError(f"slotted_aloha needs 0 < q_min <= q <= 1, got q={spec.q!r}, q_min={q_min!r}")
        self.slot_s = spec.packet_bits / spec.rate
        self.q_min = float(q_min)  # the backoff's floor (not a YAML key)
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
            if s.channel.outage(k * self.slot_s, self.spec.bandwidth, self.spec.rate):
                self.stats.outages += 1
                self._lost(s)
                return
            self.stats.successes += 1
            s.delivered += 1
            s.packets_left -= 1
            s.tries = 0
            s.q = self.spec.q
            if s.packets_left == 0:
                self._finish(s)
            return
        self.stats.collisions += 1
        for s in tx:
            s.collisions += 1
            if s.left:
                continue
            self.collisions += 1
            size = self.spec.packet_bits
            packet = min(size, s.bits - s.delivered * size)  # the last one may be short
            self.log(
                s.sender,
                "collision",
                bytes=packet / 8,
                energy_j=_energy(s.radio, self.slot_s),
                slot=k,
                others=len(tx) - 1,
            )
            if self.spec.backoff == "binary_exponential":
                s.q = max(self.q_min, s.q / 2.0)
            self._lost(s)

    def _lost(self, s: _Station) -> None:
        if self.spec.max_attempts is not None and s.tries >= self.spec.max_attempts:
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
            sender,
            channel,
            radio,
            float(bits),
            math.ceil(bits / self.spec.packet_bits),
            self.spec.q,
            env.now,
            env.event(),
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
