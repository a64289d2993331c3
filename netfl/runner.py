"""One scenario, end to end: data, learner, simulated world, results on disk."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from netfl.errors import NetflError, ScenarioError
from netfl.learn.algorithms import ClientInfo, build_strategy
from netfl.learn.datasets import load_dataset
from netfl.learn.learner import Learner, LocalConfig, TaskSetup
from netfl.learn.runtime import torch_device, use_threads
from netfl.learn.partition import ClientParts, label_distribution, partition_indices, sample_parts
from netfl.policies import DeviceInfo, build_policy
from netfl.results.progress import Progress
from netfl.results.writer import write_run
from netfl.rng import RandomStreams
from netfl.scenario import Scenario
from netfl.sim.simulation import Simulation, SimulationResult, population_models


@dataclass
class RunOutcome:
    """A finished (or interrupted) run: its summary, what it measured, and where it was written (if it was)."""

    summary: dict[str, Any]
    out_dir: Path | None
    result: SimulationResult
    num_classes: list[int]  # per task, for the per-class metric columns


def default_out_dir(scenario: Scenario) -> Path:
    return scenario.output.dir or Path("results") / scenario.name


def resolve_data_dir(scenario: Scenario, override: Path | None, task: int = 0) -> Path | None:
    """--data-dir wins; a data_dir in the YAML is relative to the YAML file."""
    if override is not None:
        return override
    data_dir = scenario.tasks[task].dataset.data_dir
    if data_dir is not None and not data_dir.is_absolute() and scenario.source is not None:
        return scenario.source.parent / data_dir
    return data_dir


def _stream_keys(task: int) -> tuple[int, ...]:
    """Task 0 keeps the stream names single-task scenarios always had; task s > 0 adds its index."""
    return (task,) if task else ()


def build_task(scenario: Scenario, task: int, streams: RandomStreams, data_dir: Path | None) -> TaskSetup:
    """Load task ``task``'s data set and split it over the devices."""
    spec = scenario.tasks[task]
    keys = _stream_keys(task)
    dataset = load_dataset(spec.dataset.name, data_dir=resolve_data_dir(scenario, data_dir, task),
                           test_fraction=spec.dataset.test_fraction, seed=streams.integer_seed("test_split", *keys))
    if spec.dataset.max_train_samples is not None and spec.dataset.max_train_samples < len(dataset.train_y):
        keep = np.sort(streams.numpy("train_subset", *keys).choice(len(dataset.train_y), spec.dataset.max_train_samples,
                                                                    replace=False))
        dataset = replace(dataset, train_x=dataset.train_x[keep], train_y=dataset.train_y[keep])
    part = spec.dataset.partition
    labels, rng = dataset.train_y.numpy(), streams.numpy("partition", *keys)
    try:
        if part.samples_per_client is not None:
            parts = sample_parts(labels, scenario.num_devices, part.samples_per_client, part.kind, rng,
                                 alpha=part.alpha, classes_per_client=part.classes_per_client)
        else:
            parts = ClientParts.of(partition_indices(labels, scenario.num_devices, part.kind, rng, alpha=part.alpha,
                                                     classes_per_client=part.classes_per_client,
                                                     exclusive=part.exclusive, quantity_skew=part.quantity_skew))
    except ValueError as exc:
        where = "task" if len(scenario.tasks) == 1 else f"tasks[{task}]"
        hint = ("; give dataset.partition.samples_per_client to let devices share samples"
                if scenario.num_devices > len(labels) else "")
        raise ScenarioError(str(scenario.source or scenario.name),
                            [(f"{where}.dataset.partition", f"{exc}{hint}")]) from None
    local = LocalConfig(spec.local.steps, spec.local.epochs, spec.local.batch_size, spec.local.lr,
                        spec.local.weight_decay, spec.local.lr_schedule)
    return TaskSetup(dataset, parts, spec.model.name, spec.model.hidden, local)


def build_simulation(scenario: Scenario, *, data_dir: Path | None = None,
                     device: str = "cpu") -> tuple[Simulation, Learner]:
    """The simulated world and its learner; ``device`` is where torch trains (``cpu``, ``cuda``, ``cuda:1``)."""
    try:
        torch_device(device)  # before loading any data
    except ValueError as exc:
        raise NetflError(f"device {exc}") from None
    streams = RandomStreams(scenario.seed)
    tasks = [build_task(scenario, s, streams, data_dir) for s in range(len(scenario.tasks))]
    first = tasks[0]
    mix = label_distribution(first.dataset.train_y.numpy(), first.parts, first.dataset.num_classes)
    if scenario.engine.devices == "lazy":
        population = population_models(scenario, streams, mix)
        policies, chargers = None, None
        participation = tuple(p for m in population
                              for p in (m.participation.tolist() if m.participation is not None else [None] * m.n))
    else:
        population = None
        policies, chargers = _device_policies(scenario, streams, first.parts, mix)
        participation = tuple(p.participation_probability() for p in policies)
    sizes = tuple(tuple(t.parts.sizes.tolist()) for t in tasks)
    local = scenario.task.local
    try:
        strategy = build_strategy(scenario.server.algorithm,
                                  ClientInfo(sizes[0], local.lr, participation, lr_schedule=local.lr_schedule,
                                             task_sizes=sizes))
    except ValueError as exc:  # e.g. an algorithm that needs p_i with a policy that has none
        raise ScenarioError(str(scenario.source or scenario.name), [("server.algorithm", str(exc))]) from None
    learner = Learner(tasks, strategy=strategy, streams=streams, participants=scenario.server.round.participants,
                      max_test_samples=scenario.eval.max_test_samples, device=device)
    return Simulation(scenario, learner, policies, streams, chargers, population=population), learner


