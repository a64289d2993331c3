"""How the devices of one access point share its uplink: the one list of medium kinds.

The scenario checks ``network.nodes.*.medium.kind`` against it; a class of
:mod:`netfl.sim.medium` implements each, naming it as its ``kind``, and
:data:`netfl.sim.medium.MEDIA` gathers them (refusing a kind without a class,
or a class whose kind is not here). Also the wireless defaults the scenario
and the engine share.
"""

from __future__ import annotations

__all__ = ["MAX_SPECTRAL_EFFICIENCY", "MEDIA_KINDS_DOC", "MEDIUM_KINDS"]

#: Each kind and what it does, for listings and error messages.
MEDIA_KINDS_DOC: dict[str, str] = {
    "dedicated": "no contention: each sender has the whole band",
    "fdma": "n concurrent senders get a 1/n share of the band each",
    "tdma": "one sender at a time with the whole band, first come first served",
    "slotted_aloha": "random access on a common slot grid; a collision loses every packet in the slot",
}

MEDIUM_KINDS: tuple[str, ...] = tuple(MEDIA_KINDS_DOC)

#: bit/s/Hz an adaptive-rate channel reaches at most: LTE's top modulation and coding, CQI 15 (64-QAM, code rate
#: 948/1024), 3GPP TS 36.213 Table 7.2.3-1 (netfl/sim/channel.py says why a cap and gives other radios' values).
MAX_SPECTRAL_EFFICIENCY = 5.5547
