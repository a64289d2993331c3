"""What a checkpoint keeps of the learner: everything a run changes in it (global models and their snapshots, the
strategy and its metrics so far, jobs in flight, the server optimisers' and the devices' error memories, the edge
models, the selection generator), without the data sets; and its return into a learner built from the same scenario.

The state is one dict of plain containers and tensors (the server optimisers pickled whole); each
task's parameter and buffer names and shapes go with it, so a model file changed since the run started is named
(:class:`~netfl.errors.ModelChanged`) instead of failing on a reshape.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import torch

from netfl.errors import ModelChanged
from netfl.learn.federation.divergence_watch import DivergenceWatch
from netfl.learn.federation.jobs import JobBook
from netfl.learn.federation.model_transfer import ModelTransfer
from netfl.learn.federation.server_step import ServerStep
from netfl.learn.federation.strategy import Strategy
from netfl.learn.federation.strategy_calls import StrategyCalls
from netfl.learn.federation.task_model import TaskModel
from netfl.learn.training.runtime import on_device


class Learner(Protocol):
    """The parts of a :class:`~netfl.learn.federation.learner.Learner` its state is made of."""

    tasks: list[TaskModel]
    strategy: Strategy
    calls: StrategyCalls
    version: int
    device: torch.device
    selection: np.random.Generator
    book: JobBook
    watch: DivergenceWatch
    server: ServerStep
    transfer: ModelTransfer


def learner_state(learner: Learner) -> dict:
    """Everything a run changes in ``learner``: what a checkpoint keeps."""
    edges, uplink = learner.server.edges, learner.transfer.uplink
    return {
        "version": learner.version,
        "next_job": learner.book.next_id,
        "jobs": learner.book.jobs,
        "probes": learner.book.probes,
        "updates_skipped": learner.watch.updates_skipped,
        "made_by": learner.watch.made_by,
        "selection": learner.selection.bit_generator.state,
        "strategy": learner.calls.state(),
        "server_optimizers": learner.server.optimizers,
        "strategy_metrics": learner.server.metrics.rows,
        "error_memory": uplink.memory if uplink is not None else None,
        "edge_models": edges.vectors if edges is not None else None,
        "edges_fresh": edges.fresh if edges is not None else None,
        "tasks": [
            {
                "parameters": [(n, tuple(shape)) for n, shape in zip(t.layout.names, t.layout.shapes)],
                "buffers": [(n, tuple(shape)) for n, shape in zip(t.network.buffers.names, t.network.buffers.shapes)],
                "global_vector": t.global_vector,
                "global_buffers": t.global_buffers,
                "snapshots": t.snapshots,
                "device_buffers": t.device_buffers,
            }
            for t in learner.tasks
        ],
    }


def restore_learner(learner: Learner, state: dict) -> None:
    """Continue ``learner`` from :func:`learner_state` (taken from a learner built from the same scenario)."""
    if len(state["tasks"]) != len(learner.tasks):
        raise ValueError(f"the state has {len(state['tasks'])} models, this learner {len(learner.tasks)}")
    for s, (task, saved) in enumerate(zip(learner.tasks, state["tasks"])):
        same_model(s, task, saved)
    state = on_device(state, learner.device)  # a checkpoint of a CPU run resumed on a GPU, or the other way
    learner.version, learner.book.next_id = state["version"], state["next_job"]
    learner.watch.updates_skipped, learner.watch.made_by = state["updates_skipped"], state["made_by"]
    learner.book.jobs, learner.book.probes = state["jobs"], state["probes"]
    learner.calls.restore(state["strategy"])
    learner.server.optimizers = state["server_optimizers"]
    learner.server.metrics.rows = list(state.get("strategy_metrics", ()))  # a checkpoint of netfl 0.2.0 has none
    uplink, edges = learner.transfer.uplink, learner.server.edges
    if uplink is not None:
        uplink.memory = {c: e.to(learner.device) for c, e in state["error_memory"].items()}
    if edges is not None:
        edges.vectors = [[v.to(learner.device) for v in task_edges] for task_edges in state["edge_models"]]
        edges.fresh = bool(state.get("edges_fresh", True))
    learner.selection.bit_generator.state = state["selection"]
    for task, saved in zip(learner.tasks, state["tasks"]):
        device = task.global_vector.device
        task.global_vector = saved["global_vector"].to(device)
        task.global_buffers = saved["global_buffers"].to(device)
        task.snapshots = {v: (w.to(device), b.to(device)) for v, (w, b) in saved["snapshots"].items()}
        task.device_buffers = {c: b.to(device) for c, b in saved["device_buffers"].items()}


def same_model(index: int, task: TaskModel, saved: dict) -> None:
    """ModelChanged when task ``index``'s module no longer has the parameters (names and shapes, then buffers) the
    checkpoint saved, or, for a checkpoint that did not list them, as many values."""
    where = f"{task.recipe.label}" + (f" ({task.recipe.source})" if task.recipe.source is not None else "")
    model = f"the model of task {index}, {where}," if index else f"the model, {where},"
    for kind, names, shapes in (
        ("parameter", task.layout.names, task.layout.shapes),
        ("buffer", task.network.buffers.names, task.network.buffers.shapes),
    ):
        listed = saved.get(f"{kind}s")
        if listed is None:
            continue
        now = dict(zip(names, (tuple(v) for v in shapes)))
        then = dict((name, tuple(shape)) for name, shape in listed)
        for name in list(then) + [n for n in now if n not in then]:
            if then.get(name) != now.get(name):
                was = f"{then[name]}" if name in then else "absent"
                is_ = f"{now[name]}" if name in now else "absent"
                raise ModelChanged(
                    f"{model} no longer matches the checkpoint: {kind} {name} was {was} there and is {is_} now; "
                    "the model file changed since the run started: restore it, or start the run afresh"
                )
    values = int(saved["global_vector"].numel())
    if values != task.global_vector.numel():
        raise ModelChanged(
            f"{model} no longer matches the checkpoint: the checkpoint holds {values:,} values, the model "
            f"{task.global_vector.numel():,}; the model file changed since the run started"
        )
