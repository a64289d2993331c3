"""One scenario, end to end: data, learner, simulated world, results on disk."""

from __future__ import annotations

import gc
import importlib.metadata
import platform
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from netfl.assemble import build_simulation
from netfl.backend import Diverged
from netfl.checkpoint import Checkpoint, Every, Recording, Replaying, checkpoint_path
from netfl.config import scenario_document
from netfl.config.schema import Scenario
from netfl.errors import UserCodeError
from netfl.learn.federation.learner import Learner
from netfl.learn.federation.strategy_calls import AggregationRecord
from netfl.learn.training.runtime import adapts_to_other_work, use_threads
from netfl.loss_watch import LossExplosion, LossWatch
from netfl.results.progress import Progress
from netfl.results.row_table import RowTable
from netfl.results.tracking import Label, Tracking, check_tracking, track_run, tracking_of
from netfl.results.writer import write_run
from netfl.signals import Interrupted, Noted, signals_deferred
from netfl.sim.fleet_readings import NOT_FL, summed
from netfl.sim.simulation import SimulationResult
from netfl.version import __version__


@dataclass
class RunOutcome:
    """A finished (or interrupted) run: its summary, what it measured, and where it was written (if it was)."""

    summary: dict[str, Any]
    out_dir: Path | None
    result: SimulationResult
    num_classes: list[int]  # per task, for the per-class metric columns
    algorithm: list = field(default_factory=list)  # the strategy's metrics, a row per aggregation (algorithm.csv)
    class_names: list = field(default_factory=list)  # per task: its classes' names (LEAF's characters) or None
    vocabularies: list = field(default_factory=list)  # per task: what its token ids stand for (a mapping) or None


def default_out_dir(scenario: Scenario) -> Path:
    return scenario.output.dir or Path("results") / scenario.name


def summarize(
    scenario: Scenario,
    result: SimulationResult,
    *,
    wall_time_s: float,
    complete: bool,
    updates_skipped: int = 0,
    loss_explosion: LossExplosion | None = None,
) -> dict[str, Any]:
    """summary.json's content. ``complete``: the run ended by itself (it was not interrupted), so running it
    again gives the same results -- also when training diverged (``stopped_by: diverged``, ``divergence``);
    ``updates_skipped``: the learner's non-finite updates dropped under ``server.on_divergence: skip_update``;
    ``loss_explosion``: the first evaluation whose loss exploded (:mod:`netfl.loss_watch`)."""
    accuracies = [m.test_accuracy for m in result.metrics]
    energy_by_activity = {name: float(joules.sum()) for name, joules in result.stats.energy_by_activity_j.items()}
    return {
        "scenario": scenario.name,
        "topology": str(scenario.source.resolve()) if scenario.source is not None else None,
        "seed": scenario.seed,
        "world_seed": scenario.seeds.world,
        "training_seed": scenario.seeds.training,
        "algorithm": scenario.server.algorithm.label,
        "rounds": result.rounds,
        "final_test_accuracy": accuracies[-1] if accuracies else None,
        "best_test_accuracy": max(accuracies) if accuracies else None,
        "sim_time_s": result.sim_time_s,
        "wall_time_s": wall_time_s,
        "energy_j": result.energy_j,
        "work_energy_j": result.work_energy_j,
        "energy_by_activity_j": dict(sorted(energy_by_activity.items())),
        "updates_received": result.updates_received,
        "updates_applied": result.updates_applied,
        "updates_dropped": result.updates_dropped,
        "updates_skipped": updates_skipped,
        "stopped_by": result.stopped_by,
        "divergence": _divergence_summary(result),
        "loss_explosion": loss_explosion.record() if loss_explosion is not None else None,
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
        "versions": software_versions(),
    }


