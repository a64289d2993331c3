"""The learner: real torch training and aggregation behind the engine's
:class:`~netfl.backend.TrainingBackend` interface.

It trains one model per task (``tasks:`` in the scenario; one for almost
every algorithm, several for MMFL). Each round the strategy says which
(client, task) pairs train; the learner turns them into
:class:`~netfl.backend.Work` (bytes down, FLOPs, bytes up) for the engine
to time, and into jobs for itself.

Jobs are lazy: a job only records (client, task, global version, steps);
the training runs when ``aggregate`` (or a probe's report) needs the
updates, all of them at once, by the path the task's module allows
(:mod:`netfl.learn.trainer`): a fused kernel for MLPs, per-thread replicas
of any other module on a CPU, jobs stacked with ``torch.func`` on a GPU.
Each job's minibatches come from its own torch generator seeded by
(scenario seed, client, job), so a job trains on the same samples however
jobs are grouped or ordered, and whatever the thread count; every path
agrees with one-by-one training up to float rounding.

A task's module may be any ``torch.nn.Module`` (:class:`TaskModel`): its
trainable parameters are the vector strategies aggregate; its buffers
(BatchNorm's running statistics) follow the task's rule, averaged or kept
on each device.

What a client does is the strategy's business, applied here without
knowing the algorithm (:mod:`netfl.learn.algorithms.base`): each job takes
the strategy's gradient ``correction`` when it starts (and hands it back
with its update); the strategy's ``extras`` (Fed-CVaR-Avg's threshold t)
ride at the end of each flat vector, trained with their own loss and lr
(evaluation uses the model part only); ``download_bytes`` and
``upload_bytes`` size what the engine carries.

Divergence: before the strategy sees them, the updates that arrived are
checked for NaN and infinity (:func:`all_finite`: one sum per update, about
what adding it to the aggregate costs), and so are probe reports, each new
global model and every test loss. A non-finite update or report stops the
run (:class:`~netfl.backend.Diverged`) or, with ``on_divergence:
skip_update``, is dropped and counted (``updates_skipped``) so that it
reaches neither the model nor a stateful strategy's memory; a non-finite
global model or test loss always stops the run. A client's training loss is
never computed (the stacked kernels need only its gradient): a non-finite
loss makes its gradients, hence its update, non-finite.

Probes (``strategy.probe``, :mod:`netfl.learn.algorithms.probes`): every
eligible client downloads every task's model, trains a job per task if the
probe says so (the update the strategy then picks is uploaded without
training again; otherwise the picked client trains the one model it is
assigned) and reports one number per task.
"""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from netfl.backend import (
    BYTES_PER_VALUE,
    CloudContext,
    Diverged,
    Divergence,
    Evaluation,
    RoundContext,
    RoundPlan,
    Work,
)
from netfl.errors import ModelChanged, NetflWarning
from netfl.learn.algorithms import ClientUpdate, Strategy
from netfl.learn.compression import Compressor, Uplink
from netfl.learn.datasets import Dataset
from netfl.learn.hierarchy import EdgeModels
from netfl.learn.models import forward_flops_per_sample
from netfl.learn.network import Network
from netfl.learn.objective import Correction, ExtraScalars
from netfl.learn.params import ParamLayout
from netfl.learn.partition import ClientParts
from netfl.learn.replicas import Evaluator
from netfl.learn.runtime import on_device, parallel_map, torch_device
from netfl.learn.server_optimizers import build_server_optimizer
from netfl.learn.trainer import Trainer, TrainJob
from netfl.learn.training import minibatch_indices, num_local_steps, scheduled_lr
from netfl.learn.user_models import ModelRecipe, check_model
from netfl.rng import RandomStreams


@dataclass(frozen=True)
class LocalConfig:
    steps: int | None
    epochs: float | None
    batch_size: int
    lr: float
    weight_decay: float = 0.0
    lr_schedule: str = "constant"  # "constant" or "inverse_round" (lr / (round + 1))


@dataclass(frozen=True)
class TaskSetup:
    """What one task is made of: its data, how it is split over the clients, its model and local recipe."""

    dataset: Dataset
    parts: ClientParts | Sequence[np.ndarray]
    model: ModelRecipe
    local: LocalConfig


