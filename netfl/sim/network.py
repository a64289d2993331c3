"""The network between devices and the server, as a networkx graph.

Nodes are the server, access points and relays; wired links carry a rate
and a latency. A device attaches either straight to the server (a fixed-rate
link, the simplest model) or to a node, over a fixed-rate link or a wireless
channel shared with the other devices of that node through its medium
(dedicated, FDMA, TDMA or slotted ALOHA; netfl/sim/medium/).

Transfer time is physics, hop by hop, store-and-forward: the device's own
hop (its radio is on while it transmits: energy), then each wired hop on the
route (bits / rate + latency). Once an update's last bit has left the device
it is in the network, the latency of the device's own hop included: the
device going offline or emptying its battery no longer loses it. Downloads
are the reverse path; the last hop is the access point's broadcast at its
downlink rate (one broadcast serves every device, so it is not divided
among them). Wired links are not contended (backbones are much faster than
radio links).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import simpy

from netfl.registry.device_params import LinkSpec
from netfl.registry.network_params import SERVER, NodeSpec, WiredLinkSpec
from netfl.rng import RandomStreams
from netfl.sim.channel import Channel, shannon_rate
from netfl.sim.device_table import DeviceTable
from netfl.sim.medium import MEDIA, Medium

DEFAULT_BROADCAST_BPS = 50e6  # an access point's downlink when none is given (LTE/Wi-Fi class)


@dataclass(frozen=True)
class Hop:
    source: str
    target: str
    rate_bps: float
    latency_s: float

    def time(self, bits: float) -> float:
        return bits / self.rate_bps + self.latency_s


@dataclass
class Attachment:
    """How one device reaches the network: its group's link as declared, and its own rates and channel."""

    link: LinkSpec  # its node (the server for a direct link) and the latency of its own hop
    uplink_bps: float | None  # fixed-rate link; None when a wireless channel is used
    downlink_bps: float
    channel: Channel | None = None

    @property
    def node(self) -> str:
        return self.link.node


@dataclass
class Counters:
    bytes_up: float = 0.0
    bytes_down: float = 0.0
    airtime_s: float = 0.0
    collisions: int = 0
    retransmissions: int = 0
    by_device: dict[int, float] = field(default_factory=dict)  # airtime per device


class Radio:
    """Switches one of a device's radio loads on and off (the medium calls it), and times how long it was on
    (``on_s``): the airtime of a transmission, failed or aborted ones included (a medium reports airtime only
    for transmissions that end, and energy is spent either way). One per transfer."""

    def __init__(self, set_load: Callable[[str, float], None], load: str, watts: float, env: simpy.Environment):
        self._set, self._load, self._watts, self._env = set_load, load, watts, env
        self.on_s = 0.0
        self._since: float | None = None

    @property
    def watts(self) -> float:
        return self._watts

    @property
    def energy_j(self) -> float:
        return self._watts * self.on_s

    def on(self) -> None:
        if self._since is None:
            self._since = self._env.now
        self._set(self._load, self._watts)

    def off(self) -> None:
        if self._since is not None:
            self.on_s += self._env.now - self._since
            self._since = None
        self._set(self._load, 0.0)