class _Checkpointing:
    """The learner as the engine talks to it when checkpoints are kept: its answers logged and checkpoints saved
    to ``path`` (and, resuming, first the checkpoint's answers replayed). ``wrap`` is what
    :func:`~netfl.assemble.build_simulation` calls with the learner; ``save_now`` checkpoints where an interrupted
    run stopped."""

    def __init__(
        self, scenario: Scenario, path: Path, every: Every | None, resume: Checkpoint | None, options: dict[str, Any]
    ):
        self.scenario, self.path, self.resume, self.options = scenario, path, resume, options
        self.every = every or resume.every
        self.wrapped: Recording | Replaying | None = None

    def wrap(self, learner: Learner) -> Recording | Replaying:
        scenario, resume = self.scenario, self.resume
        source = str(scenario.source.resolve()) if scenario.source is not None else None

        def save(log: list, rounds: int, sim_time_s: float, stopped_at_s: float | None) -> None:
            Checkpoint(
                scenario_document(scenario),
                source,
                self.options,
                self.every,
                list(log),
                learner.state(),
                rounds,
                sim_time_s,
                software_versions(),
                stopped_at_s=stopped_at_s,
            ).save(self.path)

        done = (resume.rounds, resume.sim_time_s) if resume is not None else (0, 0.0)
        recording = Recording(learner, self.every, save, done=done)
        self.wrapped = (
            recording
            if resume is None
            else Replaying(resume.log, recording, then=lambda: resume.restore_learner(learner))
        )
        return self.wrapped

    def save_now(self, now: float) -> bool:
        return self.wrapped is not None and self.wrapped.save_now(now)


