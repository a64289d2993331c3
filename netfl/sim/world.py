"""What the engine is built from: plain objects, so a world can be made in code without a scenario.

:mod:`netfl.assemble` turns a validated scenario into a :class:`World`; a test
or a script may equally fill one in by hand. Units are SI (seconds, bit/s,
hertz); ``None`` means "not given" where the engine has a default. The server's
parameters and when to stop and evaluate are their declarations themselves
(:mod:`netfl.registry.server_params`, :mod:`netfl.registry.run_params`), and so are
the network's nodes and wired links (:mod:`netfl.registry.network_params`) and each device group's link
(:class:`netfl.registry.device_params.LinkSpec`): the objects
the scenario was validated into, or made in code: ``RoundSpec(participants=3,
deadline=60.0)``, ``StopSpec(rounds=2)``, ``Every(seconds=4.0)``,
``NodeSpec(kind="access_point", medium=MediumSpec(kind="tdma"))``, ``LinkSpec(uplink=2e6, latency=0.01)``
(the device table holds each device's rates, drawn from the link's distributions).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from netfl.policies.base import AvailabilityPolicy, SessionPolicy
from netfl.policies.population import PopulationModel
from netfl.registry.device_params import LinkSpec
from netfl.registry.network_params import NodeSpec, WiredLinkSpec
from netfl.registry.run_params import EVERY_ROUND, Every, StopSpec
from netfl.registry.server_params import AsyncSpec, RoundSpec
from netfl.rng import RandomStreams
from netfl.sim.device_table import DeviceTable
from netfl.sim.idle_rows import UsageSetup
from netfl.sim.logged_levels import LevelLog


@dataclass(frozen=True)
class HierarchySetup:
    """Edge servers (HierFAVG): the edge nodes, in order (a device's edge is the first on its route to the server),
    each edge's availability (absent: always up) and the bytes of an edge model on the wired links (the learner's
    model; set once the learner is built). How often the cloud averages their models is the round's
    (``World.server.cloud_every``)."""

    edges: tuple[str, ...]
    policies: dict[str, AvailabilityPolicy] = field(default_factory=dict)
    model_bytes: float = 0.0


@dataclass
class World:
    """Everything the engine needs, availability included: one policy per device (the actor form, with an
    optional charger each) or one population model per device group (the array form, with an optional charger
    model each); the devices' own use (one model per group) in either form."""

    devices: DeviceTable
    links: list[LinkSpec]  # each device group's link as declared, in the table's group order
    streams: RandomStreams
    stop: StopSpec  # when to stop (whichever limit comes first)
    server: RoundSpec | AsyncSpec = RoundSpec()  # synchronous rounds, or asynchronous arrivals
    evaluate: Every = EVERY_ROUND  # every so many rounds, or on a grid of simulated seconds
    nodes: dict[str, NodeSpec] = field(default_factory=dict)  # access points, relays and edges, as declared
    wires: list[WiredLinkSpec] = field(default_factory=list)
    policies: Sequence[AvailabilityPolicy] | None = None
    chargers: Sequence[SessionPolicy | None] | None = None
    population: Sequence[PopulationModel] | None = None
    charging: Sequence[PopulationModel | None] | None = None  # the array form's chargers, one model per group
    usage: Sequence[UsageSetup | None] | None = None  # each group's own use, in either form
    levels: Sequence[LevelLog | None] | None = None  # each group's logged battery levels, in either form
    hierarchy: HierarchySetup | None = None
    idle_events: bool = False  # the array form logs idle devices' events too (the actor form always does)

    def __post_init__(self) -> None:
        if (self.policies is None) == (self.population is None):
            raise ValueError(
                "give policies (one per device, the actor form) or population (one model per "
                "device group, the array form)"
            )
        if len(self.links) != len(self.devices.group_names):
            raise ValueError(f"{len(self.links)} group links for {len(self.devices.group_names)} device groups")
        if self.policies is not None and len(self.policies) != len(self.devices):
            raise ValueError(f"{len(self.policies)} policies for {len(self.devices)} devices")
        if self.usage is not None and len(self.usage) != len(self.devices.group_names):
            raise ValueError(f"{len(self.usage)} usage setups for {len(self.devices.group_names)} device groups")
        if self.levels is not None and len(self.levels) != len(self.devices.group_names):
            raise ValueError(f"{len(self.levels)} logged levels for {len(self.devices.group_names)} device groups")
        if self.hierarchy is not None and (self.population is not None or not isinstance(self.server, RoundSpec)):
            raise ValueError("edge servers aggregate synchronous rounds of the actor form")
