"""What the engine times for a job: the bytes a device downloads, the FLOPs it computes, the bytes it uploads.

A model-sized vector is 4 bytes a value on the air, or what the link's compressor sends for it
(:mod:`netfl.learn.federation.compression`); the strategy says what travels with it (SCAFFOLD's control
variates), and the buffers travel too under the task's ``average`` rule. A job's FLOPs are its local steps' (the task's
FLOPs per sample x batch x steps); a probe's add what the probe computes (a forward pass over the local data for a
``loss`` probe), and its upload is one number per task.
"""

from __future__ import annotations

from collections.abc import Sequence

from netfl.backend import BYTES_PER_VALUE, Work
from netfl.learn.federation.compression import Compressor
from netfl.learn.federation.jobs import Job
from netfl.learn.federation.model_transfer import ModelTransfer
from netfl.learn.federation.strategy_calls import StrategyCalls
from netfl.learn.federation.task_model import TaskModel


class WorkCost:
    """The :class:`~netfl.backend.Work` of each kind of job, from the tasks' sizes and the links' compressors."""

    def __init__(self, tasks: Sequence[TaskModel], transfer: ModelTransfer):
        self.tasks = tasks
        self._transfer = transfer

    def task_label(self, task: int) -> int | None:
        """The task a job names in the event log: only when several models train."""
        return task if len(self.tasks) > 1 else None

    @staticmethod
    def model_bytes(model: TaskModel, compressor: Compressor | None) -> float:
        """A model-sized vector on the air: 4 bytes a value, or what the compressor sends for it."""
        if compressor is None:
            return model.model_bytes
        return float(compressor.bytes(model.layout.size + model.extra))

    def download_bytes(self, strategy: StrategyCalls, model: TaskModel) -> float:
        """What a device receives to train: the strategy's share of the model (as quantised for the downlink),
        and the buffers that travel."""
        return strategy.download_bytes(self.model_bytes(model, self._transfer.downlink)) + model.buffer_bytes

    def upload_bytes(self, strategy: StrategyCalls, model: TaskModel) -> float:
        """What a device sends after training: the strategy's share of its update (as compressed for the uplink),
        and the buffers that travel."""
        return strategy.upload_bytes(self.model_bytes(model, self._transfer.uplink_compressor)) + model.buffer_bytes

    def train(self, strategy: StrategyCalls, job_id: int, job: Job) -> Work:
        """A training job: the model down, its local steps, its update up."""
        model = self.tasks[job.task]
        return Work(
            job.client,
            job_id,
            self.download_bytes(strategy, model),
            model.job_flops(job.client, job.steps),
            self.upload_bytes(strategy, model),
            task=self.task_label(job.task),
            steps=job.steps,
        )

    def upload_only(self, strategy: StrategyCalls, job_id: int, job: Job, download_bytes: float) -> Work:
        """A job trained during a probe: ``download_bytes`` (the server's decision) down, its update up."""
        model = self.tasks[job.task]
        return Work(
            job.client, job_id, download_bytes, 0.0, self.upload_bytes(strategy, model), task=self.task_label(job.task)
        )

    def probe(self, strategy: StrategyCalls, probe_id: int, client: int, jobs: Sequence[Job]) -> Work:
        """Every task's model down, the probe's jobs (one per task if it trains, else none) and its own compute,
        one number per task up."""
        flops = sum(
            (model.job_flops(client, jobs[s].steps) if jobs else 0.0) + strategy.probe_flops(model, client)
            for s, model in enumerate(self.tasks)
        )
        download = sum(
            self.download_bytes(strategy, m) if jobs else self.model_bytes(m, self._transfer.downlink) + m.buffer_bytes
            for m in self.tasks
        )
        return Work(client, probe_id, download, flops, BYTES_PER_VALUE * len(self.tasks), "probe", report=True)
