"""``fdma``: the band shared equally among the senders on the air, exactly (processor sharing)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import simpy

from netfl.registry.network_params import MediumSpec
from netfl.sim.channel import Channel
from netfl.sim.medium.base import Medium, TxReport, _empty_report


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

    def __init__(self, env: simpy.Environment, spec: MediumSpec, **kw: Any):
        super().__init__(env, spec, **kw)
        self._flows: list[_Flow] = []
        self._t = env.now
        self._wake: simpy.Event | None = None
        self._proc: simpy.Process | None = None

    @property
    def active(self) -> int:
        return len(self._flows)

    def _share(self, flow: _Flow) -> float:
        return self.spec.bandwidth / len(self._flows)

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