def software_versions() -> dict[str, str]:
    """What produced a run (a run is repeated as it was only with the same versions)."""
    versions = {"python": platform.python_version(), "netfl": __version__}
    for package in ("torch", "numpy", "simpy"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = "unknown"
    return versions


def device_columns(result: SimulationResult) -> RowTable:
    """One row per device for devices.parquet: participation, online fraction, energy and battery; each column made
    when read, whole or a range of devices at a time (the writer reads a row group at a time)."""
    stats, duration = result.stats, result.sim_time_s

    def energy(rows: slice, work_only: bool) -> np.ndarray:  # summed as DeviceStats sums: the same bits
        loads = stats.energy_by_activity_j.items()
        return summed((e[rows] for a, e in loads if not (work_only and a in NOT_FL)), rows.stop - rows.start)

    made: dict[str, Callable[[slice], Any]] = {
        "device": lambda rows: np.arange(rows.start, rows.stop),
        "group": lambda rows: pd.Categorical.from_codes(stats.group[rows], categories=stats.group_names),
        "tasks_started": lambda rows: stats.tasks_started[rows],
        "updates_delivered": lambda rows: stats.updates_delivered[rows],
        "online_fraction": lambda rows: (
            stats.online_time_s[rows] / duration if duration > 0 else np.zeros(rows.stop - rows.start)
        ),
        "energy_j": lambda rows: energy(rows, work_only=False),
        "work_energy_j": lambda rows: energy(rows, work_only=True),  # what FL cost the device (training and radio)
        "charged_j": lambda rows: stats.charged_j[rows],
        "battery_fraction": lambda rows: stats.battery_fraction[rows],
        "battery_empty": lambda rows: stats.battery_empty[rows],
    }
    for activity in sorted(stats.energy_by_activity_j):
        made[f"energy_{activity}_j"] = lambda rows, activity=activity: stats.energy_by_activity_j[activity][rows]
    return RowTable(list(made), len(stats.group), lambda name, rows: made[name](rows))


def _task_summaries(scenario: Scenario, result: SimulationResult) -> list[dict[str, Any]]:
    """Each model's data set, architecture and accuracies (the run's own when it trains one model)."""
    out = []
    for s, task in enumerate(scenario.tasks):
        acc = [m.tasks[s].accuracy if m.tasks else m.test_accuracy for m in result.metrics]
        out.append(
            {
                "dataset": task.dataset.label,
                "model": task.model.label,
                "final_test_accuracy": acc[-1] if acc else None,
                "best_test_accuracy": max(acc) if acc else None,
            }
        )
    return out


def _divergence_summary(result: SimulationResult) -> dict[str, Any] | None:
    """Where training stopped on a NaN or inf (None when it did not): the round, the simulated time, what was
    not finite and the clients concerned."""
    d = result.divergence
    if d is None:
        return None
    return {"round": d.round_index, "sim_time_s": result.sim_time_s, "where": d.where, "clients": list(d.clients)}


def _staleness_summary(staleness: list[int]) -> dict[str, Any]:
    if not staleness:
        return {"mean": None, "max": None, "histogram": {}}
    values, counts = np.unique(staleness, return_counts=True)
    return {
        "mean": float(np.mean(staleness)),
        "max": int(values[-1]),
        "histogram": {str(int(v)): int(c) for v, c in zip(values, counts)},
    }


def run_scenario(
    scenario: Scenario,
    *,
    out_dir: Path | None = None,
    data_dir: Path | None = None,
    progress: Progress | None = None,
    device: str = "cpu",
    threads: int | None = None,
    write: bool = True,
    extra_summary: dict[str, Any] | None = None,
    checkpoint_every: Every | None = None,
    resume: Checkpoint | None = None,
    warn: Callable[[str], None] | None = None,
    tracking: Tracking | None = None,
    observers: Sequence[Callable[[AggregationRecord], object]] = (),
) -> RunOutcome:
    """Run ``scenario`` and (``write``) write its results to ``out_dir`` (default ``results/<name>``).

    ``threads``: training worker threads (default: every CPU this process may use, fewer while other processes
    keep some busy; see :mod:`netfl.learn.training.runtime`). ``extra_summary``: keys added to summary.json as they are
    (a sweep's ``study``: case, seed, overrides). ``checkpoint_every``: keep a checkpoint beside ``out_dir``
    (:mod:`netfl.checkpoint`), removed when the run completes; ``resume``: continue from one (the run's
    events and metrics are those of a run that never stopped). ``warn(message)``: told of a loss explosion as
    the run goes on (:mod:`netfl.loss_watch`; it is in the summary either way). Interrupted (Ctrl-C, or SIGTERM under
    :func:`~netfl.signals.terminate_as_interrupt`), the partial results are written with ``complete: false``
    and :class:`~netfl.signals.Interrupted` says where (nowhere if the world was still being built).
    ``tracking``: where the written run is also logged (:mod:`netfl.results.tracking`; checked before the run)
    [default: the scenario's ``tracking:``, or, resuming, where the interrupted run was to be logged];
    ``Tracking()`` logs nowhere. ``observers``: callables that see each aggregation as it happens
    (:class:`netfl.algorithms.AggregationRecord`). An error of the user's code mid-run (a strategy's hook, a
    model) writes the partial results (``complete: false``) and is raised again, saying where they are.
    """
    started = time.perf_counter()
    if tracking is None:
        tracking = _resumed_tracking(resume) if resume is not None else tracking_of(scenario)
    if tracking and write:
        check_tracking(tracking, str(scenario.source) if scenario.source is not None else "tracking")
    threads = use_threads(threads)
    target = Path(out_dir or default_out_dir(scenario))
    keeper = (
        _Checkpointing(
            scenario,
            checkpoint_path(target),
            checkpoint_every,
            resume,
            {
                "data_dir": str(data_dir) if data_dir is not None else None,
                "tracking": {
                    "tensorboard": str(tracking.tensorboard) if tracking.tensorboard else None,
                    "mlflow": tracking.mlflow,
                },
            },
        )
        if checkpoint_every is not None or resume is not None
        else None
    )
    stop_on_explosion = scenario.server.on_loss_explosion == "stop"

    def watched(learner: Learner) -> LossWatch:  # outermost: it sees replayed evaluations too
        inner = keeper.wrap(learner) if keeper is not None else learner
        return LossWatch(inner, stop=stop_on_explosion, warn=warn)

    try:
        simulation, learner = build_simulation(
            scenario, data_dir=data_dir, device=device, wrap=watched, observers=observers
        )
    except KeyboardInterrupt:
        raise Interrupted(None) from None
    watch: LossWatch = simulation.backend
    watch.clock = lambda: simulation.env.now
    if progress is not None:
        simulation.progress = progress.update
    complete, stopped_cleanly = True, False
    failure: UserCodeError | None = None  # the user's code (a strategy's hook, a model) failed mid-run
    # Keeping checkpoints, a Ctrl-C or SIGTERM is noted and stops the engine between two events (after the one
    # under way, training included), so the checkpoint written there holds every answer the learner gave.
    noted = Noted()
    try:
        with signals_deferred() if keeper is not None else nullcontext(noted) as noted:
            if keeper is not None:
                simulation.env.stop_requested = noted.__len__
            try:
                result = simulation.run()
            except KeyboardInterrupt:
                noted.take()  # acted on: the run ends interrupted and says so (not delivered again)
                raise
    except KeyboardInterrupt:
        complete, stopped_cleanly = False, bool(noted)
    except UserCodeError as exc:  # the results up to there are written whole, then the error is said
        complete, failure = False, exc
    except Diverged as exc:  # the initial model's evaluation (before the engine starts) is not finite: the run
        result = simulation.diverged_result(exc.divergence)  # diverged at round 0, written as at any round
    finally:
        if progress is not None:
            progress.close()
    # From here on a Ctrl-C (a second one) must not destroy what is being written; one that comes meanwhile is
    # taken (below): the run ends as soon as its results are whole, and says how it ended.
    with signals_deferred() as late:
        checkpointed = stopped_cleanly and keeper.save_now(simulation.env.now)
        if not complete:
            result = simulation.partial_result()
        adaptive = adapts_to_other_work()
        trainers = [task.trainer.describe(threads, adaptive) for task in learner.tasks]
        num_classes = [task.num_classes for task in learner.tasks]
        class_names = [task.dataset.class_names for task in learner.tasks]
        vocabularies = [v.document() if (v := task.dataset.vocabulary) is not None else None for task in learner.tasks]
        updates_skipped, explosion = learner.updates_skipped, watch.explosion
        algorithm_rows = learner.strategy_metrics
        stopped_at = simulation.env.now if checkpointed else None
        keeping = keeper is not None
        # The world and the learner are done with: at ten million devices their arrays (rows, models, the data's
        # partition) are gigabytes that summing and writing the results do not need (the result holds its own),
        # and the engine's processes hold them in reference cycles only a collection frees.
        simulation = learner = watch = keeper = None
        gc.collect()
        summary = summarize(
            scenario,
            result,
            wall_time_s=time.perf_counter() - started,
            complete=complete,
            updates_skipped=updates_skipped,
            loss_explosion=explosion,
        )
        summary.update(device=device, threads=threads, threads_adaptive=adaptive, **(extra_summary or {}))
        for task_summary, training in zip(summary["tasks"], trainers):
            task_summary["training"] = training
        outcome = RunOutcome(summary, None, result, num_classes, algorithm_rows, class_names, vocabularies)
        unfilled = _unfilled_buffer(scenario, result) if complete else None
        if unfilled is not None and warn is not None:
            warn(unfilled)
        if write:
            outcome.out_dir = write_run(
                target,
                summary=summary,
                metrics=result.metrics,
                devices=device_columns(result),
                num_classes=outcome.num_classes,
                class_names=outcome.class_names,
                vocabularies=outcome.vocabularies,
                events=result.recorder.columns(),
                staleness=result.staleness if scenario.server.mode == "async" else (),
                title=f"{scenario.name}: {scenario.server.algorithm.label}",
                scenario=scenario_document(scenario),
                source=str(scenario.source.resolve()) if scenario.source is not None else None,
                timeline=result.timeline.columns() if result.timeline is not None else None,
                algorithm=algorithm_rows,
            )
        late.take()
    if failure is not None:
        kept = f"; the run's results up to there are in {outcome.out_dir}/ (complete: false)" if write else ""
        raise type(failure)(f"{failure}{kept}") from None
    if not complete:
        raise Interrupted(outcome.out_dir, checkpointed_at=stopped_at)
    if keeping:
        checkpoint_path(target).unlink(missing_ok=True)  # the run is whole: nothing to resume
    if tracking and outcome.out_dir is not None:  # from the files written, so trackers hold exactly their values
        track_run(outcome.out_dir, tracking, Label.of_run(outcome.out_dir, scenario.name))
    return outcome


def _unfilled_buffer(scenario: Scenario, result) -> str | None:
    """The warning for an asynchronous run that received updates but never aggregated: its buffer never filled,
    so the model it reports is the initial one."""
    if scenario.server.mode != "async" or result.rounds or not result.updates_received:
        return None
    buffer = scenario.server.async_.buffer
    return (
        f"warning: server.async.buffer ({buffer:,}) never filled: {result.updates_received:,} update(s) reached "
        f"the server by the stop ({result.stopped_by}) and none was applied (0 aggregations, the initial model); "
        "use a smaller buffer or a longer run"
    )


def _resumed_tracking(resume: Checkpoint) -> Tracking:
    """Where the interrupted run was to be logged (its checkpoint's options; none for an older checkpoint)."""
    saved = resume.options.get("tracking") or {}
    board, uri = saved.get("tensorboard"), saved.get("mlflow")
    return Tracking(Path(board) if isinstance(board, str) else None, uri if isinstance(uri, str) else None)