class Network:
    def __init__(
        self,
        env: simpy.Environment,
        nodes: dict[str, NodeSpec],
        wires: list[WiredLinkSpec],
        attachments: Attachments,
        streams: RandomStreams,
        log: Callable[..., None],
    ):
        self.env = env
        self.attachments = attachments
        self.log = log
        self._counters = Counters()
        self._nodes, self._wires, self._graph = nodes, wires, None
        self._paths: dict[str, list[str]] = {SERVER: [SERVER]}  # node -> its path to the server (the graph is fixed)
        self.edges = {name for name, node in nodes.items() if node.kind == "edge"}  # hierarchical FL's edge servers
        self.media: dict[str, Medium] = {
            name: MEDIA[node.medium.kind](env, node.medium, log=log, rng=streams.numpy("medium", name))
            for name, node in nodes.items()
        }

    @property
    def graph(self):
        """The wired nodes and links as a networkx graph, built at the first route asked for past the server
        (a run without relay nodes never asks: networkx is 0.15 s of a small job's start-up)."""
        if self._graph is None:
            import networkx as nx

            self._graph = graph = nx.Graph()
            graph.add_node(SERVER, kind="server")
            for name, node in self._nodes.items():
                graph.add_node(name, kind=node.kind)
            for wire in self._wires:
                graph.add_edge(wire.source, wire.to, rate=wire.rate, latency=wire.latency)
        return self._graph

    @property
    def counters(self) -> Counters:
        """Totals so far; collisions and retransmissions as the media logged them, aborted transmissions too."""
        self._counters.collisions = sum(m.collisions for m in self.media.values())
        self._counters.retransmissions = sum(m.retransmissions for m in self.media.values())
        return self._counters

    # ---------------------------------------------------------------- routes

    def route_up(self, node: str, stop_at: Callable[[str], bool] = lambda n: False) -> list[Hop]:
        """Wired hops from ``node`` towards the server, ending early at the first node where ``stop_at``."""
        if node == SERVER:
            return []
        path = self.path_nodes(node)
        hops = []
        for a, b in zip(path, path[1:]):
            edge = self.graph.edges[a, b]
            hops.append(Hop(a, b, edge["rate"], edge["latency"]))
            if stop_at(b):
                break
        return hops

    def route_below(self, node: str, tiers: set[str] | dict) -> list[Hop]:
        """Wired hops from ``node`` up to the first of ``tiers`` (an edge server, a relay), or to the server."""
        if node in tiers:
            return []
        return self.route_up(node, stop_at=tiers.__contains__)

    def path_nodes(self, node: str) -> list[str]:
        """The lowest-latency path of wired nodes from ``node`` to the server (found once per node: every job of
        a device routes its download and its upload by it)."""
        if node not in self._paths:
            import networkx as nx

            self._paths[node] = nx.shortest_path(self.graph, node, SERVER, weight="latency")
        return self._paths[node]

    # ------------------------------------------------------------- transfers

    def download(self, device: int, bits: float, receive: Radio):
        """Server (or the device's edge server) -> device: wired hops, then the device's own hop (its receiver
        on)."""
        att = self.attachments[device]
        for hop in reversed(self.route_below(att.node, self.edges)):
            yield self.env.timeout(hop.time(bits))
        yield self.env.timeout(att.link.latency)
        receive.on()
        try:
            yield self.env.timeout(bits / att.downlink_bps)
        finally:
            receive.off()
        self._counters.bytes_down += bits / 8

    def upload_first_hop(self, device: int, bits: float, transmit: Radio):
        """The device's own hop to its node (or to the server on a direct link): True once the last bit has
        left the device, False if the transmission failed. The hop's latency is not in it: the bits are then
        in flight (:meth:`in_flight`), and the device going away no longer loses them.

        Airtime counts every second the transmitter was on, also for a
        transmission that failed or was cut off (device offline, deadline).
        """
        att = self.attachments[device]
        try:
            if att.channel is None:
                transmit.on()
                try:
                    yield self.env.timeout(bits / att.uplink_bps)
                finally:
                    transmit.off()
            else:
                report = yield from self.media[att.node].transmit(device, att.channel, bits, transmit)
                if not report.success:
                    return False
        finally:
            self._counters.airtime_s += transmit.on_s
            self._counters.by_device[device] = self._counters.by_device.get(device, 0.0) + transmit.on_s
        self._counters.bytes_up += bits / 8
        return True

    def send_estimate_s(self, device: int, bits: float) -> float:
        """How long the device's own hop would take to send ``bits`` at its link's nominal rate, alone: a fixed
        rate's time; over a channel, at the medium's fixed rate (slotted ALOHA), the channel's fixed rate, or
        the adaptive rate at its mean SNR over the whole band. Fading, retransmissions and a shared medium can
        only make it longer (partial work plans with it)."""
        att = self.attachments[device]
        if att.channel is None:
            return bits / att.uplink_bps
        channel = att.channel
        fixed = self.media[att.node].spec.rate or channel.spec.rate
        if fixed is None:
            b = channel.bandwidth_hz
            fixed = min(shannon_rate(b, channel.mean_snr(b)), channel.spec.max_spectral_efficiency * b)
        return bits / fixed

    def in_flight(self, device: int):
        """The latency of the device's own hop, after its last bit left: the update travels without the device."""
        latency = self.attachments.latency(device)
        if latency > 0:
            yield self.env.timeout(latency)

    def forward(self, hops: list[Hop], bits: float):
        """Carry an update over wired hops (store-and-forward)."""
        for hop in hops:
            yield self.env.timeout(hop.time(bits))


class Attachments:
    """Each device's attachment, built when asked from its group's link and the device table.

    Nothing per device is kept: a wireless channel is a pure function of (seed, device), so building
    it again gives the same channel; the array form asks only for the devices that work.
    """

    def __init__(self, table: DeviceTable, links: list[LinkSpec], nodes: dict[str, NodeSpec], streams: RandomStreams):
        self.streams = streams
        self.table = table
        self._links = links
        self._broadcast = [nodes[link.node].downlink if link.node in nodes else None for link in links]
        self._band = [nodes[link.node].medium.bandwidth if link.node in nodes else None for link in links]

    def __len__(self) -> int:
        return len(self.table)

    def node(self, device: int) -> str:
        return self._links[int(self.table.group[device])].node

    def latency(self, device: int) -> float:
        """One-way latency of the device's own hop."""
        return self._links[int(self.table.group[device])].latency

    def __getitem__(self, device: int) -> Attachment:
        group = int(self.table.group[device])
        link = self._links[group]
        up = float(self.table.uplink_bps[device])
        up_bps = None if math.isnan(up) else up
        channel = None
        if link.channel is not None:
            channel = Channel(
                link.channel,
                self.streams.seed_sequence("channel", device),
                distance_m=float(self.table.distance_m[device]),
                bandwidth_hz=self._band[group],
            )
        down = float(self.table.downlink_bps[device])
        if math.isnan(down):
            down = self._broadcast[group] or up_bps or DEFAULT_BROADCAST_BPS
        return Attachment(link, up_bps, down, channel)


def ram_weights(rho, channels: list[Channel | None]) -> np.ndarray:
    """The relay's pass probabilities over its devices: explicit, uniform, or proportional to mean SNR."""
    n = len(channels)
    if rho == "uniform":
        w = np.ones(n)
    elif rho == "channel_quality":
        w = np.array([c.mean_snr() if c is not None else 1.0 for c in channels])
    else:
        w = np.asarray(rho, dtype=float)
    return w / w.sum()
