"""Scenario -> the engine's world: device table, links, nodes, wires, server and stop (ns-3's "helpers").

Every value is read from the validated scenario and converted to the
engine's plain objects (:mod:`netfl.sim.world`); nothing under
:mod:`netfl.sim` reads the scenario itself.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from netfl.assemble.availability import usage_setups
from netfl.assemble.levels import group_levels
from netfl.config.schema import DeviceGroupSpec, Scenario
from netfl.distributions import Distribution
from netfl.policies.base import AvailabilityPolicy, SessionPolicy
from netfl.policies.per_device import device_values
from netfl.policies.population import PopulationModel
from netfl.registry.device_params import DEVICE_COLUMNS, Column
from netfl.rng import RandomStreams
from netfl.sim.device_table import DeviceTable
from netfl.sim.idle_rows import UsageSetup
from netfl.sim.logged_levels import LevelLog
from netfl.sim.world import HierarchySetup, World


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
    levels = group_levels(scenario)
    return World(
        devices=device_table(scenario, streams, levels),
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
        levels=levels,
        hierarchy=_hierarchy(scenario, edge_policies or {}),
        idle_events=idle_events,
    )


def _hierarchy(scenario: Scenario, policies: dict[str, AvailabilityPolicy]) -> HierarchySetup | None:
    """Hierarchical FL's edges (nodes of kind edge, in the file's order); None without any."""
    edges = tuple(name for name, node in scenario.network.nodes.items() if node.kind == "edge")
    if not edges:
        return None
    return HierarchySetup(edges, policies)


def device_table(
    scenario: Scenario, streams: RandomStreams, levels: Sequence[LevelLog | None] | None = None
) -> DeviceTable:
    """Every device's quantities, as :data:`~netfl.registry.device_params.DEVICE_COLUMNS` declares them: one value
    per group, or one drawn per device from a seeded stream per group and quantity. A group whose battery follows
    its logged ``levels`` (:func:`~netfl.assemble.levels.group_levels`) starts at its first logged level and
    draws no idle power and gets no charger's (the log holds them)."""
    levels = group_levels(scenario) if levels is None else levels
    groups = scenario.devices
    code = np.uint8 if len(groups) <= 256 else np.int32
    index = [np.full(group.count, g, dtype=code) for g, group in enumerate(groups)]
    parts: dict[str, list[np.ndarray]] = {column.name: [] for column in DEVICE_COLUMNS}
    for group, logged in zip(groups, levels):
        for column in DEVICE_COLUMNS:
            parts[column.name].append(_values(column, group, streams, parts))
        if logged is not None:
            parts["initial_j"][-1] = logged.first * parts["capacity_j"][-1]
            for name in ("idle_w", "charge_w"):
                parts[name][-1] = np.broadcast_to(np.float64(0.0), (group.count,))
    columns = {name: _column(values) for name, values in parts.items()}
    return DeviceTable(_column(index), [group.group for group in groups], **columns)


def _values(column: Column, group: DeviceGroupSpec, streams: RandomStreams, parts: dict[str, list[np.ndarray]]):
    """One group's values of ``column``: its draw per device, or its one value broadcast to the group (no memory
    per device); ``parts``: the columns before it, this group's last (the one it is a fraction ``of``)."""
    value: object = group
    for name in column.key.split("."):
        value = getattr(value, name)
        if value is None:
            return np.broadcast_to(np.float64(column.absent), (group.count,))
    if isinstance(value, Distribution):
        rng = streams.numpy("devices", group.group, column.stream_name)
        values = np.asarray(value.sample(rng, group.count), dtype=float)
        if column.of:
            values *= parts[column.of][-1]
    else:
        values = np.broadcast_to(np.float64(value), (group.count,))
    return _scaled(values, column, group, streams)


def _scaled(values: np.ndarray, column: Column, group: DeviceGroupSpec, streams: RandomStreams) -> np.ndarray:
    """``values`` times the column's per-device factor (a battery's health), where it has one that is not 1."""
    factor: object = group
    for name in column.scaled_by.split(".") if column.scaled_by else ():
        factor = getattr(factor, name, None)
    if not isinstance(factor, Distribution) or factor.as_scenario_value() == 1.0:
        return values
    name = column.scaled_by.rsplit(".", 1)[-1]
    return values * device_values(factor, streams.integer_seed("devices", group.group, name), name, group.count)


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
