"""The network's parameters that the engine reads as they were declared: a node (:class:`NodeSpec`,
``network.nodes.NAME``, read by :class:`netfl.sim.network.Network`), how its devices share its uplink
(:class:`MediumSpec`, ``network.nodes.NAME.medium``, read by the medium of its kind, :mod:`netfl.sim.medium`), its
RAM relay (:class:`RamSpec`, ``network.nodes.NAME.ram``, read by :class:`netfl.sim.relay.RamRelay`) and the wired
links (:class:`WiredLinkSpec`, ``network.links[]``, the edges of the network's graph).

A field is the whole declaration: YAML key, unit (a :mod:`netfl.units` type), default, bounds, description. The
scenario's schema takes these classes as the types of ``NetworkSpec.nodes`` and ``NetworkSpec.links``, the docs'
tables and the JSON schema are generated from them, and the engine reads the same frozen objects, so nothing is
copied or renamed on the way. Here, below both the configuration and the engine (``tests/config/test_layers.py``),
because both read them.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator, ConfigDict, Field, model_validator

from netfl.component_spec import PolicySpec
from netfl.numbers import Strict
from netfl.registry import registered
from netfl.registry.choices import AlohaBackoff, RamDraw
from netfl.registry.media import MEDIUM_KINDS
from netfl.units import BitsPerSecond, Bytes, Hertz, Seconds

__all__ = ["SERVER", "MediumSpec", "NodeSpec", "RamSpec", "WiredLinkSpec"]

#: The server's name in the network's graph (``network.links[].to: server``; a device link without ``to``).
SERVER = "server"


#: slotted_aloha's binary exponential backoff halves a device's q at most this many times (q/1024 at the floor).
BACKOFF_STAGES = 10


def _refuse_not_applicable(spec: Strict, applies_to: str) -> None:
    """Refuse the keys ``spec`` was given that its choice makes meaningless (its ``not_applicable``)."""
    given = sorted(set(spec.not_applicable) & spec.model_fields_set)
    if given:
        raise ValueError(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to {applies_to}")


class MediumSpec(Strict):
    """How the devices attached to a node share its uplink (see netfl/sim/medium.py)."""

    kind: Annotated[str, BeforeValidator(registered(MEDIUM_KINDS))] = Field(
        "dedicated",
        description="dedicated (each sender the whole band), fdma (the band shared equally among those sending), "
        "tdma (one sender at a time) or slotted_aloha (random access; collisions lose packets)",
    )
    bandwidth: Hertz = Field(10e6, gt=0, description="uplink bandwidth of the access point")
    rate: BitsPerSecond | None = Field(None, gt=0, description="slotted_aloha: rate of every packet")
    q: float = Field(0.1, gt=0, le=1, description="slotted_aloha: per-slot transmit probability of a backlogged device")
    packet_size: Bytes = Field(1500, gt=0, description="slotted_aloha: bytes per packet (one packet per slot)")
    backoff: AlohaBackoff = Field(
        "none",
        description="slotted_aloha: binary_exponential halves a device's q after each collision (down to "
        "q/1024) and resets it after a success",
    )
    max_attempts: int | None = Field(
        None,
        gt=0,
        description="slotted_aloha: a packet dropped after this many "
        "transmissions fails the upload; unlimited if omitted",
    )

    @property
    def not_applicable(self) -> tuple[str, ...]:
        """The keys that mean nothing for this kind: slotted ALOHA's, for any other (refused where given, and not
        shown by ``netfl validate``)."""
        return () if self.kind == "slotted_aloha" else ("rate", "q", "packet_size", "backoff", "max_attempts")

    @model_validator(mode="after")
    def _aloha_only(self):
        if self.kind == "slotted_aloha" and self.rate is None:
            raise ValueError("slotted_aloha needs rate (the packet rate, e.g. rate: 1Mbps)")
        _refuse_not_applicable(self, f"kind slotted_aloha only (kind is {self.kind})")
        return self

    @property
    def packet_bits(self) -> float:
        """``packet_size`` in bits, as slotted ALOHA counts its packets."""
        return 8.0 * self.packet_size


class RamSpec(Strict):
    """The Random Access Model relay: one update passes per round."""

    mode: Literal["abstract", "first"] = Field(
        "abstract", description="abstract: one user drawn by rho passes; first: the first update to arrive passes"
    )
    rho: list[Annotated[float, Field(ge=0, allow_inf_nan=False)]] | Literal["channel_quality", "uniform"] = Field(
        "uniform",
        description="abstract: each user's probability of being drawn, a list, uniform, or channel_quality "
        "(proportional to mean SNR)",
    )
    draw: RamDraw = Field(
        "all",
        description="abstract: draw user i ~ rho among all users, nothing passing if i's update is missing "
        "(all: the paper's erasure), or among the users whose update arrived (arrived)",
    )

    @property
    def not_applicable(self) -> tuple[str, ...]:
        """The keys that mean nothing for this mode: who is drawn, where the first arrival passes (refused where
        given, and not shown by ``netfl validate``)."""
        return () if self.mode == "abstract" else ("rho", "draw")

    @model_validator(mode="after")
    def _draw_when_abstract(self):
        _refuse_not_applicable(self, f"mode abstract only (mode {self.mode} passes the first arrival)")
        return self


class NodeSpec(Strict):
    kind: Literal["access_point", "relay", "edge"] = Field(
        description="access_point (devices attach to it), relay (passes updates on; one per round with ram) or "
        "edge (an edge server that aggregates for the devices behind it)"
    )
    medium: MediumSpec = Field(MediumSpec(), description="how the attached devices share its uplink (its table)")
    downlink: BitsPerSecond | None = Field(None, gt=0, description="broadcast rate to the attached devices")
    ram: RamSpec | None = Field(None, description="relays only: pass one update per round (RAM)")
    availability: PolicySpec | None = Field(
        None, description="edges only: when the edge server is up (any availability policy); always if omitted"
    )

    @model_validator(mode="after")
    def _ram_on_relays(self):
        if self.ram is not None and self.kind != "relay":
            raise ValueError("ram belongs to a node of kind relay")
        if self.availability is not None and self.kind != "edge":
            raise ValueError("availability belongs to a node of kind edge (an edge server that may go down)")
        return self


class WiredLinkSpec(Strict):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    source: str = Field(alias="from", description="a node of network.nodes")
    to: str = Field(description="a node of network.nodes, or server")
    rate: BitsPerSecond = Field(gt=0, description="the link's rate")
    latency: Seconds = Field(0.0, ge=0, description="one-way, per transfer")
