"""The engine's parts made from a :class:`~netfl.sim.world.World`: the fleet in the form the world asks for, the
RAM relays and the edge tier (the simulation wires them to the network and the server, netfl/sim/simulation.py)."""

from __future__ import annotations

from collections.abc import Callable

import simpy

from netfl.policies.rows import Lookahead, SessionRow
from netfl.sim.device import Device, Usage
from netfl.sim.device_table import DeviceTable
from netfl.sim.edge import EdgeServer, EdgeTier
from netfl.sim.fleet import EagerFleet, Fleet
from netfl.sim.idle_events import IdleEvents
from netfl.sim.idle_rows import GroupRows, IdleRows, UsageSetup
from netfl.sim.lazy_fleet import Handover, LazyFleet
from netfl.sim.logged_levels import LoggedPower
from netfl.sim.network import Network, ram_weights
from netfl.sim.recorder import EventRecorder
from netfl.sim.relay import RamRelay
from netfl.sim.world import World


def build_fleet(
    env: simpy.Environment,
    world: World,
    network: Network,
    recorder: EventRecorder,
    current_round: Callable[[], int],
    idle_events: IdleEvents | None,
) -> Fleet:
    """The devices: rows of arrays and an actor while one works when the world has population models (the array
    form), else an actor each from the start."""
    table = world.devices
    usage = list(world.usage) if world.usage is not None else [None] * len(table.group_names)
    levels = (
        LoggedPower(len(table), table.capacity_j, table.group_slices(), world.levels)
        if world.levels is not None and any(log is not None for log in world.levels)
        else None
    )
    if world.population is not None:
        charging = list(world.charging) if world.charging is not None else [None] * len(usage)
        groups = [GroupRows(*g) for g in zip(world.population, charging, usage)]

        def make_device(index: int, handover: Handover) -> Device:
            battery = table.battery(index, handover.level_j, env.now)
            battery.charging = handover.charging
            return Device(
                env,
                table.profile(index),
                battery,
                handover.policy,
                recorder,
                current_round,
                network,
                handover.charger,
                online=True,
                usage=handover.usage,
                using=handover.using,
                levels=handover.levels,
            )

        return LazyFleet(env, IdleRows(table, groups, idle_events, levels), make_device)

    chargers = world.chargers if world.chargers is not None else [None] * len(table)
    return EagerFleet(
        [
            Device(
                env,
                table.profile(i),
                table.battery(i),
                policy,
                recorder,
                current_round,
                network,
                charger,
                usage=use,
                levels=levels.row(i) if levels is not None else None,
            )
            for i, (policy, charger, use) in enumerate(zip(world.policies, chargers, _usage_views(usage, table)))
        ]
    )


def _usage_views(usage: list[UsageSetup | None], table: DeviceTable) -> list[Usage | None]:
    """Each device's own use in the actor form: a view of its row of its group's usage model."""
    views: list[Usage | None] = []
    for setup, sl in zip(usage, table.group_slices()):
        rows = Lookahead(setup.model) if setup is not None else None
        for row in range(sl.stop - sl.start):
            views.append(None if setup is None else Usage(SessionRow.row_of(rows, row), setup.spec))
    return views


def build_relays(world: World, network: Network, log) -> dict[str, RamRelay]:
    """A RAM relay for each node that has one, over the devices whose route to the server crosses it."""
    relays = {}
    groups = world.devices.group_slices()
    for name, node in world.nodes.items():
        if node.ram is None:
            continue
        behind: list[int] = []
        for link, devices in zip(world.links, groups):
            if name in network.path_nodes(link.node):
                behind += range(devices.start, devices.stop)
        channels = (
            [network.attachments[i].channel for i in behind]
            if node.ram.rho == "channel_quality"
            else [None] * len(behind)
        )
        weights = ram_weights(node.ram.rho, channels)
        relays[name] = RamRelay(
            name,
            node.ram.mode,
            dict(zip(behind, weights)),
            world.streams.numpy("relay", name),
            log,
            node.ram.draw,
        )
    return relays


def build_edges(env: simpy.Environment, world: World, network: Network, log) -> EdgeTier | None:
    """The edge servers of hierarchical FL, and each device's: the first edge on its group's route; ``log``: the
    server's (an edge logs as the server)."""
    setup = world.hierarchy
    if setup is None:
        return None
    index = {name: i for i, name in enumerate(setup.edges)}
    edges = [EdgeServer(env, name, i, setup.policies.get(name), log) for name, i in index.items()]
    group_edge = [next((index[n] for n in network.path_nodes(link.node) if n in index), -1) for link in world.links]
    if min(group_edge) < 0:
        raise ValueError("with edge servers, every device group's route to the server must cross an edge")
    device_edges = [group_edge[g] for g in world.devices.group]
    return EdgeTier(edges, device_edges, world.server.cloud_every, setup.model_bytes)
