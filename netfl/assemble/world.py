"""Scenario -> the engine's world: device table, links, nodes, wires, server and stop (ns-3's "helpers").

Every value is read from the validated scenario and converted to the
engine's plain objects (:mod:`netfl.sim.world`); nothing under
:mod:`netfl.sim` reads the scenario itself.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from netfl.assemble.availability import usage_setups
from netfl.config.schema import Scenario
from netfl.policies.base import AvailabilityPolicy, SessionPolicy
from netfl.policies.population import PopulationModel
from netfl.rng import RandomStreams
from netfl.sim.device_table import DeviceTable
from netfl.sim.idle_rows import UsageSetup
from netfl.sim.world import HierarchySetup, World

# Radio receive power when the scenario gives none: about half the uplink
# transmit power (receive chains draw less than the power amplifier).
RECEIVE_TO_TRANSMIT_POWER = 0.5


def build_world(
    scenario: Scenario,
    streams: RandomStreams,
    *,
    policies: Sequence[AvailabilityPolicy] | None = None,
    chargers: Sequence[SessionPolicy | None] | None = None,
    population: Sequence[PopulationModel] | None = None,
    charging: Sequence[PopulationModel | None] | None = None,
    usage: Sequence[UsageSetup | None] | None = None,
    edge_policies: dict[str, AvailabilityPolicy] | None = None,
    idle_events: bool = False,
) -> World:
    """The scenario's world with the given availability (see :mod:`netfl.assemble.availability`), the edge servers'
    included: per device (``policies``, ``chargers``: the actor form) or per group (``population``, ``charging``:
    the array form). The devices' own use is the scenario's unless ``usage`` is given. ``idle_events``: the array
    form logs idle devices' events too (:func:`netfl.config.engine_form.engine_choice` says whether)."""
    server = scenario.server
    return World(
        devices=device_table(scenario, streams),
        links=[g.link for g in scenario.devices],
        streams=streams,
        stop=scenario.stop,
        evaluate=scenario.eval.every,
        server=server.round if server.mode == "sync" else server.async_,
        nodes=scenario.network.nodes,
        wires=scenario.network.links,
        policies=policies,
        chargers=chargers,
        population=population,
        charging=charging,
        usage=usage_setups(scenario, streams, None) if usage is None else usage,
        hierarchy=_hierarchy(scenario, edge_policies or {}),
        idle_events=idle_events,
    )


def _hierarchy(scenario: Scenario, policies: dict[str, AvailabilityPolicy]) -> HierarchySetup | None:
    """Hierarchical FL's edges (nodes of kind edge, in the file's order); None without any."""
    edges = tuple(name for name, node in scenario.network.nodes.items() if node.kind == "edge")
    if not edges:
        return None
    return HierarchySetup(edges, policies)


def device_table(scenario: Scenario, streams: RandomStreams) -> DeviceTable:
    """Draw every device's parameters: one seeded stream per group and quantity."""
    cols: dict[str, list[np.ndarray]] = {
        k: []
        for k in (
            "group",
            "flops_per_s",
            "compute_w",
            "transmit_w",
            "receive_w",
            "idle_w",
            "capacity_j",
            "initial_j",
            "min_level",
            "charge_w",
            "uplink_bps",
            "downlink_bps",
            "distance_m",
        )
    }
    for g, group in enumerate(scenario.devices):
        n = group.count

        def draw(name, dist, group=group, n=n):
            return np.asarray(dist.sample(streams.numpy("devices", group.group, name), n), dtype=float)

        def same(value, n=n):  # one value for the whole group: no memory per device
            return np.broadcast_to(np.float64(value), (n,))

        cols["group"].append(np.full(n, g, dtype=np.uint8 if len(scenario.devices) <= 256 else np.int32))
        cols["flops_per_s"].append(draw("flops_per_s", group.compute.flops_per_s))
        power = group.power
        for name, watts in (
            ("compute_w", power.compute),
            ("transmit_w", power.transmit),
            ("receive_w", power.transmit * RECEIVE_TO_TRANSMIT_POWER),
            ("idle_w", power.idle),
        ):
            cols[name].append(same(watts))
        spec = group.battery
        if spec is None:
            cols["capacity_j"].append(same(math.inf))
            cols["initial_j"].append(same(math.inf))
            cols["min_level"].append(same(0.0))
            cols["charge_w"].append(same(0.0))
        else:
            cols["capacity_j"].append(same(spec.capacity))
            initial = draw("battery_initial", spec.initial)
            initial *= spec.capacity
            cols["initial_j"].append(initial)
            cols["min_level"].append(same(spec.min_level))
            cols["charge_w"].append(same(spec.charge_power))
        link = group.link
        up = draw("uplink", link.uplink) if link.uplink is not None else same(math.nan)
        if link.downlink is not None:
            down = draw("downlink", link.downlink)
        else:
            down = up if link.to is None else same(math.nan)
        cols["uplink_bps"].append(up)
        cols["downlink_bps"].append(down)
        cols["distance_m"].append(
            draw("distance", link.channel.distance_m) if link.channel is not None else same(math.nan)
        )
    arrays = {k: _column(v) for k, v in cols.items()}
    return DeviceTable(group_names=[g.group for g in scenario.devices], **arrays)


def _column(parts: list[np.ndarray]) -> np.ndarray:
    """One quantity of every device: a read-only broadcast of one value (no memory per device) where every group
    has the same value for all its devices -- the powers, the capacity, the downlink of a million phones -- and
    the groups' draws one after the other otherwise."""
    first = parts[0][:1]
    if len(first) and all(_all_equal(part, first) for part in parts):
        return np.broadcast_to(first[0], (sum(len(part) for part in parts),))
    return parts[0] if len(parts) == 1 else np.concatenate(parts)  # one group: its draw itself, not a copy


def _all_equal(part: np.ndarray, value: np.ndarray) -> bool:
    """Whether every entry of ``part`` is ``value[0]`` (NaN equal to NaN)."""
    return (
        bool(np.all((part == value) | (np.isnan(part) & np.isnan(value))))
        if part.dtype.kind == "f"
        else bool(np.all(part == value))
    )
