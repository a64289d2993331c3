"""What the engine is built from: plain objects, so a world can be made in code without a scenario.

:mod:`netfl.assemble` turns a validated scenario into a :class:`World`; a test
or a script may equally fill one in by hand. Units are SI (seconds, bit/s,
hertz); ``None`` means "not given" where the engine has a default.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from netfl.distributions import Distribution
from netfl.policies.base import AvailabilityPolicy, SessionPolicy
from netfl.policies.population import PopulationModel
from netfl.rng import RandomStreams
from netfl.sim.channel import ChannelParams
from netfl.sim.device_table import DeviceTable
from netfl.sim.idle_rows import UsageSetup

SERVER = "server"


@dataclass(frozen=True)
class MediumSetup:
    """How the devices of one node share its uplink: a kind of :data:`netfl.sim.medium.MEDIA` and its parameters."""

    kind: str = "dedicated"
    bandwidth_hz: float = 10e6
    params: dict[str, Any] = field(default_factory=dict)  # the kind's own, e.g. slotted_aloha's rate_bps and q


@dataclass(frozen=True)
class RamSetup:
    """A Random Access Model relay: one update passes per round, drawn by ``rho`` (weights per device behind it,
    ``uniform`` or ``channel_quality``) among all of them (``draw="all"``: nothing passes if the drawn user's update
    is missing, the paper's erasure) or among those whose update arrived (``"arrived"``)."""

    mode: Literal["abstract", "first"] = "abstract"
    rho: Sequence[float] | Literal["uniform", "channel_quality"] = "uniform"
    draw: Literal["all", "arrived"] = "all"


@dataclass(frozen=True)
class NodeSetup:
    """An access point or a relay between devices and the server."""

    kind: Literal["access_point", "relay", "edge"]
    medium: MediumSetup = MediumSetup()
    downlink_bps: float | None = None  # broadcast rate to its devices
    ram: RamSetup | None = None


@dataclass(frozen=True)
class WiredLink:
    source: str
    target: str
    rate_bps: float
    latency_s: float = 0.0


@dataclass(frozen=True)
class GroupLink:
    """How the devices of one group reach the network: a node (or the server) over a fixed rate or a channel.

    ``channel`` is a template: each device's ``distance_m`` replaces the template's, from the device table.
    """

    node: str = SERVER
    latency_s: float = 0.0
    channel: ChannelParams | None = None


@dataclass(frozen=True)
class ServerSetup:
    """Synchronous rounds (``participants`` asked, aggregate at ``deadline_s``) or asynchronous arrivals.

    ``goal`` (over-commit): a round closes as soon as this many updates reached the server and stops the
    rest; the backend asks more devices than that. None: a round waits for every asked device (or the deadline).
    """

    mode: Literal["sync", "async"] = "sync"
    participants: int | None = None  # all eligible devices if None
    goal: int | None = None  # sync: close the round at this many arrived updates (over-commit); None: wait for all
    deadline_s: float = float("inf")
    idle_wait_s: float = 10.0
    interval_s: float = 0.0
    buffer: int = 10  # async: aggregate every `buffer` arrivals
    local_steps: Distribution | None = None  # async: each job's K; the task's own if None
    pause_s: float = 0.0  # async: mean pause before a worker pulls again
    partial_work: bool = False  # sync: a device trains the local steps that fit before the deadline
    partial_margin: float = 0.0  # partial work: the upload planned to take (1 + margin) times its estimate


@dataclass(frozen=True)
class StopSetup:
    """When to stop (whichever comes first) and when to evaluate: every ``eval_every`` rounds, or on a grid of
    ``eval_every_s`` simulated seconds when given."""

    rounds: int | None = None
    sim_time_s: float | None = None
    accuracy: float | None = None  # stop at the first evaluation reaching it
    eval_every: int = 1
    eval_every_s: float | None = None


@dataclass(frozen=True)
class HierarchySetup:
    """Edge servers (HierFAVG): the edge nodes, in order (a device's edge is the first on its route to the server),
    how often the cloud averages their models, each edge's availability (absent: always up) and the bytes of an
    edge model on the wired links (the learner's model; set once the learner is built)."""

    edges: tuple[str, ...]
    cloud_every: int = 1
    policies: dict[str, AvailabilityPolicy] = field(default_factory=dict)
    model_bytes: float = 0.0


@dataclass
class World:
    """Everything the engine needs, availability included: one policy per device (the actor form, with an
    optional charger each) or one population model per device group (the array form, with an optional charger
    model each); the devices' own use (one model per group) in either form."""

    devices: DeviceTable
    links: list[GroupLink]  # one per device group, in the table's group order
    streams: RandomStreams
    stop: StopSetup
    server: ServerSetup = ServerSetup()
    nodes: dict[str, NodeSetup] = field(default_factory=dict)
    wires: list[WiredLink] = field(default_factory=list)
    policies: Sequence[AvailabilityPolicy] | None = None
    chargers: Sequence[SessionPolicy | None] | None = None
    population: Sequence[PopulationModel] | None = None
    charging: Sequence[PopulationModel | None] | None = None  # the array form's chargers, one model per group
    usage: Sequence[UsageSetup | None] | None = None  # each group's own use, in either form
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
        if self.hierarchy is not None and (self.population is not None or self.server.mode != "sync"):
            raise ValueError("edge servers aggregate synchronous rounds of the actor form")
