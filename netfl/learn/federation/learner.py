"""The learner: real torch training and aggregation behind the engine's
:class:`~netfl.backend.TrainingBackend` interface -- the round protocol, which
puts the parts below together.

It trains one model per task (``tasks:`` in the scenario; one for almost
every algorithm, several for MMFL; :mod:`netfl.learn.federation.task_model`). Each round
the strategy says which (client, task) pairs train; the learner turns them
into jobs for itself (:mod:`netfl.learn.federation.jobs`: lazy, trained all at once
when their updates are needed) and into :class:`~netfl.backend.Work` (bytes
down, FLOPs, bytes up; :mod:`netfl.learn.federation.work_cost`) for the engine to time.
When updates arrive they pass the divergence watch
(:mod:`netfl.learn.federation.divergence_watch`), the uplink's decompression
(:mod:`netfl.learn.federation.model_transfer`) and the strategy's admission, and the
server step (:mod:`netfl.learn.federation.server_step`: the strategy's rule, a server
optimiser, edge servers) makes the next global models. A checkpoint keeps
:mod:`netfl.learn.federation.learner_state`.

What a client does is the strategy's business, applied here without
knowing the algorithm (:mod:`netfl.learn.federation.strategy`): each job takes
the strategy's gradient ``correction`` when it starts (and hands it back
with its update); the strategy's ``extras`` (Fed-CVaR-Avg's threshold t)
ride at the end of each flat vector, trained with their own loss and lr
(evaluation uses the model part only); ``download_bytes`` and
``upload_bytes`` size what the engine carries.

Probes (``strategy.probe``, :mod:`netfl.learn.federation.probes`): every
eligible client downloads every task's model, trains a job per task if the
probe says so (the update the strategy then picks is uploaded without
training again; otherwise the picked client trains the one model it is
assigned) and reports one number per task.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
import torch

from netfl.backend import BYTES_PER_VALUE, CloudContext, DeviceStates, Evaluation, RoundContext, RoundPlan, Work
from netfl.learn.federation.compression import CompressionSettings
from netfl.learn.federation.divergence_watch import DivergenceWatch, kept, require_finite
from netfl.learn.federation.jobs import JobBook, ProbeJobs
from netfl.learn.federation.learner_state import learner_state, restore_learner
from netfl.learn.federation.model_transfer import ModelTransfer
from netfl.learn.federation.server_optimizers import ServerOptimizerChoice
from netfl.learn.federation.server_step import ServerStep
from netfl.learn.federation.strategy import Strategy
from netfl.learn.federation.strategy_calls import AggregationRecord, StrategyCalls
from netfl.learn.federation.strategy_metrics import AggregationMetrics
from netfl.learn.federation.task_model import TaskModel, TaskSetup
from netfl.learn.federation.work_cost import WorkCost
from netfl.learn.models.params import ParamLayout
from netfl.learn.training.runtime import torch_device
from netfl.rng import RandomStreams


class Learner:
    """The :class:`~netfl.backend.TrainingBackend` of real training: the round protocol over the tasks' models,
    the job book, the work costs, the model transfer, the server step and the divergence watch."""

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
        server_optimizer: ServerOptimizerChoice | None = None,
        compression: CompressionSettings | None = None,
        client_edges: Sequence[int] | None = None,
        edge_count: int | None = None,
        observers: Sequence[Callable[[AggregationRecord], object]] = (),
    ):
        """``server_optimizer``: a server optimiser per model on the strategy's aggregated update;
        ``compression``: the uplink's and downlink's compressors; ``client_edges``: each client's edge server
        (hierarchical FL, :mod:`netfl.learn.federation.hierarchy`) among ``edge_count``; ``observers``: callables
        that see each aggregation (:class:`~netfl.learn.federation.strategy_calls.AggregationRecord`)."""
        if not tasks:
            raise ValueError("a learner needs at least one task")
        self.watch = DivergenceWatch(on_divergence)
        self.strategy = strategy
        self.calls = StrategyCalls(strategy, observers)  # every hook called through it: fenced and checked
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
        self.transfer = ModelTransfer(compression, streams)
        self.server = ServerStep(self.tasks, server_optimizer, client_edges, edge_count)
        self.selection = streams.numpy("selection")
        self.book = JobBook(self.tasks, streams, self._received, self.server.edge_of)
        self.cost = WorkCost(self.tasks, self.transfer)

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

    @property
    def updates_skipped(self) -> int:
        """Non-finite updates and probe reports dropped (``on_divergence: skip_update``)."""
        return self.watch.updates_skipped

    @property
    def strategy_metrics(self) -> list[AggregationMetrics]:
        """The strategy's metrics of every aggregation so far, in order (algorithm.csv's rows)."""
        return self.server.metrics.rows

    @property
    def edge_model_bytes(self) -> float:
        """An edge model on the wired links between the edges and the cloud: the first task's model and buffers."""
        return float(self.tasks[0].model_bytes + self.tasks[0].buffer_bytes)

    # ------------------------------------------------------- checkpoints

    def state(self) -> dict:
        """What a checkpoint keeps (:func:`~netfl.learn.federation.learner_state.learner_state`)."""
        return learner_state(self)

    def restore(self, state: dict) -> None:
        """Continue from :meth:`state` (taken from a learner built from the same scenario)."""
        restore_learner(self, state)

    # ------------------------------------------------------- engine interface

    def plan_round(self, round_index: int, available: Sequence[int], devices: DeviceStates | None = None) -> RoundPlan:
        if self.strategy.probe is None:
            pairs = self.calls.select(
                round_index, available, self.participants, self.selection, devices, len(self.tasks)
            )
            return RoundPlan(tuple(self._train_work(c, s, round_index) for c, s in pairs))
        return RoundPlan(tuple(self._probe_work(int(c), round_index) for c in available), probe=True)

    def plan_after_probe(self, round_index: int, reported: Sequence[int]) -> RoundPlan:
        probes, self.book.probes = self.book.probes, {}
        by_client = {probes[p].client: probes[p] for p in reported}
        self.book.train([job for probe in by_client.values() for job in probe.jobs])
        reports = {client: self._report(probe) for client, probe in by_client.items()}
        reports = self.watch.finite_reports(round_index, reports, self.strategy.probe.trains)
        pairs = self.calls.assign(round_index, reports, self.participants, self.selection, len(self.tasks))
        decision_bytes = BYTES_PER_VALUE * len(self.tasks)  # the client's row of probabilities
        work = []
        for client, task in pairs:
            if self.strategy.probe.trains:  # trained during the probe: upload only
                job = by_client[client].jobs[task]
                work.append(self.cost.upload_only(self.calls, job, self.book.jobs[job], decision_bytes))
            else:
                trained = self._train_work(client, task, round_index)
                work.append(replace(trained, download_bytes=decision_bytes))
        kept_jobs = {w.job for w in work}
        for probe in probes.values():
            for job in probe.jobs:
                if job not in kept_jobs:
                    self.book.jobs.pop(job, None)
        self._forget_unused_snapshots()
        return RoundPlan(tuple(work))

    def submit(self, client: int, round_index: int, steps: int | None = None) -> Work:
        """A job of the first task started by the client itself (asynchronous workers)."""
        return self._train_work(client, 0, round_index, steps)

    def cancel(self, job: int) -> None:
        self.book.jobs.pop(job, None)
        self._forget_unused_snapshots()

    def cut(self, job: int, steps: int) -> None:
        """The job runs only its first ``steps`` local steps (partial work at a deadline): its minibatches are the
        first ``steps`` of those it would have drawn, and its update reports ``steps`` (FedNova's tau_i)."""
        self.book.cut(job, steps)

    def aggregate(self, context: RoundContext) -> int:
        jobs = list(context.delivered)
        self.book.train(jobs)
        updates = [self.book.update(job) for job in jobs]
        buffers = [self.book.jobs.pop(job).buffers for job in jobs]
        finite = self.watch.finite_updates(
            context.round_index, [u.client for u in updates], [u.delta for u in updates], buffers
        )
        if not all(finite):
            jobs, updates, buffers = kept(finite, jobs, updates, buffers)
        updates = self.transfer.sent(jobs, updates)
        admitted = [self.calls.admit(u, context) for u in updates]
        if not all(admitted):
            jobs, updates, buffers = kept(admitted, jobs, updates, buffers)
        clients = tuple(sorted({u.client for u in updates}))
        models = self.server.models(self.calls, self.tasks, updates, context)
        require_finite(models, context.round_index, clients)
        self.version += 1
        self.watch.made_by = (context.round_index, clients)
        for s, (task, model) in enumerate(zip(self.tasks, models)):
            task.global_vector = model
            task.new_buffers([(u.client, u.num_samples, b) for u, b in zip(updates, buffers) if u.task == s])
            task.snapshots[self.version] = (model, task.global_buffers)
        self._forget_unused_snapshots()
        return len(updates)

    def aggregate_cloud(self, context: CloudContext) -> int:
        """Hierarchical FL's cloud round
        (:meth:`ServerStep.cloud <netfl.learn.federation.server_step.ServerStep.cloud>`)."""
        if not context.edges:
            return 0
        self.server.cloud(self.tasks, context, self.version)
        self.watch.made_by = (context.round_index, self.watch.made_by[1])
        return len(context.edges)

    def evaluate(self) -> Evaluation:
        """Each task's test result, by the strategy's evaluation hook (the test set on the global model, unless the
        strategy says otherwise); a non-finite test loss stops the run."""
        results = [self.calls.evaluate(s, task.global_vector, task.evaluate) for s, task in enumerate(self.tasks)]
        self.watch.check_evaluations(results)
        if len(results) == 1:
            return results[0]
        return Evaluation(
            float(np.mean([r.accuracy for r in results])),
            float(np.mean([r.loss for r in results])),
            tasks=tuple(results),
        )

    # -------------------------------------------------------------- internals

    def _train_work(self, client: int, task: int, round_index: int, steps: int | None = None) -> Work:
        correction = self.calls.correction(client, task)
        job = self.book.new(client, task, self.version, round_index, correction, steps)
        return self.cost.train(self.calls, job, self.book.jobs[job])

    def _probe_work(self, client: int, round_index: int) -> Work:
        """Every task's model down, the probe's jobs (if it trains) and compute, one number per task up."""
        probe_id = self.book.take_id()
        jobs = ()
        if self.strategy.probe.trains:
            jobs = tuple(
                self.book.new(client, s, self.version, round_index, self.calls.correction(client, s), None)
                for s in range(len(self.tasks))
            )
        self.book.probes[probe_id] = ProbeJobs(client, jobs)
        return self.cost.probe(self.calls, probe_id, client, [self.book.jobs[j] for j in jobs])

    def _report(self, probe: ProbeJobs) -> np.ndarray:
        """The probe's number for each task, from the client's trained jobs if it has any."""
        updates = [self.book.update(j) for j in probe.jobs] or [None] * len(self.tasks)
        return np.asarray(
            [self.calls.probe_report(model, probe.client, update) for model, update in zip(self.tasks, updates)]
        )

    def _received(self, task: int, version: int, client: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The vector and buffers of ``version`` as ``client`` receives them: the global model's, or its edge
        server's (hierarchical FL: jobs are trained in the round they start, before any edge model changes), as
        they are or quantised for the downlink, one draw per version and sender for every device (a broadcast)."""
        vector, buffers = self.tasks[task].snapshots[version]
        vector = self.server.start(task, client, vector)
        return self.transfer.received(vector, task, version, self.server.edge_of(client)), buffers

    def _forget_unused_snapshots(self) -> None:
        needed = self.book.versions_in_use() | {self.version}
        for task in self.tasks:
            for version in [v for v in task.snapshots if v not in needed]:
                del task.snapshots[version]
        self.transfer.forget(needed, self.version if self.server.edges is not None else None)
