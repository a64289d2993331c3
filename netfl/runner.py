"""One scenario, end to end: data, learner, simulated world, results on disk."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from netfl.errors import ScenarioError
from netfl.learn.algorithms import ClientInfo, build_strategy
from netfl.learn.datasets import Dataset, load_dataset
from netfl.learn.learner import Learner, LocalConfig
from netfl.learn.partition import label_distribution, partition_indices
from netfl.policies import DeviceInfo, build_policy
from netfl.results.progress import Progress
from netfl.results.writer import write_run
from netfl.rng import RandomStreams
from netfl.scenario import Scenario
from netfl.sim.simulation import Simulation, SimulationResult


@dataclass
class RunOutcome:
    summary: dict[str, Any]
    out_dir: Path


def default_out_dir(scenario: Scenario) -> Path:
    return scenario.output.dir or Path("results") / scenario.name


def resolve_data_dir(scenario: Scenario, override: Path | None) -> Path | None:
    """--data-dir wins; a data_dir in the YAML is relative to the YAML file."""
    if override is not None:
        return override
    data_dir = scenario.task.dataset.data_dir
    if data_dir is not None and not data_dir.is_absolute() and scenario.source is not None:
        return scenario.source.parent / data_dir
    return data_dir


def build_simulation(scenario: Scenario, *, data_dir: Path | None = None) -> tuple[Simulation, Dataset]:
    streams = RandomStreams(scenario.seed)
    task = scenario.task
    dataset = load_dataset(task.dataset.name, data_dir=resolve_data_dir(scenario, data_dir),
                           test_fraction=task.dataset.test_fraction, seed=streams.integer_seed("test_split"))
    labels = dataset.train_y.numpy()
    part = task.dataset.partition
    try:
        parts = partition_indices(labels, scenario.num_devices, part.kind, streams.numpy("partition"),
                                  alpha=part.alpha, classes_per_client=part.classes_per_client)
    except ValueError as exc:
        raise ScenarioError(str(scenario.source or scenario.name), [("task.dataset.partition", str(exc))]) from None
    mix = label_distribution(labels, parts, dataset.num_classes)
    groups = [g for g in scenario.devices for _ in range(g.count)]
    base_dir = scenario.source.parent if scenario.source is not None else Path.cwd()
    infos = [DeviceInfo(i, g.group, len(parts[i]), mix[i], scenario.seed, base_dir) for i, g in enumerate(groups)]
    policies = [build_policy(g.availability, info, streams.numpy("availability", info.index))
                for info, g in zip(infos, groups)]
    chargers = [build_policy(g.battery.charging, info, streams.numpy("charging", info.index))
                if g.battery is not None and g.battery.charging is not None else None
                for info, g in zip(infos, groups)]
    participation = tuple(getattr(p, "p", None) for p in policies)
    try:
        strategy = build_strategy(scenario.server.algorithm,
                                  ClientInfo(tuple(len(p) for p in parts), task.local.lr, participation,
                                             lr_schedule=task.local.lr_schedule))
    except ValueError as exc:  # e.g. an algorithm that needs p_i with a policy that has none
        raise ScenarioError(str(scenario.source or scenario.name), [("server.algorithm", str(exc))]) from None
    local = LocalConfig(task.local.steps, task.local.epochs, task.local.batch_size, task.local.lr,
                        task.local.weight_decay, task.local.lr_schedule)
    learner = Learner(dataset=dataset, parts=parts, model_name=task.model.name, hidden=task.model.hidden,
                      local=local, strategy=strategy, streams=streams,
                      max_test_samples=scenario.eval.max_test_samples)
    return Simulation(scenario, learner, policies, streams, chargers), dataset


def summarize(scenario: Scenario, result: SimulationResult, *, wall_time_s: float, complete: bool) -> dict[str, Any]:
    accuracies = [m.test_accuracy for m in result.metrics]
    energy_by_activity: dict[str, float] = {}
    for d in result.devices:
        for name, joules in d.battery.energy_j.items():
            energy_by_activity[name] = energy_by_activity.get(name, 0.0) + joules
    return {
        "scenario": scenario.name,
        "seed": scenario.seed,
        "algorithm": scenario.server.algorithm.name,
        "rounds": result.rounds,
        "final_test_accuracy": accuracies[-1] if accuracies else None,
        "best_test_accuracy": max(accuracies) if accuracies else None,
        "sim_time_s": result.sim_time_s,
        "wall_time_s": wall_time_s,
        "energy_j": result.energy_j,
        "energy_by_activity_j": dict(sorted(energy_by_activity.items())),
        "updates_received": result.updates_received,
        "updates_applied": result.updates_applied,
        "updates_dropped": result.updates_dropped,
        "stopped_by": result.stopped_by,
        "complete": complete,
        "bytes_up": result.network.bytes_up,
        "bytes_down": result.network.bytes_down,
        "airtime_s": result.network.airtime_s,
        "collisions": result.network.collisions,
        "retransmissions": result.network.retransmissions,
        "relays": result.relays,
        "staleness": _staleness_summary(result.staleness),
        "num_devices": len(result.devices),
        "events": len(result.recorder),
        "devices": [{"device": d.index, "group": d.profile.group, "tasks_started": d.tasks_started,
                     "updates_delivered": d.updates_delivered,
                     "online_fraction": d.online_time_s / result.sim_time_s if result.sim_time_s > 0 else 0.0,
                     "energy_j": d.battery.total_energy_j, "charged_j": d.battery.charged_j,
                     "battery_fraction": None if d.battery.mains else d.battery.level_j / d.battery.capacity_j,
                     "battery_empty": d.dead} for d in result.devices],
    }


def _staleness_summary(staleness: list[int]) -> dict[str, Any]:
    if not staleness:
        return {"mean": None, "max": None, "histogram": {}}
    values, counts = np.unique(staleness, return_counts=True)
    return {"mean": float(np.mean(staleness)), "max": int(values[-1]),
            "histogram": {str(int(v)): int(c) for v, c in zip(values, counts)}}


def run_scenario(scenario: Scenario, *, out_dir: Path | None = None, data_dir: Path | None = None,
                 progress: Progress | None = None) -> RunOutcome:
    started = time.perf_counter()
    simulation, dataset = build_simulation(scenario, data_dir=data_dir)
    if progress is not None:
        simulation.progress = progress.update
    complete = True
    try:
        result = simulation.run()
    except KeyboardInterrupt:
        complete = False
        result = simulation.partial_result()
    finally:
        if progress is not None:
            progress.close()
    summary = summarize(scenario, result, wall_time_s=time.perf_counter() - started, complete=complete)
    out = write_run(out_dir or default_out_dir(scenario), summary=summary, metrics=result.metrics,
                    num_classes=dataset.num_classes, events=result.recorder.columns(), staleness=result.staleness,
                    title=f"{scenario.name}: {scenario.server.algorithm.name}")
    if not complete:
        raise KeyboardInterrupt
    return RunOutcome(summary, out)
