"""Scenario -> each device's availability: one population model per device group, viewed row by row where needed.

A built-in policy has one implementation, its population model
(:mod:`netfl.policies.population`), built once per device group from a keyed
stream named after the group and the role (availability or charging). The
array form of the engine advances the models themselves; the actor form gives
each device a view of its row (:mod:`netfl.policies.rows`), so both forms
draw the same world from one seed. Policies without a population form (a
user's per-device class, ``eligible`` holding one) are built per device,
each with its own stream. Every model sees the devices' label mix (``from: data``
probabilities) from the learner's partition.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from netfl.assemble.levels import follow_levels
from netfl.config.idle_estimate import policy_of
from netfl.config.schema import Scenario
from netfl.policies import AvailabilityPolicy, DeviceInfo, SessionPolicy, build_policy, policy_class
from netfl.policies.catalog import population_model, supports_population
from netfl.policies.population import PopulationModel
from netfl.policies.rows import Lookahead, PopulationRow
from netfl.rng import RandomStreams
from netfl.sim.idle_rows import UsageSetup


def group_models(
    scenario: Scenario, streams: RandomStreams, label_mix: np.ndarray | None, role: str = "availability"
) -> list[PopulationModel | None]:
    """Each device group's population model for ``role`` (None: no such policy, or one without a population form).

    ``label_mix`` (devices x labels) feeds probabilities given ``from: data`` or ``from: smallest_label`` (None:
    an even mix, for roles whose policies are continuous-time and read no label mix).
    """
    models: list[PopulationModel | None] = []
    start = 0
    base_dir = scenario.source.parent if scenario.source is not None else None
    follow_levels(scenario)  # a log set replayed here and followed by a battery is read once
    for group in scenario.devices:
        spec = policy_of(group, role)
        if spec is None or not supports_population(spec, base_dir):
            models.append(None)
        else:
            models.append(
                population_model(
                    spec,
                    group.count,
                    streams.integer_seed(f"{role}-population", group.group),
                    np.broadcast_to(1.0, (group.count, 1))
                    if label_mix is None
                    else label_mix[start : start + group.count],
                    scenario.seeds.world,
                    base_dir=base_dir,
                    first=start,
                )
            )
        start += group.count
    return models


def usage_setups(scenario: Scenario, streams: RandomStreams, label_mix: np.ndarray | None) -> list[UsageSetup | None]:
    """Each device group's own use (``usage``), in either form of the engine; None where a group has none. Where the
    battery follows logged levels the use draws no power of its own (the log holds it)."""
    models = group_models(scenario, streams, label_mix, "usage")
    return [
        None if g.usage is None else UsageSetup(model, _logged(g.usage) if _follows_levels(g) else g.usage)
        for g, model in zip(scenario.devices, models)
    ]


def _follows_levels(group) -> bool:
    return group.battery is not None and group.battery.levels is not None


def _logged(usage):
    """The use of a device whose battery follows its logged levels: no power of its own (a copy past the spec's
    bounds: power > 0 is the user's, not the engine's)."""
    return usage.model_construct(**{**dict(usage), "power": 0.0})


def population_models(scenario: Scenario, streams: RandomStreams, label_mix: np.ndarray) -> list[PopulationModel]:
    """The array form's availability: every group's model (the scenario's policies all have one)."""
    models = group_models(scenario, streams, label_mix)
    missing = [g.availability.policy for g, m in zip(scenario.devices, models) if m is None]
    if missing:
        raise ValueError(f"policies without a population form: {', '.join(missing)}")
    return models  # type: ignore[return-value]


def device_policies(
    scenario: Scenario, streams: RandomStreams, sizes: np.ndarray, label_mix: np.ndarray
) -> tuple[list[AvailabilityPolicy], list[SessionPolicy | None]]:
    """The actor form's availability policy and charger of every device: a row of its group's model where the
    policy has a population form, else a policy object of its own with its own stream.

    ``sizes``: each device's number of training samples; ``label_mix`` (devices x labels) its label shares.
    """
    base_dir = scenario.source.parent if scenario.source is not None else Path.cwd()
    infos, row_in_group = [], []
    for group in scenario.devices:
        for row in range(group.count):
            i = len(infos)
            infos.append(DeviceInfo(i, group.group, int(sizes[i]), label_mix[i], scenario.seeds.world, base_dir))
            row_in_group.append(row)
    out: dict[str, list] = {}
    for role in ("availability", "charging"):
        models = group_models(scenario, streams, label_mix, role)
        views: list = []
        for group, model in zip(scenario.devices, models):
            spec = policy_of(group, role)
            rows = Lookahead(model) if model is not None else None
            first = len(views)
            for info in infos[first : first + group.count]:
                if spec is None:
                    views.append(None)
                elif model is not None:
                    cls: type[PopulationRow] = policy_class(spec.policy, base_dir)  # type: ignore[assignment]
                    views.append(cls.row_of(rows, row_in_group[info.index], info))
                else:
                    views.append(build_policy(spec, info, streams.numpy(role, info.index)))
        out[role] = views
    return out["availability"], out["charging"]


def edge_policies(scenario: Scenario, streams: RandomStreams, num_classes: int) -> dict[str, AvailabilityPolicy]:
    """The availability policy of each edge server that has one (hierarchical FL), each with its own stream; an
    edge sees no data (its info: no samples, an even label mix) and is numbered -1, -2, ... after the devices'
    convention of 0, 1, ..."""
    base_dir = scenario.source.parent if scenario.source is not None else Path.cwd()
    out = {}
    for k, (name, node) in enumerate(scenario.network.nodes.items()):
        if node.kind == "edge" and node.availability is not None:
            info = DeviceInfo(
                -1 - k, f"edge:{name}", 0, np.full(num_classes, 1 / num_classes), scenario.seeds.world, base_dir
            )
            out[name] = build_policy(node.availability, info, streams.numpy("edge_availability", name))
    return out
