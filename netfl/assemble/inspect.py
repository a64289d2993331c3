"""A task whose model or data set is the user's own, looked at before anything trains.

The scenario's checks (:mod:`netfl.config`) run without torch and cannot know what a user's module holds or
what a user's file contains. Here the data is loaded, the module is built -- first on torch's ``meta``
device, where a module of any size costs nothing, to apply netfl's budgets (model size, models held at
once, FLOPs per round: :func:`netfl.config.budget.check_budget`) to the real figures -- then built for real
and run on two samples (:func:`~netfl.learn.models.user.check_model`). ``netfl validate`` prints what it
found; a run does the same before its world is built.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode

from netfl.assemble.learning import build_task
from netfl.config.budget import TaskCost, workload
from netfl.config.schedule import check_schedule
from netfl.config.schema import Scenario
from netfl.errors import ScenarioError
from netfl.learn.federation.task_model import TaskSetup
from netfl.learn.models.builtin import forward_flops_per_sample
from netfl.learn.models.flat_model import Network
from netfl.learn.models.token_inputs import check_token_inputs
from netfl.learn.models.user import check_model
from netfl.learn.training.trainer import Trainer
from netfl.rng import RandomStreams

__all__ = ["TaskReport", "check_measured_budget", "inspect_tasks", "measure"]


#: Tensor methods that fill a tensor at random: on the meta device there are no values to fill.
_RANDOM_FILLS = frozenset(
    getattr(torch.Tensor, name)
    for name in ("normal_", "uniform_", "bernoulli_", "exponential_", "cauchy_", "log_normal_", "geometric_", "random_")
)


class _NoRandomFillOnMeta(TorchFunctionMode):
    """A random fill (or ``torch.nn.init``) of a meta tensor does nothing, as it would anyway -- but torch
    computes ``normal_`` on the meta device through its Python reference, whose first call imports
    ``torch._dynamo``: about 2 s of a small job's start-up for the ``nn.Embedding`` of every text model."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        filling = func in _RANDOM_FILLS or (
            getattr(func, "__module__", "") == "torch.nn.init" and func.__name__.endswith("_")  # init.normal_
        )
        target = args[0] if args else (kwargs or {}).get("tensor")
        if filling and isinstance(target, torch.Tensor) and target.is_meta:
            return target
        return func(*args, **(kwargs or {}))


#: A module up to this many parameter bytes has its FLOPs counted on the CPU, built for real: on the meta device
#: torch computes products through Python decompositions whose first use imports ``torch._dynamo`` (about 2 s
#: of every small job's start-up), and a small module costs nothing much on the CPU either.
CPU_COUNT_BYTES = 64 * 2**20


def _small(module: torch.nn.Module) -> bool:
    return 4 * sum(p.numel() for p in module.parameters()) <= CPU_COUNT_BYTES


def measure(scenario: Scenario, task: int, setup: TaskSetup) -> TaskCost:
    """What task ``task``'s module and data weigh, the module built on the meta device (on the CPU if the
    user's code cannot run there); its FLOPs counted on the meta device, or on the CPU for a small module."""
    dataset, recipe = setup.dataset, setup.model
    module = None
    try:
        with recipe.guard(), torch.device("meta"):
            with _NoRandomFillOnMeta():
                module = recipe.build()
            on_cpu = recipe.flops_per_sample is None and _small(module)
            forward = 0
            if recipe.flops_per_sample is None and not on_cpu:
                sample = torch.empty((1, *dataset.input_shape), dtype=dataset.train_x.dtype, device="meta")
                forward = forward_flops_per_sample(module, sample)
    except Exception:  # code that needs real values (.item(), numpy) builds on the CPU, where errors are reported
        module = None
    if module is None or on_cpu:
        torch.manual_seed(0)
        module = recipe.build()
        check_token_inputs(module, recipe, dataset.name, {"x": dataset.train_x, "x_test": dataset.test_x})
        check_model(module, recipe, dataset.train_x, dataset.train_y, dataset.num_classes)
        with recipe.guard():
            forward = forward_flops_per_sample(module, dataset.train_x[:1]) if recipe.flops_per_sample is None else 0
    network = Network(module)
    parameters = network.params.size
    where = "task" if len(scenario.tasks) == 1 else f"tasks[{task}]"
    return TaskCost(
        recipe.label,
        4 * (parameters + network.buffers.size),
        parameters,
        float(recipe.flops_per_sample if recipe.flops_per_sample is not None else 3 * forward),
        int(setup.parts.sizes.sum()),
        f"{where}.model",
    )