class TaskModel:
    """One model the federation trains: its global state and snapshots, how its jobs train, what it costs.

    The state is the global vector (the module's trainable parameters, then any strategy extras) and the
    global buffers (BatchNorm's running statistics; empty for most models). Buffers follow the task's rule
    (``model.buffers``): ``average`` -- they travel with the model both ways (counted in the bytes) and the
    new global buffers are the sample-weighted mean of those the aggregated updates carried (a round without
    an update keeps them); ``local`` -- each device keeps the buffers of its last update that reached the
    server (FedBN's statistics; nothing travels), starting from the initial ones, and the test uses their
    sample-weighted mean over the devices that have some.
    """

    def __init__(
        self,
        setup: TaskSetup,
        *,
        init_seed: int,
        extras: ExtraScalars | None,
        max_test_samples: int | None,
        device: torch.device,
        training_path: str | None = None,
    ):
        torch.manual_seed(init_seed)  # initialised on the CPU, so every device starts from the same model
        recipe = setup.model
        dataset = setup.dataset
        module = recipe.build()
        with warnings.catch_warnings():  # a model not finite from the start: the run says so as it diverges
            warnings.simplefilter("ignore", NetflWarning)
            check_model(module, recipe, dataset.train_x, dataset.train_y, dataset.num_classes)
        self.network = Network(module.to(device))
        self.model, self.layout = self.network.module, self.network.params  # what probes see (TaskView)
        self.recipe = recipe
        if device.type != "cpu":
            dataset = replace(
                dataset,
                train_x=dataset.train_x.to(device),
                train_y=dataset.train_y.to(device),
                test_x=dataset.test_x.to(device),
                test_y=dataset.test_y.to(device),
            )
        self.dataset = dataset
        parts = setup.parts if isinstance(setup.parts, ClientParts) else ClientParts.of(setup.parts)
        self._indices = torch.from_numpy(parts.indices)  # every client's samples, client after client
        self._offsets = parts.offsets.tolist()
        self._sizes = parts.sizes
        self.local = setup.local
        self.num_classes = dataset.num_classes
        limit = len(dataset.test_x) if max_test_samples is None else max_test_samples
        self.test_x, self.test_y = dataset.test_x[:limit], dataset.test_y[:limit]
        self.extra = len(extras) if extras is not None else 0
        self.buffers_rule = recipe.buffers
        # what travels: parameters and extras (the strategy may multiply them: SCAFFOLD's control variates),
        # and, under the average rule, the buffers
        self.model_bytes = BYTES_PER_VALUE * (self.layout.size + self.extra)
        self.buffer_bytes = BYTES_PER_VALUE * self.network.buffers.size if recipe.buffers == "average" else 0
        guard = recipe.guard  # a module of the user's file runs fenced: its errors name the file and line
        if recipe.flops_per_sample is not None:  # the user's figure: nothing to count
            self._train_flops, self._forward_flops = recipe.flops_per_sample, recipe.flops_per_sample / 3
        else:
            with guard():
                forward = forward_flops_per_sample(self.model, dataset.train_x[:1])
            self._train_flops, self._forward_flops = 3 * forward, forward
        vector = self.network.initial_params()
        if extras is not None:
            vector = torch.cat([vector, extras.initial.to(vector)])
        self.global_vector = vector
        self.global_buffers = self.network.initial_buffers()
        self.snapshots: dict[int, tuple[torch.Tensor, torch.Tensor]] = {0: (self.global_vector, self.global_buffers)}
        self.device_buffers: dict[int, torch.Tensor] = {}  # the local rule's per-device buffers
        self.trainer = Trainer(
            self.network, dataset.train_x, dataset.train_y, device=device, extras=extras, path=training_path,
            guard=guard,
        )  # fmt: skip
        self.evaluator = Evaluator(
            self.network, self.num_classes, device, channels_last=self.trainer.channels_last, guard=guard
        )

    def client_size(self, client: int) -> int:
        return self._offsets[client + 1] - self._offsets[client]

    def part(self, client: int) -> torch.Tensor:
        """The client's sample indices into the training set."""
        return self._indices[self._offsets[client] : self._offsets[client + 1]]

    def steps_of(self, client: int) -> int:
        return num_local_steps(self.client_size(client), self.local.batch_size, self.local.steps, self.local.epochs)

    def job_flops(self, client: int, steps: int) -> float:
        return float(self._train_flops * steps * min(self.local.batch_size, self.client_size(client)))

    def loss_flops(self, client: int) -> float:
        """A forward pass over the client's whole local data (a ``loss`` probe)."""
        return float(self._forward_flops * self.client_size(client))

    def model_part(self, vector: torch.Tensor) -> torch.Tensor:
        return vector[: self.layout.size] if self.extra else vector

    def client_data(self, client: int) -> tuple[torch.Tensor, torch.Tensor]:
        idx = self.part(client)
        return self.dataset.train_x[idx], self.dataset.train_y[idx]

    def job_buffers(self, client: int) -> torch.Tensor | None:
        """The buffers a client's job starts from: its own under the local rule, else those of the model."""
        return self.device_buffers.get(client) if self.buffers_rule == "local" else None

    def test_buffers(self) -> torch.Tensor:
        """The buffers the global model is tested with (see the class docstring)."""
        if self.buffers_rule != "local" or not self.device_buffers:
            return self.global_buffers
        clients = sorted(self.device_buffers)
        mean = sample_weighted_mean([self.device_buffers[c] for c in clients], [self._sizes[c] for c in clients])
        return mean.to(self.global_buffers)

    def local_loss(self, client: int) -> float:
        """Mean cross-entropy of the global model on the client's local data."""
        x, y = self.client_data(client)
        buffers = self.job_buffers(client)
        w = self.model_part(self.global_vector)
        return self.evaluator(w, buffers if buffers is not None else self.global_buffers, x, y)[1]

    def evaluate(self) -> Evaluation:
        acc, loss, per_class = self.evaluator(
            self.model_part(self.global_vector), self.test_buffers(), self.test_x, self.test_y, parallel_map
        )
        return Evaluation(acc, loss, tuple(per_class))

    def new_buffers(self, updates: Sequence[tuple[int, int, torch.Tensor | None]]) -> None:
        """Take the buffers of the aggregated updates ``(client, samples, buffers)`` by the task's rule."""
        carried = [(c, n, b) for c, n, b in updates if b is not None and b.numel()]
        if not carried:
            return
        if self.buffers_rule == "local":
            for client, _, buffers in carried:
                self.device_buffers[client] = buffers
            return
        mean = sample_weighted_mean([b for _, _, b in carried], [n for _, n, _ in carried])
        self.global_buffers = mean.to(self.global_buffers)


