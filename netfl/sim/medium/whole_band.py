"""The media that give a sender the whole band: ``dedicated`` (every sender at once, no contention) and ``tdma``
(one sender at a time, first come first served)."""

from __future__ import annotations

from typing import Any

import simpy

from netfl.registry.network_params import MediumSpec
from netfl.sim.channel import transfer_time
from netfl.sim.medium.base import Medium, TxReport, _empty_report


class DedicatedMedium(Medium):
    """No sharing: every sender has the whole band (a wired port, or a cell far from saturation)."""

    kind = "dedicated"

    def __init__(self, env: simpy.Environment, spec: MediumSpec, *, max_attempts: int = 8, **kw: Any):
        super().__init__(env, spec, **kw)
        self.max_attempts = max_attempts  # a fixed-rate channel's attempts per packet (not a YAML key)

    def transmit(self, sender, channel, bits, radio):
        if bits <= 0:
            return _empty_report()
        start = self.env.now
        out = transfer_time(channel, bits, start, self.spec.bandwidth, self.max_attempts)
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


class TdmaMedium(Medium):
    """One sender at a time with the whole band, FIFO; the radio is off while queued."""

    kind = "tdma"

    def __init__(self, env: simpy.Environment, spec: MediumSpec, *, max_attempts: int = 8, **kw: Any):
        super().__init__(env, spec, **kw)
        self.max_attempts = max_attempts  # a fixed-rate channel's attempts per packet (not a YAML key)
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
                out = transfer_time(channel, bits, self.env.now, self.spec.bandwidth, self.max_attempts)
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
