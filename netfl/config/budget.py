"""What a scenario asks of the machine, estimated before anything is built: model size, memory and work.

A value can pass the schema and still be impossible to run: ``hidden: [2000000000]`` fails to allocate,
``local.steps: 1e12`` never finishes a round, MIFA over a million devices keeps a million models. These
checks refuse such scenarios with the field to change and the estimate that exceeded its bound. The bounds
are generous on purpose -- far beyond anything netfl's CPU-scale studies need, well short of what breaks:

* :data:`MAX_MODEL_BYTES`: one model of 4 GiB (a billion parameters, float32).
* :func:`memory_bound`: the machine's memory (its physical memory, or this process's cgroup limit if lower; 64 GiB
  where neither can be read) for the models the learner keeps at once (and for the sample indices of
  ``samples_per_client``): a few working copies of each,
  the updates of a round (or of an asynchronous buffer) and any per-client state of the algorithm
  (``AlgorithmEntry.client_state``: MIFA's memory, SCAFFOLD's control variates; the devices' error-feedback
  memories of ``server.compression``), times the devices.
* :data:`MAX_JOB_SAMPLES`: 10^8 samples through one client's job (steps x batch size): its minibatch
  indices alone take 8 bytes each, and it is 1,600 passes over Fashion-MNIST's training set.
* :data:`MAX_ROUND_FLOPS`: 10^17 training FLOPs per round: hours on a 10 TFLOP/s GPU, weeks on a CPU.
* :data:`~netfl.units.MAX_SECONDS` for what the slowest device of a group takes to train one job or send one
  model over a fixed-rate link: the same bound as for the durations a scenario gives.

Estimates from local epochs use a client's mean share of the data; a partition that gives one client
far more is checked when the run builds. Training-set sizes are those of the published files.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from netfl.config.algorithm_choice import scenario_algorithm
from netfl.config.schema import Scenario, TaskSpec
from netfl.registry.datasets import DATASETS
from netfl.registry.models import model_cost
from netfl.units import MAX_SECONDS

GiB = 2**30
MAX_MODEL_BYTES = 4 * GiB
#: The memory bound where the machine's cannot be read (:func:`memory_bound`).
MAX_MEMORY_BYTES = 64 * GiB
MAX_JOB_SAMPLES = 10**8
MAX_ROUND_FLOPS = 1e17
#: Models the learner holds whatever the round: the global vector, the module it runs, a training chunk and
#: the aggregate being formed.
WORKING_COPIES = 4


def memory_bound() -> int:
    """Bytes a run may hold: the machine's physical memory, or the cgroup limit this process runs under if lower
    (a container's); :data:`MAX_MEMORY_BYTES` where neither can be read. Not what is free at this instant: the
    verdict on a scenario does not change with what other programs hold."""
    if _MEMORY:
        return _MEMORY[0]
    try:
        found = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        found = MAX_MEMORY_BYTES
    for limit in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(limit).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < found:  # "max": no limit
            found = int(text)
    _MEMORY.append(found)
    return found


_MEMORY: list[int] = []  # memory_bound's answer, read once


@dataclass(frozen=True)
class TaskCost:
    """What one task's model and data weigh: from the registries for built-ins, measured on the built module
    and the loaded data for the user's own (:mod:`netfl.assemble.inspect`)."""

    model: str  # how messages name it
    bytes: int  # one copy of the model as the learner holds it: parameters, buffers and extras, float32
    parameters: int
    training_flops: float  # per training sample: forward and backward
    training_samples: int  # after max_train_samples
    model_path: str = ""  # the field a message about the model's size points to (default: the task's model)


@dataclass(frozen=True)
class Workload:
    """What a run's models and jobs cost: the problems found, and the figures the schedule's estimate
    (:mod:`netfl.config.schedule`) starts from."""

    problems: list[tuple[str, str]]
    model_bytes: int  # the largest model's
    job_flops: float  # training FLOPs of the largest job
    jobs_per_round: int  # updates a round asks for (an asynchronous buffer)
    memory_bytes: int = 0  # the models the learner holds at once (the working copies, the updates, client state)


def check_budget(scenario: Scenario, measured: Mapping[int, TaskCost] | None = None) -> list[tuple[str, str]]:
    """(path, message) for every model too large, job too long or run too big to hold in memory.

    A task whose model or data set is the user's own is costed from ``measured`` (built and loaded); without a
    measure it is left out here and checked once its code has run (:mod:`netfl.assemble.inspect`)."""
    return workload(scenario, measured).problems


def workload(scenario: Scenario, measured: Mapping[int, TaskCost] | None = None) -> Workload:
    """:func:`check_budget`'s problems, and what the run's models and jobs cost (``measured``: as there)."""
    problems: list[tuple[str, str]] = []
    devices = scenario.num_devices
    server = scenario.server
    entry = scenario_algorithm(scenario)
    client_state = entry.client_state if entry is not None else 0
    if server.mode == "async":
        jobs_per_round = server.async_.buffer
    else:
        jobs_per_round = min(server.round.asked or devices, devices)
    uplink = server.compression.uplink if server.compression is not None else None
    feedback = 1 if uplink is not None and uplink.error_feedback else 0  # each device's error-feedback memory
    copies = WORKING_COPIES + jobs_per_round + (client_state + feedback) * devices
    memory, largest, largest_path, job_flops = 0, 0, "", 0.0
    for s, task in enumerate(scenario.tasks):
        where = "task" if len(scenario.tasks) == 1 else f"tasks[{s}]"
        cost = (measured or {}).get(s)
        if cost is None:
            cost = _registry_cost(task, where, problems)
            if cost is None:
                continue
        model_path = cost.model_path or f"{where}.model"
        if cost.bytes > MAX_MODEL_BYTES:
            problems.append(
                (
                    model_path,
                    f"{cost.model} has {cost.parameters:,} parameters ({_size(cost.bytes)} as "
                    f"float32); netfl refuses a model over {_size(MAX_MODEL_BYTES)}",
                )
            )
            continue
        memory += cost.bytes * copies
        if cost.bytes > largest:
            largest, largest_path = cost.bytes, model_path
        work, samples = _work(scenario, task, where, cost.training_samples, cost.training_flops, jobs_per_round)
        problems += work
        job_flops = max(job_flops, cost.training_flops * samples)
    bound = memory_bound()
    if memory > bound:
        # the path of the term that weighs most: the model itself, the round's updates or the per-client state
        terms = {
            largest_path: WORKING_COPIES,
            "server.round.participants" if server.mode == "sync" else "server.async.buffer": jobs_per_round,
            "server.algorithm": client_state * devices,
            "server.compression.uplink.error_feedback": feedback * devices,
        }
        path = max(terms, key=terms.get)
        state = (
            f" + {client_state * devices:,} that {server.algorithm.label} keeps for its {devices:,} clients"
            if client_state
            else ""
        ) + (f" + {devices:,} error-feedback memories" if feedback else "")
        of = f" (the largest of {len(scenario.tasks)} models)" if len(scenario.tasks) > 1 else ""
        problems.append(
            (
                path,
                f"the run would hold about {_size(memory)} of models: {_size(largest)}{of} x "
                f"({WORKING_COPIES} working copies + {jobs_per_round:,} updates per round{state}); "
                f"{_machine(bound)}: use a smaller model, fewer "
                "devices or participants, or an algorithm without per-client memory",
            )
        )
    return Workload(problems + _durations(scenario, largest, job_flops), largest, job_flops, jobs_per_round, memory)


def _registry_cost(task: TaskSpec, where: str, problems: list[tuple[str, str]]) -> TaskCost | None:
    """A built-in model on a built-in data set, costed from the registries (None: a user's model or data set, or
    a model that does not apply to the data, which is added to ``problems``)."""
    if task.measured:
        return None
    data, model = DATASETS[task.dataset.name], task.model
    try:
        cost = model_cost(model.name, data.input_shape, data.num_classes, model.layers)
    except ValueError as exc:
        shape = "x".join(map(str, data.input_shape))
        problems.append(
            (
                f"{where}.model.name",
                f"{model.name} does not apply to {data.name}'s {shape} inputs ({exc}); use logistic or mlp",
            )
        )
        return None
    train = data.training_samples(task.dataset.test_fraction)
    if task.dataset.max_train_samples is not None:
        train = min(train, task.dataset.max_train_samples)
    return TaskCost(
        model.name,
        cost.bytes,
        cost.parameters,
        model.flops_per_sample or 3 * cost.forward_flops,
        train,
        f"{where}.model.hidden" if model.name in ("mlp", "mlp_softmax") else f"{where}.model",
    )


def _durations(scenario: Scenario, model_bytes: int, job_flops: float) -> list[tuple[str, str]]:
    """A job or a model transfer that takes the slowest device of a group longer than simulated time holds."""
    problems = []
    for i, group in enumerate(scenario.devices):
        slowest = group.compute.flops_per_s.support_min
        if slowest > 0 and job_flops / slowest > MAX_SECONDS:
            problems.append(
                (
                    f"devices[{i}].compute.flops_per_s",
                    f"a job of {job_flops:.3g} FLOPs would take {job_flops / slowest:.3g} s at "
                    f"{slowest:g} FLOP/s, longer than netfl simulates ({MAX_SECONDS:g} s)",
                )
            )
        for name in ("uplink", "downlink"):
            rate = getattr(group.link, name)
            slowest = rate.support_min if rate is not None else 0.0
            if slowest > 0 and 8 * model_bytes / slowest > MAX_SECONDS:
                problems.append(
                    (
                        f"devices[{i}].link.{name}",
                        f"a model of {_size(model_bytes)} would take {8 * model_bytes / slowest:.3g} s at "
                        f"{slowest:g} bit/s, longer than netfl simulates ({MAX_SECONDS:g} s)",
                    )
                )
    return problems


def _work(
    scenario: Scenario, task: TaskSpec, where: str, train: int, training_flops: float, jobs_per_round: int
) -> tuple[list[tuple[str, str]], float]:
    """Too many devices for the samples, or a job (steps x batch samples) or a round (its jobs' training FLOPs)
    beyond the bounds; and the samples of a job."""
    local, part = task.local, task.dataset.partition
    if part.kind == "natural":  # the clients' own sizes, checked when the data is split
        train = max(train, scenario.num_devices)
    share = part.samples_per_client or train / scenario.num_devices  # a client's mean share
    if part.samples_per_client is None and scenario.num_devices > train:
        return [
            (
                f"{where}.dataset.partition",
                f"{scenario.num_devices:,} devices but {task.dataset.label} has {train:,} training samples: every "
                "client needs at least one; use fewer devices, or give samples_per_client (devices then share "
                "samples)",
            )
        ], 0.0
    held = 8 * scenario.num_devices * (part.samples_per_client or 0)  # every client's sample indices, int64
    if held > memory_bound():
        return [
            (
                f"{where}.dataset.partition.samples_per_client",
                f"{scenario.num_devices:,} devices x {part.samples_per_client:,} samples each: their sample "
                f"indices alone would take {_size(held)}; {_machine(memory_bound())}",
            )
        ], 0.0
    batch = min(local.batch_size, math.ceil(share))
    if local.steps is not None:
        path, samples = f"{where}.local.steps", local.steps * batch
        how = f"{local.steps:,} steps x {batch} samples"
    else:
        path, samples = f"{where}.local.epochs", local.epochs * share
        how = f"{local.epochs:g} epochs of a client's {share:,.0f} samples"
    steps = scenario.server.async_.local_steps
    if scenario.server.mode == "async" and steps is not None and steps.kind in ("constant", "uniform", "choice"):
        path, samples = "server.async.local_steps", max(steps.params) * batch
        how = f"up to {max(steps.params):,.0f} steps x {batch} samples"
    if samples > MAX_JOB_SAMPLES:
        return [
            (
                path,
                f"a client's job would train on {samples:.3g} samples ({how}); netfl refuses more than "
                f"{MAX_JOB_SAMPLES:.0e} per job (its minibatch indices alone would take "
                f"{_size(8 * samples)})",
            )
        ], samples
    flops = jobs_per_round * samples * training_flops
    if flops > MAX_ROUND_FLOPS:
        return [
            (
                path,
                f"a round would train {jobs_per_round:,} jobs of {samples:.3g} samples at "
                f"{training_flops:,.0f} FLOPs each, {flops:.2g} FLOPs; netfl refuses more than "
                f"{MAX_ROUND_FLOPS:.0e} per round (hours on a GPU, weeks on a CPU, for one round)",
            )
        ], samples
    return [], samples


def _size(n: float) -> str:
    for unit, scale in (("TiB", 2**40), ("GiB", GiB), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n:.0f} bytes"


def _machine(bound: int) -> str:
    """How a refusal names the bound: the machine's memory (:func:`memory_bound`)."""
    return f"this machine has {_size(bound)} (its memory, or this process's limit)"


machine = _machine  # public: the schedule's refusals name the bound alike
size = _size  # public: the schedule's messages (netfl.config.schedule) speak of sizes alike
