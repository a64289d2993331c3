"""What every medium shares: the :class:`Medium` base (its declaration, its log lines and their totals), the
:class:`TxReport` a transmission returns and the sender's radio (:class:`RadioHooks`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np
import simpy

from netfl.registry.network_params import MediumSpec
from netfl.sim.channel import Channel

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
    """An access point's shared band, as its node declares it: ``spec`` (``network.nodes.NAME.medium``, of this
    class's kind) is read as it is, its ``bandwidth`` the band every sender shares."""

    kind: ClassVar[str] = ""

    def __init__(
        self,
        env: simpy.Environment,
        spec: MediumSpec,
        *,
        log: LogFn | None = None,
        rng: np.random.Generator | None = None,
    ):
        if spec.kind != self.kind:
            raise ValueError(f"a {self.kind} medium is built from a declaration of kind {self.kind}, not {spec.kind}")
        self.env = env
        self.spec = spec
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