def sample_weighted_mean(vectors: Sequence[torch.Tensor], samples: Sequence[float]) -> torch.Tensor:
    """The mean of ``vectors`` weighted by ``samples``, in float64, on the vectors' device (a GPU run's buffers
    live on the GPU: weights made on the CPU would not multiply them)."""
    stacked = torch.stack(list(vectors)).to(torch.float64)
    weights = torch.tensor([float(n) for n in samples], dtype=torch.float64, device=stacked.device)
    return (weights / weights.sum()) @ stacked


def _same_model(index: int, task: TaskModel, saved: dict) -> None:
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


@dataclass
class _Job:
    client: int
    task: int
    version: int
    steps: int
    lr: float  # the client lr of the round the job started in
    correction: Correction | None  # the strategy's gradient correction, fixed when the job started
    delta: torch.Tensor | None = None  # its update y - x, once trained
    buffers: torch.Tensor | None = None  # the buffers it ended with, once trained (models with buffers)


@dataclass
class _Probe:
    client: int
    jobs: tuple[int, ...]  # one training job per task if the probe trains, else none


_EMPTY = torch.zeros(0)

#: What the learner may do with a non-finite update or report (``server.on_divergence``).
ON_DIVERGENCE = ("stop", "skip_update")


def _kept(keep: Sequence[bool], *columns: Sequence) -> tuple[list, ...]:
    """Each of ``columns`` without the rows ``keep`` refuses."""
    return tuple([v for v, ok in zip(column, keep) if ok] for column in columns)


def all_finite(vectors: Sequence[torch.Tensor]) -> list[bool]:
    """Whether each vector holds no NaN or infinity, cheaply: a NaN or inf anywhere makes a vector's sum NaN or
    inf, so one sum per vector clears the finite ones, and only a vector whose sum is not finite (it may also
    have overflowed) is tested element by element -- 15 times slower than the sum."""
    if not vectors:
        return []
    sums = torch.isfinite(torch.stack([v.sum() for v in vectors])).tolist()
    return [ok or bool(torch.isfinite(v).all()) for v, ok in zip(vectors, sums)]