def _device_policies(scenario: Scenario, streams: RandomStreams, parts: ClientParts, mix: np.ndarray) -> tuple[list, list]:
    """The eager engine's availability policy and charger of every device, each with its own stream."""
    groups = [g for g in scenario.devices for _ in range(g.count)]
    base_dir = scenario.source.parent if scenario.source is not None else Path.cwd()
    infos = [DeviceInfo(i, g.group, int(size), mix[i], scenario.seed, base_dir)
             for i, (g, size) in enumerate(zip(groups, parts.sizes))]
    policies = [build_policy(g.availability, info, streams.numpy("availability", info.index))
                for info, g in zip(infos, groups)]
    chargers = [build_policy(g.battery.charging, info, streams.numpy("charging", info.index))
                if g.battery is not None and g.battery.charging is not None else None
                for info, g in zip(infos, groups)]
    return policies, chargers


def summarize(scenario: Scenario, result: SimulationResult, *, wall_time_s: float, complete: bool) -> dict[str, Any]:
    accuracies = [m.test_accuracy for m in result.metrics]
    energy_by_activity = {name: float(joules.sum()) for name, joules in result.stats.energy_by_activity_j.items()}
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
        "tasks": _task_summaries(scenario, result),
        "num_devices": len(result.stats.group),
        "devices_battery_empty": int(result.stats.battery_empty.sum()),
        "events": len(result.recorder),
    }


def device_columns(result: SimulationResult) -> dict[str, Any]:
    """One row per device for devices.parquet: participation, online fraction, energy and battery."""
    stats, duration = result.stats, result.sim_time_s
    columns: dict[str, Any] = {
        "device": np.arange(len(stats.group)), "group": stats.group, "tasks_started": stats.tasks_started,
        "updates_delivered": stats.updates_delivered,
        "online_fraction": stats.online_time_s / duration if duration > 0 else np.zeros(len(stats.group)),
        "energy_j": stats.energy_j, "charged_j": stats.charged_j,
        "battery_fraction": stats.battery_fraction, "battery_empty": stats.battery_empty}
    for activity, joules in sorted(stats.energy_by_activity_j.items()):
        columns[f"energy_{activity}_j"] = joules
    return columns


def _task_summaries(scenario: Scenario, result: SimulationResult) -> list[dict[str, Any]]:
    """Each model's data set, architecture and accuracies (the run's own when it trains one model)."""
    out = []
    for s, task in enumerate(scenario.tasks):
        acc = [m.tasks[s].accuracy if m.tasks else m.test_accuracy for m in result.metrics]
        out.append({"dataset": task.dataset.name, "model": task.model.name,
                    "final_test_accuracy": acc[-1] if acc else None, "best_test_accuracy": max(acc) if acc else None})
    return out


def _staleness_summary(staleness: list[int]) -> dict[str, Any]:
    if not staleness:
        return {"mean": None, "max": None, "histogram": {}}
    values, counts = np.unique(staleness, return_counts=True)
    return {"mean": float(np.mean(staleness)), "max": int(values[-1]),
            "histogram": {str(int(v)): int(c) for v, c in zip(values, counts)}}


def run_scenario(scenario: Scenario, *, out_dir: Path | None = None, data_dir: Path | None = None,
                 progress: Progress | None = None, device: str = "cpu", threads: int | None = None,
                 write: bool = True) -> RunOutcome:
    """Run ``scenario`` and (``write``) write its results to ``out_dir`` (default ``results/<name>``).

    ``threads``: training worker threads (default: every CPU this process may use; see
    :mod:`netfl.learn.runtime`). Interrupted (Ctrl-C), the partial results are written with
    ``complete: false`` and KeyboardInterrupt is raised again.
    """
    started = time.perf_counter()
    threads = use_threads(threads)
    simulation, learner = build_simulation(scenario, data_dir=data_dir, device=device)
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
    summary.update(device=device, threads=threads)
    outcome = RunOutcome(summary, None, result, [task.num_classes for task in learner.tasks])
    if write:
        outcome.out_dir = write_run(
            out_dir or default_out_dir(scenario), summary=summary, metrics=result.metrics,
            devices=device_columns(result), num_classes=outcome.num_classes, events=result.recorder.columns(),
            staleness=result.staleness if scenario.server.mode == "async" else (),
            title=f"{scenario.name}: {scenario.server.algorithm.name}")
    if not complete:
        raise KeyboardInterrupt
    return outcome
