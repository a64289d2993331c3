"""Scenario -> each device's availability: a policy (and charger) per device, or a population model per group.

The eager engine asks one policy object per device; the lazy engine one
population model per device group (:mod:`netfl.policies.population`). Both
draw only from their own seeded streams, and both see the devices' label
mix (``from: data`` probabilities) from the learner's partition.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from netfl.config.schema import Scenario
from netfl.policies import BUILTIN_POLICIES, AvailabilityPolicy, DeviceInfo, SessionPolicy, build_policy
from netfl.policies.population import PopulationModel, build_population_model
from netfl.rng import RandomStreams


def device_policies(
    scenario: Scenario, streams: RandomStreams, sizes: np.ndarray, label_mix: np.ndarray
) -> tuple[list[AvailabilityPolicy], list[SessionPolicy | None]]:
    """The eager engine's availability policy and charger of every device, each with its own stream.

    ``sizes``: each device's number of training samples; ``label_mix`` (devices x labels) its label shares.
    """
    groups = [g for g in scenario.devices for _ in range(g.count)]
    base_dir = scenario.source.parent if scenario.source is not None else Path.cwd()
    infos = [
        DeviceInfo(i, g.group, int(size), label_mix[i], scenario.seeds.world, base_dir)
        for i, (g, size) in enumerate(zip(groups, sizes))
    ]
    policies = [
        build_policy(g.availability, info, streams.numpy("availability", info.index)) for info, g in zip(infos, groups)
    ]
    chargers = [
        build_policy(g.battery.charging, info, streams.numpy("charging", info.index))
        if g.battery is not None and g.battery.charging is not None
        else None
        for info, g in zip(infos, groups)
    ]
    return policies, chargers


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


def population_models(scenario: Scenario, streams: RandomStreams, label_mix: np.ndarray) -> list[PopulationModel]:
    """The lazy engine's availability: one population model per device group, each with its own keyed stream.

    ``label_mix`` (devices x labels) feeds probabilities given ``from: data`` or ``from: smallest_label``.
    """
    models, start = [], 0
    for group in scenario.devices:
        spec = group.availability
        cls = BUILTIN_POLICIES[spec.policy]
        models.append(
            build_population_model(
                spec.policy,
                cls.Params.model_validate(spec.params),
                group.count,
                streams.integer_seed("availability-population", group.group),
                label_mix[start : start + group.count],
                scenario.seeds.world,
            )
        )
        start += group.count
    return models
