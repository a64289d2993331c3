"""Medium access: how devices attached to one access point share its band.

A device's task calls ``report = yield from medium.transmit(sender, channel,
bits, radio)``; the medium decides when the bits are through, turns the
sender's radio on only while it is on the air (so energy follows airtime,
not waiting), and returns a :class:`TxReport`. Each medium is built from its
node's declaration (:class:`netfl.registry.network_params.MediumSpec`) and
reads it as it is. Kinds (``MEDIA``), one module each:

- ``dedicated``: no contention, each sender has the whole band (:mod:`.whole_band`);
- ``tdma``: one sender at a time with the whole band, first come first served (:mod:`.whole_band`);
- ``fdma``: n concurrent senders get b/n each (processor sharing, exact; :mod:`.fdma`);
- ``slotted_aloha``: random access on a common slot grid, collisions lose
  every packet in the slot (Roberts 1975; throughput N q (1-q)^(N-1); :mod:`.aloha`).

A ``simpy.Interrupt`` thrown into the sender (device offline or battery
empty) leaves every queue, turns the radio off and is re-raised, so the
medium stays usable by the others. Log lines (optional) are per
transmission (``tx_start`` when the sender asks for the medium, queueing
included; ``tx_end``, also on abort; ``retransmission`` with a count when
there were any) plus one ``collision`` line per collided sender and slot.
"""

from __future__ import annotations

import importlib
import pkgutil

from netfl.registry import implementations
from netfl.registry.media import MEDIUM_KINDS
from netfl.sim.medium.aloha import AlohaStats, SlottedAlohaMedium
from netfl.sim.medium.base import LogFn, Medium, RadioHooks, TxReport
from netfl.sim.medium.fdma import FdmaMedium
from netfl.sim.medium.whole_band import DedicatedMedium, TdmaMedium

__all__ = [
    "MEDIA",
    "AlohaStats",
    "DedicatedMedium",
    "FdmaMedium",
    "LogFn",
    "Medium",
    "RadioHooks",
    "SlottedAlohaMedium",
    "TdmaMedium",
    "TxReport",
]

#: Each medium of the registry (netfl.registry.media.MEDIUM_KINDS), in its order: the class of a module of this
#: package that names it as its ``kind`` (every module here is searched, so a new one is listed nowhere else).
MEDIA: dict[str, type[Medium]] = implementations(
    Medium,
    MEDIUM_KINDS,
    [importlib.import_module(f"{__name__}.{m.name}") for m in pkgutil.iter_modules(__path__)],
    key="kind",
)
