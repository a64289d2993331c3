"""The building layer: a validated scenario in, the engine's world and the learner out.

:func:`build_simulation` loads the data, splits it over the devices, builds
each device's availability from that split, the learner with its strategy,
and the world (:mod:`netfl.assemble.world`), and joins them in a
:class:`~netfl.sim.simulation.Simulation`. It is the only place that reads
a :class:`~netfl.config.schema.Scenario` to make engine or learner objects.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from netfl.assemble.availability import (
    device_policies,
    edge_policies,
    group_models,
    population_models,
    usage_setups,
)
from netfl.assemble.inspect import check_measured_budget
from netfl.assemble.learning import build_learner, build_task, resolve_data_dir
from netfl.assemble.world import build_world, device_table
from netfl.backend import TrainingBackend
from netfl.config.engine_form import engine_choice
from netfl.config.schema import Scenario
from netfl.errors import NetflError
from netfl.learn.data.label_mix import LabelMix
from netfl.learn.federation.learner import Learner
from netfl.learn.federation.strategy_calls import AggregationRecord
from netfl.learn.training.runtime import torch_device
from netfl.rng import RandomStreams
from netfl.sim.simulation import Simulation

__all__ = [
    "build_learner",
    "build_simulation",
    "build_task",
    "build_world",
    "device_policies",
    "device_table",
    "population_models",
    "resolve_data_dir",
]


def build_simulation(
    scenario: Scenario,
    *,
    data_dir: Path | None = None,
    device: str = "cpu",
    wrap: Callable[[Learner], TrainingBackend] | None = None,
    observers: Sequence[Callable[[AggregationRecord], object]] = (),
) -> tuple[Simulation, Learner]:
    """The simulated world and its learner; ``device`` is where torch trains (``cpu``, ``cuda``, ``cuda:1``);
    ``wrap``: what the engine talks to instead of the learner itself (checkpoints log and replay its answers);
    ``observers``: callables that see each aggregation (:class:`netfl.algorithms.AggregationRecord`).

    The world draws from the scenario's world seed, the learner (data split, model, minibatches, selection)
    from its training seed, so a study can vary one and hold the other.
    """
    try:
        torch_device(device)  # before loading any data
    except ValueError as exc:
        raise NetflError(f"device {exc}") from None
    world_streams, training_streams = RandomStreams(scenario.seeds.world), RandomStreams(scenario.seeds.training)
    tasks = [build_task(scenario, s, training_streams, data_dir) for s in range(len(scenario.tasks))]
    if scenario.names_users_code:  # the budgets, on the measured module, before the learner builds it for real
        check_measured_budget(scenario, tasks)
    first = tasks[0]
    mix = LabelMix(first.dataset.train_y.numpy(), first.parts, first.dataset.num_classes)  # read if a policy asks
    edges = edge_policies(scenario, world_streams, first.dataset.num_classes)
    usage = usage_setups(scenario, world_streams, mix)
    choice = engine_choice(scenario)
    if choice.form == "arrays":
        population = population_models(scenario, world_streams, mix)
        charging = group_models(scenario, world_streams, mix, "charging")
        world = build_world(
            scenario,
            world_streams,
            population=population,
            charging=charging,
            usage=usage,
            edge_policies=edges,
            idle_events=choice.idle_events,
        )
        participation = (  # None: no policy states a p (a million Nones would be a million pointers)
            [p for m in population for p in (m.participation.tolist() if m.participation is not None else [None] * m.n)]
            if any(m.participation is not None for m in population)
            else None
        )
    else:
        policies, chargers = device_policies(scenario, world_streams, first.parts.sizes, mix)
        world = build_world(
            scenario, world_streams, policies=policies, chargers=chargers, usage=usage, edge_policies=edges
        )
        participation = [p.participation_probability() for p in policies]
    learner = build_learner(scenario, tasks, training_streams, participation, device, observers)
    if world.hierarchy is not None:  # the edges' models on the wire are the learner's
        world.hierarchy = replace(world.hierarchy, model_bytes=learner.edge_model_bytes)
    return Simulation(world, learner if wrap is None else wrap(learner)), learner
