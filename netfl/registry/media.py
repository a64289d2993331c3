"""How the devices of one access point share its uplink: the one list of medium kinds.

The scenario checks ``network.nodes.*.medium.kind`` against it; a class of a
module of :mod:`netfl.sim.medium` implements each, naming it as its ``kind``, and
:data:`netfl.sim.medium.MEDIA` gathers them (refusing a kind without a class,
or a class whose kind is not here).
"""

from __future__ import annotations

__all__ = ["MEDIA_KINDS_DOC", "MEDIUM_KINDS"]

#: Each kind and what it does, for listings and error messages.
MEDIA_KINDS_DOC: dict[str, str] = {
    "dedicated": "no contention: each sender has the whole band",
    "fdma": "n concurrent senders get a 1/n share of the band each",
    "tdma": "one sender at a time with the whole band, first come first served",
    "slotted_aloha": "random access on a common slot grid; a collision loses every packet in the slot",
}

MEDIUM_KINDS: tuple[str, ...] = tuple(MEDIA_KINDS_DOC)