def check_measured_budget(scenario: Scenario, setups: Sequence[TaskSetup]) -> dict[int, TaskCost]:
    """netfl's budgets applied to the measured tasks (ScenarioError listing what exceeds them); the measures."""
    measured = {
        s: measure(scenario, s, setup) for s, (spec, setup) in enumerate(zip(scenario.tasks, setups)) if spec.measured
    }
    work = workload(scenario, measured)
    problems = work.problems + check_schedule(scenario, work)  # the schedule's estimate with the real job costs
    if problems:
        raise ScenarioError(str(scenario.source or scenario.name), problems)
    return measured


@dataclass(frozen=True)
class TaskReport:
    """What ``netfl validate`` says of a task: its model and its data, as measured."""

    model: str
    parameters: int
    buffer_values: int
    buffers_rule: str
    frozen: int  # parameters the module freezes (they never train nor travel)
    forward_flops: float
    training_flops: float
    flops_counted: bool  # False: model.flops_per_sample
    output: tuple[int, ...]
    training: str  # the path and why
    data: str
    train_samples: int
    test_samples: int
    sample: str  # shape and dtype of one sample
    labels: str  # per sample or per token
    classes: int
    clients: str  # the data's clients and the devices' share of them, or ""

    def lines(self) -> list[str]:
        wire = 4 * (self.parameters + (self.buffer_values if self.buffers_rule == "average" else 0))
        buffers = ""
        if self.buffer_values:
            rule = "averaged by the server" if self.buffers_rule == "average" else "kept on each device (FedBN)"
            buffers = f" + {self.buffer_values:,} buffer values ({rule})"
        frozen = f", {self.frozen:,} frozen" if self.frozen else ""
        how = "3 x the forward counted on the module" if self.flops_counted else "model.flops_per_sample"
        return [
            f"  model    {self.model}: {self.parameters:,} parameters{buffers}{frozen}; {_si(wire)}B on the wire; "
            f"outputs {self.output}",
            f"           {_si(self.forward_flops)}FLOP forward, {_si(self.training_flops)}FLOP to train per sample "
            f"({how}); trains on {self.training}",
            f"  data     {self.data}: {self.train_samples:,} training and {self.test_samples:,} test samples of "
            f"{self.sample}; {self.labels}; {self.classes} classes" + (f"; {self.clients}" if self.clients else ""),
        ]


def inspect_tasks(scenario: Scenario, data_dir: Path | None = None) -> list[TaskReport]:
    """Load every task's data, measure and check its model as a run would (ScenarioError, DataError or
    ModelError when something does not fit); a report of each task."""
    streams = RandomStreams(scenario.seeds.training)
    setups = [build_task(scenario, s, streams, data_dir) for s in range(len(scenario.tasks))]
    check_measured_budget(scenario, setups)
    return [_report(scenario, s, setup) for s, setup in enumerate(setups)]


def _report(scenario: Scenario, task: int, setup: TaskSetup) -> TaskReport:
    dataset, recipe = setup.dataset, setup.model
    torch.manual_seed(0)
    module = recipe.build()
    check_token_inputs(module, recipe, dataset.name, {"x": dataset.train_x, "x_test": dataset.test_x})
    output = check_model(module, recipe, dataset.train_x, dataset.train_y, dataset.num_classes)
    network = Network(module)
    if recipe.flops_per_sample is not None:
        training, forward = recipe.flops_per_sample, recipe.flops_per_sample / 3
    else:
        with recipe.guard():
            forward = float(forward_flops_per_sample(module, dataset.train_x[:1]))
        training = 3 * forward
    trainer = Trainer(network, dataset.train_x, dataset.train_y, device=torch.device("cpu"), guard=recipe.guard)
    frozen = sum(p.numel() for p in module.parameters() if not p.requires_grad)
    sample = "x".join(map(str, dataset.input_shape)) + " " + str(dataset.train_x.dtype).replace("torch.", "")
    labels = f"a label per token ({dataset.train_y.shape[1]} per sample)" if dataset.per_token else "a label per sample"
    clients = ""
    spec = scenario.tasks[task].dataset.partition
    if dataset.client_names is not None:
        devices = scenario.num_devices
        count = len(dataset.client_names)
        if spec.kind == "natural":
            share = f"each of the {devices:,} devices holds one" + (
                f" ({spec.pick} pick: {count - devices:,} left out)" if devices < count else ""
            )
        else:
            share = f"not used: partition {spec.kind}"
        clients = f"{count:,} clients ({share})"
    return TaskReport(
        recipe.label,
        network.params.size,
        network.buffers.size,
        recipe.buffers,
        frozen,
        forward,
        training,
        recipe.flops_per_sample is None,
        output,
        trainer.describe(),
        dataset.name,
        len(dataset.train_y),
        len(dataset.test_y),
        sample,
        labels,
        dataset.num_classes,
        clients,
    )


def _si(value: float) -> str:
    """1234567 -> '1.23 M' (with the unit following)."""
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}"
    return f"{value:.3g} " if not math.isclose(value, round(value)) else f"{int(round(value))} "
