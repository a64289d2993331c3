"""How a task's jobs are trained: the fastest path its module allows, chosen once, stated, and the same
results (up to float rounding) as training each job alone (:func:`~netfl.learn.training.reference.train_one`).

Paths (:data:`PATHS`), chosen when the task is built:

* ``fused`` -- a Linear/ReLU stack (the built-in ``logistic`` and ``mlp``, or a user's MLP, recognised by
  tracing it) without buffers or extras, labels per sample: many jobs' steps as batched matrix products
  (:mod:`netfl.learn.training.fused_mlp`), in cache-sized chunks spread over the worker threads. On a CPU this is
  about 2x a plain per-client loop.
* ``replicas`` -- anything else on a CPU, and what ``vmap`` cannot batch on a GPU: each job by plain
  autograd on a per-thread copy of the module, jobs spread over the worker threads
  (:mod:`netfl.learn.training.replicas`). On a CPU this beats stacking a CNN's clients with ``torch.func``, which
  cannot run in two threads at once and spends more per core (benchmarks/speed.py).
* ``batched`` -- on a CPU, a sequence model (recurrent, embedding or attention layers, the user's included) whose
  every weighted layer the batched path computes: a chunk of jobs' steps together on a rewritten copy of the
  module, each layer computing every client with its own weights by batched matrix products, checked against
  one client at a time when the task is built (:mod:`netfl.learn.training.batched`); chunks in the worker
  threads.
* ``stacked`` -- on a GPU, a module ``vmap`` can batch (BatchNorm included) and that draws no random
  numbers: jobs stacked with ``torch.func`` (``vmap(grad(loss))``), a chunk sized to the free memory, so
  that a round of small models is a few large kernels (:mod:`netfl.learn.training.stacked`).
* ``reference`` -- one job at a time through ``functional_call``, in the calling thread: the yardstick of
  the tests and benchmarks (never chosen by itself).

A module that draws from torch's global random generator (other than through ``nn.Dropout`` layers, which
replicas seed per job) trains on ``replicas`` one job at a time, torch's generator seeded from each job --
unless it is batched, which gives each job its own generators for those draws (attention dropout).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from functools import partial

import torch

from netfl.learn.models.flat_model import Network
from netfl.learn.training.batched import BatchedKernel, plan_for
from netfl.learn.training.fused_mlp import FusedMLP
from netfl.learn.training.objective import ExtraScalars
from netfl.learn.training.reference import TrainJob, train_one
from netfl.learn.training.replicas import ReplicaKernel, draws_global_random, uses_channels_last
from netfl.learn.training.runtime import parallel_map
from netfl.learn.training.stacked import FunctionalKernel, activation_bytes, jobs_per_chunk, train_stacked

__all__ = ["PATHS", "TrainJob", "Trainer", "choose_path"]

PATHS: dict[str, str] = {
    "fused": "the fused MLP kernel: many jobs' steps as batched matrix products, chunks in the worker threads",
    "replicas": "each job by plain autograd on a per-thread copy of the module, jobs in the worker threads",
    "batched": "clients' steps together on a rewritten copy of the module, each layer with every client's weights",
    "stacked": "jobs stacked with torch.func (vmap of grad): a chunk's step is a few large kernels",
    "reference": "one job at a time through functional_call (the yardstick of the tests)",
}


def choose_path(
    *,
    forced: str | None,
    device_type: str,
    cannot: Callable[[str], str],
    fused: bool,
    global_random: bool,
    channels_last: bool,
    not_batched: str = "not a sequence model",
) -> tuple[str, str]:
    """The path a task's jobs train on, and why (see the module docstring); ``cannot(path)`` says why a path
    cannot train the module ('' when it can); ``not_batched``: why the batched path does not ('' when it does).
    ValueError for a forced path that does not exist or cannot."""
    if forced is not None:
        if forced not in PATHS:
            raise ValueError(f"unknown training path {forced!r}; accepted: {', '.join(PATHS)}")
        problem = cannot(forced)
        if problem:
            raise ValueError(f"training path {forced}: {problem}")
        return forced, "asked for"
    if fused:
        return "fused", "a Linear/ReLU stack"
    if device_type == "cuda" and not cannot("stacked"):
        return "stacked", "vmap batches this module"
    if device_type == "cpu" and not not_batched:
        return "batched", "a sequence model whose every layer the batched path computes"
    why = "" if not_batched.startswith("not a sequence model") else f"; not batched: {not_batched}"
    if global_random:
        return "replicas", f"one job at a time, torch's generator seeded per job: the module draws from it{why}"
    return "replicas", "any module" + (" (channels_last)" if channels_last else "") + why


class Trainer:
    """Trains one task's jobs on (x, y) by the path chosen for its module (``path`` forces one)."""

    def __init__(
        self,
        network: Network,
        x: torch.Tensor,
        y: torch.Tensor,
        *,
        device: torch.device,
        extras: ExtraScalars | None = None,
        path: str | None = None,
        guard: Callable[[], AbstractContextManager] = nullcontext,
    ):
        """``guard``: what the user's module runs inside (:func:`netfl.user_code.guarded` for a module of the
        user's file: its errors name the file and line), in whichever thread runs it."""
        self.network, self.x, self.y, self.device, self.extras = network, x, y, device, extras
        self.guard = guard
        with guard():
            self.global_random = draws_global_random(network, x, y, device)
        per_token = y.dim() == 2
        self.fused = None
        if not network.buffers and extras is None and not per_token:
            self.fused = FusedMLP.of(network.module, network.params, tuple(x.shape[1:]))
        self.channels_last = uses_channels_last(network.module, x[0])
        self._batched: BatchedKernel | None = None
        self.not_batched = "the strategy's extra scalars train on replicas" if extras is not None else ""
        if not self.not_batched:
            plan, self.not_batched = plan_for(network, x, y, guard)
            if plan is not None:
                self._batched = BatchedKernel(network, plan, guard)
        self.path, self.reason = self._choose(path)
        self._replicas = ReplicaKernel(
            network,
            device,
            channels_last=self.channels_last,
            extras=extras,
            global_random=self.global_random,
            guard=guard,
        )
        self._functional: FunctionalKernel | None = None
        self._activations: dict[int, int] = {}

    def _choose(self, forced: str | None) -> tuple[str, str]:
        return choose_path(
            forced=forced,
            device_type=self.device.type,
            cannot=self._cannot,
            fused=self.fused is not None,
            global_random=self.global_random,
            channels_last=self.channels_last,
            not_batched=self.not_batched,
        )

    def _cannot(self, path: str) -> str:
        """Why ``path`` cannot train this task ('' when it can)."""
        if path == "fused" and self.fused is None:
            return "the fused kernel trains Linear/ReLU stacks without buffers or extras, one label per sample"
        if path == "batched":
            return self.not_batched
        if path == "stacked":
            if self.extras is not None:
                return "the strategy's extra scalars train on replicas"
            if self.global_random:
                return "the module draws random numbers, which vmap would share between jobs"
            return self._vmap_problem()
        return ""

    def _vmap_problem(self) -> str:
        """Whether ``vmap`` batches the module: one step of two jobs on two samples each ('' when it does)."""
        try:
            start = self.network.initial_params().to(self.device)
            buffers = self.network.initial_buffers().to(self.device)
            kernel = FunctionalKernel(self.network)
            w = start.expand(2, -1).clone()
            b = buffers.expand(2, -1).clone() if self.network.buffers else None
            batches = torch.tensor([[[0, 1]], [[0, 1]]], device=self.device)
            kernel.train(w, b, self.x, self.y, batches, [1, 1], lr=0.0, weight_decay=0.0)
        except Exception as exc:  # vmap refuses many operations, each in its own way
            return f"vmap cannot batch it ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
        return ""

    def describe(self, threads: int | None = None, adaptive: bool = False) -> str:
        """The path and why, for summary.json (``threads``: the run's worker threads, ``adaptive``: fewer while
        other processes keep CPUs busy) and ``netfl validate`` (None: before a run)."""
        where = ""
        one_at_a_time = self.path == "replicas" and self.global_random
        if self.path in ("replicas", "fused", "batched") and self.device.type == "cpu" and not one_at_a_time:
            count = f"{'up to ' if adaptive else ''}{threads} worker thread{'s' if threads != 1 else ''}"
            where = ", in the worker threads" if threads is None else f", {count}"
        return f"{self.path} ({self.reason}{where})"

    def train(
        self,
        start: torch.Tensor,
        jobs: Sequence[TrainJob],
        *,
        lr: float,
        weight_decay: float,
        start_buffers: torch.Tensor | None = None,
    ) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """Each job's final vector (parameters, then any extras) and buffers, trained from ``start`` (and its
        buffers ``start_buffers`` or the job's own); the jobs of a fused or stacked call share a minibatch
        size and a correction pull."""
        # the replicas guard the module in the worker threads that run it; the other paths run it in this thread
        with nullcontext() if self.path in ("replicas", "batched") else self.guard():
            if self.path == "reference":
                return [self._train_reference(start, job, lr, weight_decay, start_buffers) for job in jobs]
            train, parallel = self._trainer(start, jobs)
            return train(
                start,
                self.x,
                self.y,
                jobs,
                lr=lr,
                weight_decay=weight_decay,
                start_buffers=start_buffers if self.network.buffers else None,
                parallel=parallel,
            )

    def _trainer(self, start: torch.Tensor, jobs: Sequence[TrainJob]) -> tuple[Callable, Callable | None]:
        """The replicas', fused or stacked training function (``start``, data and jobs in, the jobs' final vectors
        and buffers out), and the map that spreads its work over the worker threads (None: this thread)."""
        if self.path == "replicas":
            return self._replicas.train, parallel_map
        if self.path == "batched":
            per_chunk = self._batched.plan.chunk_jobs(start.numel() * start.element_size(), len(jobs))
            return partial(train_stacked, self._batched, per_chunk=per_chunk), parallel_map
        kernel = self.fused if self.path == "fused" else self._functional_kernel()
        per_chunk = jobs_per_chunk(self._per_job_bytes(start, jobs[0].minibatches.shape[1]), self.device)
        # the fused kernel's chunks may train in the worker threads: they never run the module itself
        parallel = parallel_map if self.path == "fused" and self.device.type == "cpu" else None
        return partial(train_stacked, kernel, per_chunk=per_chunk), parallel

    def _train_reference(
        self, start: torch.Tensor, job: TrainJob, lr: float, weight_decay: float, start_buffers: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One job alone through ``functional_call``, torch's generator seeded from it where the module draws."""
        if self.global_random:
            torch.manual_seed(job.seed)
        buffers = job.buffers if job.buffers is not None else start_buffers
        return train_one(
            self.network,
            start,
            self.x,
            self.y,
            job.minibatches,
            lr=lr,
            weight_decay=weight_decay,
            buffers=buffers,
            extras=self.extras,
            correction=job.correction,
        )

    def _functional_kernel(self) -> FunctionalKernel:
        if self._functional is None:
            self._functional = FunctionalKernel(self.network)
        return self._functional

    def _per_job_bytes(self, start: torch.Tensor, batch: int) -> int:
        """What one job of a chunk holds: on a CPU its parameters (the cache-sized budget counts those); on a
        GPU its parameters three times over (them, their gradient, the update's temporaries) and the
        activations of a minibatch (measured once per batch size)."""
        params = start.numel() * start.element_size()
        if self.device.type == "cpu":
            return params
        if batch not in self._activations:
            idx = torch.arange(min(batch, len(self.x)), device=self.device)
            self._activations[batch] = activation_bytes(self.network, self.x[idx], self.y[idx])
        return 3 * params + self._activations[batch]