class Learner:
    def __init__(
        self,
        tasks: Sequence[TaskSetup],
        *,
        strategy: Strategy,
        streams: RandomStreams,
        participants: int | None = None,
        max_test_samples: int | None = None,
        device: str | torch.device = "cpu",
        on_divergence: str = "stop",
        training_path: str | None = None,
        server_optimizer: Any = None,
        compression: Any = None,
        client_edges: Sequence[int] | None = None,
        edge_count: int | None = None,
    ):
        """``server_optimizer``: a ``server.optimizer`` spec (a server optimiser per model on the strategy's
        aggregated update); ``compression``: a ``server.compression`` spec (uplink and downlink);
        ``client_edges``: each client's edge server (hierarchical FL, :mod:`netfl.learn.hierarchy`) among
        ``edge_count``."""
        if not tasks:
            raise ValueError("a learner needs at least one task")
        if on_divergence not in ON_DIVERGENCE:
            raise ValueError(f"on_divergence must be one of {', '.join(ON_DIVERGENCE)}, got {on_divergence!r}")
        self.on_divergence = on_divergence
        self.updates_skipped = 0  # non-finite updates and probe reports dropped (on_divergence: skip_update)
        self._made_by: tuple[int | None, tuple[int, ...]] = (None, ())  # the current model's round and clients
        self.strategy = strategy
        self.streams = streams
        self.participants = participants
        self.device = torch_device(device)
        # task 0 keeps the stream name it always had, so single-task runs are unchanged
        self.tasks = [
            TaskModel(
                setup,
                init_seed=streams.integer_seed("model_init", *((s,) if s else ())),
                extras=strategy.extras,
                max_test_samples=max_test_samples,
                device=self.device,
                training_path=training_path,
            )
            for s, setup in enumerate(tasks)
        ]
        self.version = 0
        self._optimizers = (
            [build_server_optimizer(server_optimizer) for _ in self.tasks] if server_optimizer is not None else None
        )
        up = compression.uplink if compression is not None else None
        down = compression.downlink if compression is not None else None
        self._uplink = Uplink(Compressor(up)) if up is not None else None
        self._downlink = Compressor(down) if down is not None else None
        self._broadcasts: dict[tuple[int, int, int], torch.Tensor] = {}  # (task, version, edge) -> model quantised
        self._edges = None
        if client_edges is not None:
            if any(t.buffer_bytes for t in self.tasks):
                raise ValueError(
                    "hierarchical aggregation averages a model's parameters at the edges and the cloud; a model with "
                    "buffers (BatchNorm's statistics) there needs model.buffers: local"
                )
            sizes = [[t.client_size(c) for c in range(len(client_edges))] for t in self.tasks]
            self._edges = EdgeModels(client_edges, sizes, [t.global_vector for t in self.tasks], edge_count)
        self._selection = streams.numpy("selection")
        self._jobs: dict[int, _Job] = {}
        self._probes: dict[int, _Probe] = {}
        self._next_job = 0

    # ----------------------------------------------- the first task's model (the only one for most algorithms)

    @property
    def layout(self) -> ParamLayout:
        return self.tasks[0].layout

    @property
    def extra(self) -> int:
        return self.tasks[0].extra

    @property
    def global_vector(self) -> torch.Tensor:
        return self.tasks[0].global_vector

    @property
    def model_vector(self) -> torch.Tensor:
        """The first task's global model parameters (its global vector without any strategy extras)."""
        return self.tasks[0].model_part(self.tasks[0].global_vector)

    @property
    def extra_vector(self) -> torch.Tensor:
        """The strategy's extra scalars in the first task's global vector (empty for most strategies)."""
        return self.tasks[0].global_vector[self.tasks[0].layout.size :]

    # ------------------------------------------------------- checkpoints

    def state(self) -> dict:
        """Everything a run changes in the learner (global models and their snapshots, the strategy, jobs in
        flight, the selection generator), without the data sets: what a checkpoint keeps."""
        return {
            "version": self.version,
            "next_job": self._next_job,
            "jobs": self._jobs,
            "probes": self._probes,
            "updates_skipped": self.updates_skipped,
            "made_by": self._made_by,
            "selection": self._selection.bit_generator.state,
            "strategy": self.strategy,
            "server_optimizers": self._optimizers,
            "error_memory": self._uplink.memory if self._uplink is not None else None,
            "edge_models": self._edges.vectors if self._edges is not None else None,
            "edges_fresh": self._edges.fresh if self._edges is not None else None,
            "tasks": [
                {
                    "parameters": [(n, tuple(shape)) for n, shape in zip(t.layout.names, t.layout.shapes)],
                    "buffers": [
                        (n, tuple(shape)) for n, shape in zip(t.network.buffers.names, t.network.buffers.shapes)
                    ],
                    "global_vector": t.global_vector,
                    "global_buffers": t.global_buffers,
                    "snapshots": t.snapshots,
                    "device_buffers": t.device_buffers,
                }
                for t in self.tasks
            ],
        }

    def restore(self, state: dict) -> None:
        """Continue from :meth:`state` (taken from a learner built from the same scenario)."""
        if len(state["tasks"]) != len(self.tasks):
            raise ValueError(f"the state has {len(state['tasks'])} models, this learner {len(self.tasks)}")
        for s, (task, saved) in enumerate(zip(self.tasks, state["tasks"])):
            _same_model(s, task, saved)
        state = on_device(state, self.device)  # a checkpoint of a CPU run resumed on a GPU, or the other way
        self.version, self._next_job = state["version"], state["next_job"]
        self.updates_skipped, self._made_by = state["updates_skipped"], state["made_by"]
        self._jobs, self._probes, self.strategy = state["jobs"], state["probes"], state["strategy"]
        self._optimizers = state["server_optimizers"]
        if self._uplink is not None:
            self._uplink.memory = {c: e.to(self.device) for c, e in state["error_memory"].items()}
        if self._edges is not None:
            self._edges.vectors = [[v.to(self.device) for v in edges] for edges in state["edge_models"]]
            self._edges.fresh = bool(state.get("edges_fresh", True))
        self._selection.bit_generator.state = state["selection"]
        for task, saved in zip(self.tasks, state["tasks"]):
            device = task.global_vector.device
            task.global_vector = saved["global_vector"].to(device)
            task.global_buffers = saved["global_buffers"].to(device)
            task.snapshots = {v: (w.to(device), b.to(device)) for v, (w, b) in saved["snapshots"].items()}
            task.device_buffers = {c: b.to(device) for c, b in saved["device_buffers"].items()}

    # ------------------------------------------------------- engine interface

    def plan_round(self, round_index: int, available: Sequence[int]) -> RoundPlan:
        if self.strategy.probe is None:
            pairs = self.strategy.select(round_index, available, self.participants, self._selection)
            return RoundPlan(tuple(self._train_work(c, s, round_index) for c, s in pairs))
        return RoundPlan(tuple(self._probe_work(int(c), round_index) for c in available), probe=True)

    def plan_after_probe(self, round_index: int, reported: Sequence[int]) -> RoundPlan:
        probes, self._probes = self._probes, {}
        by_client = {probes[p].client: probes[p] for p in reported}
        self._train([job for probe in by_client.values() for job in probe.jobs])
        reports = {client: self._report(probe) for client, probe in by_client.items()}
        bad = sorted(client for client, values in reports.items() if not np.isfinite(values).all())
        if bad:
            self._nonfinite("update" if self.strategy.probe.trains else "loss", round_index, bad)
            reports = {client: values for client, values in reports.items() if client not in bad}
        pairs = self.strategy.assign(round_index, reports, self.participants, self._selection)
        decision_bytes = BYTES_PER_VALUE * len(self.tasks)  # the client's row of probabilities
        work = []
        for client, task in pairs:
            if self.strategy.probe.trains:  # trained during the probe: upload only
                job = by_client[client].jobs[task]
                work.append(
                    Work(
                        client,
                        job,
                        decision_bytes,
                        0.0,
                        self._upload_bytes(self.tasks[task]),
                        task=self._task_label(task),
                    )
                )
            else:
                trained = self._train_work(client, task, round_index)
                work.append(replace(trained, download_bytes=decision_bytes))
        kept = {w.job for w in work}
        for probe in probes.values():
            for job in probe.jobs:
                if job not in kept:
                    self._jobs.pop(job, None)
        self._forget_unused_snapshots()
        return RoundPlan(tuple(work))

    def submit(self, client: int, round_index: int, steps: int | None = None) -> Work:
        """A job of the first task started by the client itself (asynchronous workers)."""
        return self._train_work(client, 0, round_index, steps)

    def cancel(self, job: int) -> None:
        self._jobs.pop(job, None)
        self._forget_unused_snapshots()

    def cut(self, job: int, steps: int) -> None:
        """The job runs only its first ``steps`` local steps (partial work at a deadline): its minibatches are the
        first ``steps`` of those it would have drawn, and its update reports ``steps`` (FedNova's tau_i)."""
        record = self._jobs[job]
        if record.delta is not None or not 1 <= steps <= record.steps:
            raise ValueError(f"job {job} cannot be cut to {steps} of its {record.steps} steps")
        record.steps = steps

    def aggregate(self, context: RoundContext) -> int:
        jobs = list(context.delivered)
        self._train(jobs)
        updates = [self._update(job) for job in jobs]
        buffers = [self._jobs[job].buffers for job in jobs]
        for job in jobs:
            del self._jobs[job]
        finite = [
            ok and (b is None or ok_b)
            for ok, ok_b, b in zip(
                all_finite([u.delta for u in updates]),
                all_finite([b if b is not None else _EMPTY for b in buffers]),
                buffers,
            )
        ]
        if not all(finite):
            self._nonfinite("update", context.round_index, [u.client for u, ok in zip(updates, finite) if not ok])
            jobs, updates, buffers = _kept(finite, jobs, updates, buffers)
        if self._uplink is not None:
            updates = self._sent(jobs, updates)
        admitted = [self.strategy.admit(u, context) for u in updates]
        if not all(admitted):
            jobs, updates, buffers = _kept(admitted, jobs, updates, buffers)
        clients = tuple(sorted({u.client for u in updates}))
        if self._edges is not None:
            self._edge_step(updates, context, clients)
            models = [task.global_vector for task in self.tasks]
        else:
            models = [self._step(s, task, updates, context) for s, task in enumerate(self.tasks)]
        if not all(all_finite(models)):
            raise Diverged(Divergence("global_model", context.round_index, clients))
        self.version += 1
        self._made_by = (context.round_index, clients)
        for s, (task, model) in enumerate(zip(self.tasks, models)):
            task.global_vector = model
            task.new_buffers([(u.client, u.num_samples, b) for u, b in zip(updates, buffers) if u.task == s])
            task.snapshots[self.version] = (model, task.global_buffers)
        self._forget_unused_snapshots()
        return len(updates)

    def _step(self, s: int, task: TaskModel, updates: list[ClientUpdate], context: RoundContext) -> torch.Tensor:
        """Task ``s``'s next global vector: the strategy's aggregate of its updates, or the server optimiser's step
        on that aggregate minus the current vector (the pseudo-gradient) when some update was applied."""
        mine = [u for u in updates if u.task == s]
        model = self.strategy.aggregate(task.global_vector, mine, context)
        if self._optimizers is None or not mine:
            return model
        return self._optimizers[s].step(task.global_vector, model - task.global_vector)

    def _edge_step(self, updates: list[ClientUpdate], context: RoundContext, clients: tuple[int, ...]) -> None:
        """Hierarchical FL's edge round: each edge's model takes the strategy's rule on its own devices' updates."""
        for s, edges in enumerate(self._edges.vectors):
            for edge in sorted({self._edges.edge(u.client) for u in updates if u.task == s}):
                mine = [u for u in updates if u.task == s and self._edges.edge(u.client) == edge]
                edges[edge] = self.strategy.aggregate(edges[edge], mine, context)
                self._edges.fresh = True
                if not all(all_finite([edges[edge]])):
                    raise Diverged(Divergence("global_model", context.round_index, clients))

    def aggregate_cloud(self, context: CloudContext) -> int:
        """Hierarchical FL's cloud round: the global model becomes the data-weighted mean of the models of the
        edges that reached the cloud (through the server optimiser, if any), and those edges take it. With a server
        optimiser, a cloud round after which no edge applied an update leaves the model and the optimiser's state
        as they are (as a round in which nothing arrived does without edges)."""
        if not context.edges:
            return 0
        fresh, self._edges.fresh = self._edges.fresh, False
        for s, task in enumerate(self.tasks):
            model = self._edges.average(s, context.edges, task.global_vector)
            if self._optimizers is not None:
                if not fresh:
                    model = task.global_vector
                else:
                    model = self._optimizers[s].step(task.global_vector, model - task.global_vector)
            if not all(all_finite([model])):
                raise Diverged(Divergence("global_model", context.round_index, ()))
            task.global_vector = model
            task.snapshots[self.version] = (model, task.global_buffers)
            for edge in context.edges:
                self._edges.vectors[s][edge] = model
        self._made_by = (context.round_index, self._made_by[1])
        return len(context.edges)

    @property
    def edge_model_bytes(self) -> float:
        """An edge model on the wired links between the edges and the cloud: the first task's model and buffers."""
        return float(self.tasks[0].model_bytes + self.tasks[0].buffer_bytes)

    def _sent(self, jobs: Sequence[int], updates: list[ClientUpdate]) -> list[ClientUpdate]:
        """The updates as the server decompresses them from what the devices sent, each device's error memory
        taken in job order (the order it sent them in)."""
        out = list(updates)
        for i in sorted(range(len(jobs)), key=lambda i: jobs[i]):
            u = updates[i]
            generator = torch.Generator().manual_seed(self.streams.integer_seed("compression", u.client, jobs[i]))
            out[i] = replace(u, delta=self._uplink.send(u.client, u.delta, generator))
        return out

    def evaluate(self) -> Evaluation:
        results = [task.evaluate() for task in self.tasks]
        if not all(math.isfinite(r.loss) for r in results):
            raise Diverged(Divergence("evaluation", *self._made_by))
        if len(results) == 1:
            return results[0]
        return Evaluation(
            float(np.mean([r.accuracy for r in results])),
            float(np.mean([r.loss for r in results])),
            tasks=tuple(results),
        )

    # -------------------------------------------------------------- internals

    def _nonfinite(self, where: str, round_index: int, clients: Sequence[int]) -> None:
        """Non-finite updates or reports of ``clients``: stop the run, or count them as skipped."""
        if self.on_divergence == "stop":
            raise Diverged(Divergence(where, round_index, tuple(sorted(set(clients)))))
        self.updates_skipped += len(clients)

    def _task_label(self, task: int) -> int | None:
        """The task a job names in the event log: only when several models train."""
        return task if len(self.tasks) > 1 else None

    def _new_job(self, client: int, task: int, round_index: int, steps: int | None = None) -> int:
        job = self._next_job
        self._next_job += 1
        model = self.tasks[task]
        self._jobs[job] = _Job(
            client,
            task,
            self.version,
            model.steps_of(client) if steps is None else steps,
            scheduled_lr(model.local.lr, model.local.lr_schedule, round_index),
            self.strategy.correction(client, task),
        )
        return job

    def _train_work(self, client: int, task: int, round_index: int, steps: int | None = None) -> Work:
        job = self._new_job(client, task, round_index, steps)
        model = self.tasks[task]
        return Work(
            client,
            job,
            self._download_bytes(model),
            model.job_flops(client, self._jobs[job].steps),
            self._upload_bytes(model),
            task=self._task_label(task),
            steps=self._jobs[job].steps,
        )

    def _download_bytes(self, model: TaskModel) -> float:
        """What a device receives to train: the strategy's share of the model (as quantised for the downlink),
        and the buffers that travel."""
        return self.strategy.download_bytes(self._model_bytes(model, self._downlink)) + model.buffer_bytes

    def _upload_bytes(self, model: TaskModel) -> float:
        """What a device sends after training: the strategy's share of its update (as compressed for the uplink),
        and the buffers that travel."""
        compressor = self._uplink.compressor if self._uplink is not None else None
        return self.strategy.upload_bytes(self._model_bytes(model, compressor)) + model.buffer_bytes

    @staticmethod
    def _model_bytes(model: TaskModel, compressor: Compressor | None) -> float:
        """A model-sized vector on the air: 4 bytes a value, or what the compressor sends for it."""
        if compressor is None:
            return model.model_bytes
        return float(compressor.bytes(model.layout.size + model.extra))

    def _probe_work(self, client: int, round_index: int) -> Work:
        """Every task's model down, the probe's jobs (if it trains) and compute, one number per task up."""
        probe = self.strategy.probe
        probe_id = self._next_job
        self._next_job += 1
        jobs = tuple(self._new_job(client, s, round_index) for s in range(len(self.tasks))) if probe.trains else ()
        flops = sum(
            (model.job_flops(client, self._jobs[jobs[s]].steps) if jobs else 0.0) + probe.flops(model, client)
            for s, model in enumerate(self.tasks)
        )
        download = sum(
            self._download_bytes(m) if jobs else self._model_bytes(m, self._downlink) + m.buffer_bytes
            for m in self.tasks
        )
        self._probes[probe_id] = _Probe(client, jobs)
        return Work(client, probe_id, download, flops, BYTES_PER_VALUE * len(self.tasks), "probe", report=True)

    def _report(self, probe: _Probe) -> np.ndarray:
        """The probe's number for each task, from the client's trained jobs if it has any."""
        updates = [self._update(j) for j in probe.jobs] or [None] * len(self.tasks)
        return np.asarray(
            [self.strategy.probe.report(model, probe.client, update) for model, update in zip(self.tasks, updates)]
        )

    def _update(self, job_id: int) -> ClientUpdate:
        job = self._jobs[job_id]
        return ClientUpdate(
            job.client,
            self.tasks[job.task].client_size(job.client),
            job.delta,
            job.version,
            job.lr,
            job.steps,
            task=job.task,
            correction=job.correction,
            start=self._received(job.task, job.version, job.client)[0]
            if job.version in self.tasks[job.task].snapshots
            else None,
        )

    def _train(self, job_ids: Sequence[int]) -> None:
        """Compute the updates y - x (and final buffers) of the jobs not trained yet, by the task's trainer.

        Jobs that start from the same global model of the same task with the same minibatch size, lr and
        correction pull go to the trainer together (:mod:`netfl.learn.trainer`: fused or stacked chunks, or
        replicas in the worker threads), whatever their numbers of steps. Each job draws its minibatches
        from its own generator, so grouping and order change nothing but float rounding.
        """
        groups: dict[tuple, list[int]] = defaultdict(list)
        for job_id in sorted(set(job_ids)):
            job = self._jobs[job_id]
            if job.delta is None:
                model = self.tasks[job.task]
                batch = min(model.local.batch_size, model.client_size(job.client))
                pull = job.correction.pull if job.correction is not None else 0.0
                edge = self._edges.edge(job.client) if self._edges is not None else -1
                groups[(job.task, job.version, edge, batch, job.lr, pull)].append(job_id)
        for (task, version, _, batch, lr, _), members in groups.items():
            model = self.tasks[task]
            start, start_buffers = self._received(task, version, self._jobs[members[0]].client)
            jobs = [
                TrainJob(
                    self._minibatches(job_id, batch),
                    self.streams.integer_seed("job_random", self._jobs[job_id].client, job_id),
                    self._jobs[job_id].correction,
                    model.job_buffers(self._jobs[job_id].client),
                )
                for job_id in members
            ]
            ends = model.trainer.train(
                start, jobs, lr=lr, weight_decay=model.local.weight_decay, start_buffers=start_buffers
            )
            for job_id, (end, buffers) in zip(members, ends):
                self._jobs[job_id].delta = end.sub_(start) if end is not start else end - start
                self._jobs[job_id].buffers = buffers

    def _received(self, task: int, version: int, client: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The vector and buffers of ``version`` as ``client`` receives them: the global model's, or its edge
        server's (hierarchical FL: jobs are trained in the round they start, before any edge model changes), as
        they are or quantised for the downlink, one draw per version and sender for every device (a broadcast)."""
        vector, buffers = self.tasks[task].snapshots[version]
        edge = -1
        if self._edges is not None:
            edge, vector = self._edges.edge(client), self._edges.start(task, client)
        if self._downlink is None:
            return vector, buffers
        key = (task, version, edge)
        if key not in self._broadcasts:
            seed = self.streams.integer_seed("downlink", task, version, *((edge,) if edge >= 0 else ()))
            self._broadcasts[key] = self._downlink.apply(vector, generator=torch.Generator().manual_seed(seed))
        return self._broadcasts[key], buffers

    def _generator(self, job_id: int) -> torch.Generator:
        return torch.Generator().manual_seed(self.streams.integer_seed("training", self._jobs[job_id].client, job_id))

    def _minibatches(self, job_id: int, batch: int) -> torch.Tensor:
        """The job's minibatches (steps x batch) as indices into its task's whole training set."""
        job = self._jobs[job_id]
        part = self.tasks[job.task].part(job.client)
        return part[minibatch_indices(len(part), batch, job.steps, self._generator(job_id))]

    def _forget_unused_snapshots(self) -> None:
        needed = {j.version for j in self._jobs.values() if j.delta is None} | {self.version}
        for task in self.tasks:
            for version in [v for v in task.snapshots if v not in needed]:
                del task.snapshots[version]
        for key in [
            k for k in self._broadcasts if k[1] not in needed or (self._edges is not None and k[1] < self.version)
        ]:
            del self._broadcasts[key]
