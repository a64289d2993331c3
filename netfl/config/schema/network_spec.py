"""The network (``network``): access points, relays and edge servers, how each node's devices share its uplink,
and the wired links between the nodes and the server. The nodes and links are declared once, in
:mod:`netfl.registry.network_params`, because the engine reads them as they are."""

from __future__ import annotations

from pydantic import Field

from netfl.numbers import Strict
from netfl.registry.network_params import MediumSpec, NodeSpec, RamSpec, WiredLinkSpec

__all__ = ["MediumSpec", "NetworkSpec", "NodeSpec", "RamSpec", "WiredLinkSpec"]


class NetworkSpec(Strict):
    """Access points, relays and the wired links between them and the server (node ``server``)."""

    nodes: dict[str, NodeSpec] = Field({}, description="access points, relays and edge servers by name (its table)")
    links: list[WiredLinkSpec] = Field([], description="wired links between the nodes and server (its table)")
