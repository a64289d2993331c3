"""Any module, every core: each job trained by plain autograd on a private copy of the module, jobs spread
over the worker threads.

``torch.func`` transforms cannot run in two threads at once (``vmap(grad(...))`` from two threads returns
wrong gradients), but autograd can: each worker thread keeps its own *replica* of the task's module -- its
own parameters, gradients and buffers -- and trains whole jobs on it, one after another, with one torch
thread inside every operation (:mod:`netfl.learn.training.runtime`). A job loads its starting state into the
replica, runs its SGD steps (``loss.backward()``, then the update in place through ``torch._foreach``
operations on the replica's parameters and their preallocated gradients: nothing model-sized is allocated
per step), and reads its final state out. A job runs on one thread from start to end, so its result does not
depend on the thread count nor on which thread ran it.

What makes a replica fast on a CPU:

* convolutional modules run in ``channels_last`` memory format (weights, activations and the minibatch):
  oneDNN's convolutions, pooling and activations are faster in it (measured on the built-in CNN, one core:
  14.7 ms against 20.7 ms a step of 32; LeNet-5 1.2x);
* a max-pooling that follows ReLU (or another exactly computed non-decreasing activation) runs first, so
  the activation works on the pooled elements only: the same numbers (:mod:`netfl.learn.models.pool_first`; a
  step of the built-in CNN in 0.75x the time);
* each step's minibatch is gathered into a buffer allocated once per replica.

Dropout stays reproducible: a replica's ``nn.Dropout`` layers draw from a generator seeded per job, not
from torch's global generator (which every thread shares). A module that draws from the global generator in
some other way is detected (:func:`draws_global_random`) and its jobs run one at a time, each after seeding
torch's generator from the job, so that the same seed still gives the same run.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext

import torch
from torch import nn

from netfl.learn.models.flat_model import IGNORE_LABEL, Network, OutputMismatch, output_problem, task_loss
from netfl.learn.models.pool_first import pool_before_activation
from netfl.learn.training.objective import ExtraScalars
from netfl.learn.training.reference import TrainJob

__all__ = ["Replica", "ReplicaKernel", "Evaluator", "draws_global_random", "uses_channels_last"]


def uses_channels_last(module: nn.Module, sample: torch.Tensor) -> bool:
    """Whether replicas of ``module`` run in channels_last format: it convolves, and its samples are float
    images (C, H, W)."""
    convolves = any(isinstance(m, nn.Conv2d) for m in module.modules())
    return convolves and sample.dim() == 3 and sample.is_floating_point()


class _SeededDropout(nn.Module):
    """``nn.Dropout`` (or ``Dropout1d/2d/3d``: whole channels) drawing its mask from a generator of its own."""

    def __init__(self, p: float, channels: int | None, generator: torch.Generator):
        super().__init__()
        self.p, self.channels, self.generator = p, channels, generator

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        if self.p == 1.0:
            return x * 0.0
        shape = x.shape if self.channels is None else x.shape[: x.dim() - self.channels] + (1,) * self.channels
        keep = torch.empty(shape, device=x.device, dtype=x.dtype).bernoulli_(1.0 - self.p, generator=self.generator)
        return x * keep / (1.0 - self.p)


_DROPOUT_CHANNELS = {nn.Dropout: None, nn.Dropout1d: 1, nn.Dropout2d: 2, nn.Dropout3d: 3}


def _seed_dropouts(module: nn.Module, generator: torch.Generator) -> int:
    """Replace the dropout layers of ``module`` (in place) by seeded ones; return how many."""
    count = 0
    for name, child in list(module.named_children()):
        kind = type(child)
        if kind in _DROPOUT_CHANNELS:
            setattr(module, name, _SeededDropout(child.p, _DROPOUT_CHANNELS[kind], generator))
            count += 1
        else:
            count += _seed_dropouts(child, generator)
    return count


class Replica:
    """One thread's copy of a task's module: its parameters (in layout order), their gradients, its buffers."""

    def __init__(self, network: Network, device: torch.device, *, channels_last: bool, training: bool):
        module = copy.deepcopy(network.module).to(device)
        pool_before_activation(module)
        self.generator = torch.Generator(device=device)
        if training:
            _seed_dropouts(module, self.generator)
        if channels_last:
            module = module.to(memory_format=torch.channels_last)
        module.train(training)
        named = dict(module.named_parameters())
        self.params = [named[name] for name in network.params.names]
        for p in self.params:
            p.grad = torch.zeros_like(p) if training else None
        self.grads = [p.grad for p in self.params]
        buffers = dict(module.named_buffers())
        self.buffers = [buffers[name] for name in network.buffers.names]
        self.module, self.network, self.channels_last = module, network, channels_last
        self._xbuf: dict[tuple[int, ...], tuple[torch.Tensor, torch.Tensor | None]] = {}

    @torch.no_grad()
    def load(self, w: torch.Tensor, b: torch.Tensor | None) -> None:
        torch._foreach_copy_(self.params, list(self.network.params.unflatten(w).values()))
        if self.buffers and b is not None:
            for target, value in zip(self.buffers, self.network.buffers.unflatten(b).values()):
                target.copy_(value)

    def params_vector(self) -> torch.Tensor:
        return torch.cat([p.detach().reshape(-1) for p in self.params])

    def buffers_vector(self) -> torch.Tensor | None:
        if not self.buffers:
            return None
        return self.network.buffers.pack(dict(zip(self.network.buffers.names, self.buffers)))

    def gather(self, x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        """Samples ``idx`` of ``x`` in the replica's memory format, in buffers allocated once per size."""
        key = (len(idx), *x.shape[1:])
        if key not in self._xbuf:
            plain = torch.empty(key, dtype=x.dtype, device=x.device)
            formatted = torch.empty_like(plain, memory_format=torch.channels_last) if self.channels_last else None
            self._xbuf[key] = (plain, formatted)
        plain, formatted = self._xbuf[key]
        torch.index_select(x, 0, idx, out=plain)
        return formatted.copy_(plain) if formatted is not None else plain


class _ThreadReplicas:
    """Each thread's replica of one network, made on first use (worker threads live as long as the process)."""

    def __init__(self, network: Network, device: torch.device, *, channels_last: bool, training: bool):
        self._local = threading.local()
        self._args = (network, device)
        self._kw = {"channels_last": channels_last, "training": training}

    def get(self) -> Replica:
        replica = getattr(self._local, "replica", None)
        if replica is None:
            replica = self._local.replica = Replica(*self._args, **self._kw)
        return replica


class ReplicaKernel:
    """Trains a task's jobs one per replica at a time, the replicas in the worker threads."""

    def __init__(
        self,
        network: Network,
        device: torch.device,
        *,
        channels_last: bool,
        extras: ExtraScalars | None = None,
        global_random: bool = False,
        guard: Callable[[], AbstractContextManager] = nullcontext,
    ):
        self.network, self.extras, self.global_random, self.guard = network, extras, global_random, guard
        self.replicas = _ThreadReplicas(network, device, channels_last=channels_last, training=True)

    def train(
        self,
        start: torch.Tensor,
        x: torch.Tensor,
        y: torch.Tensor,
        jobs: Sequence[TrainJob],
        *,
        lr: float,
        weight_decay: float,
        start_buffers: torch.Tensor | None = None,
        parallel: Callable[[Callable, list], list] | None = None,
    ) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """Each job from ``start`` (parameters, then any extras) and its buffers; their final vectors and
        buffers, in the order of ``jobs``. ``parallel`` maps over the worker threads (not used when the module
        draws from torch's global generator)."""

        def run(j: int) -> tuple[torch.Tensor, torch.Tensor | None]:
            job = jobs[j]
            with self.guard():  # in the thread that runs the user's module
                return self._train_one(
                    start, job, x, y, lr, weight_decay, job.buffers if job.buffers is not None else start_buffers
                )

        order = sorted(range(len(jobs)), key=lambda j: -len(jobs[j].minibatches))  # longest first: even threads
        if parallel is None or self.global_random:
            done = [run(j) for j in order]
        else:
            done = parallel(run, order)
        out: list[tuple[torch.Tensor, torch.Tensor | None]] = [(start, None)] * len(jobs)
        for j, result in zip(order, done):
            out[j] = result
        return out

    def _train_one(
        self,
        start: torch.Tensor,
        job: TrainJob,
        x: torch.Tensor,
        y: torch.Tensor,
        lr: float,
        weight_decay: float,
        buffers: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        replica = self.replicas.get()
        n = self.network.params.size
        replica.load(start[:n], buffers)
        replica.generator.manual_seed(job.seed)
        if self.global_random:
            torch.manual_seed(job.seed)
        extra = start[n:].detach().clone().requires_grad_(True) if self.extras is not None else None
        correction = job.correction
        pull = correction.pull if correction is not None else 0.0
        decay = 1.0 - lr * (weight_decay + pull)
        offsets = None
        if correction is not None and (pull or correction.shift is not None):
            offset = lr * pull * start[:n]
            if correction.shift is not None:
                offset = offset - lr * correction.shift.to(offset)
            offsets = list(self.network.params.unflatten(offset).values())
        params, grads = replica.params, replica.grads
        for idx in job.minibatches.to(x.device):  # the indices where the data is (a GPU's memory)
            torch._foreach_zero_(grads)
            loss = task_loss(replica.module(replica.gather(x, idx)), y[idx])
            if extra is not None:
                extra.grad = None
                loss = self.extras.objective(loss, extra)
            loss.backward()
            with torch.no_grad():
                if decay != 1.0:
                    torch._foreach_mul_(params, decay)
                torch._foreach_add_(params, grads, alpha=-lr)
                if offsets is not None:
                    torch._foreach_add_(params, offsets)
                if extra is not None and extra.grad is not None:
                    extra.sub_(extra.grad, alpha=self.extras.lr(lr))
        end = replica.params_vector()
        if extra is not None:
            end = torch.cat([end, extra.detach()])
        return end, replica.buffers_vector()


def draws_global_random(network: Network, x: torch.Tensor, y: torch.Tensor, device: torch.device) -> bool:
    """Whether a training step of a replica of ``network`` (dropout layers seeded) draws from torch's global
    generator: one step on two samples, and torch's generator state compared before and after (restored)."""
    replica = Replica(network, device, channels_last=False, training=True)
    replica.load(network.initial_params().to(device), network.initial_buffers().to(device))
    cpu_state = torch.get_rng_state()
    cuda_state = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
    try:
        task_loss(replica.module(x[:2]), y[:2]).backward()
        return not torch.equal(torch.get_rng_state(), cpu_state) or (
            cuda_state is not None and not torch.equal(torch.cuda.get_rng_state(device), cuda_state)
        )
    finally:
        torch.set_rng_state(cpu_state)
        if cuda_state is not None:
            torch.cuda.set_rng_state(cuda_state, device)


class Evaluator:
    """Test accuracy, loss and per-class accuracy of a network's state, chunk by chunk in the worker threads.

    The test set is cut into chunks whatever the thread count, and the chunks' sums are added in order, so
    the figures are the same bits with any number of threads. A chunk is :attr:`CHUNK` samples, or
    :attr:`CONV_CHUNK` for a convolutional module: a conv net's activations for 2048 images are hundreds of
    MB per layer, and smaller chunks stay in cache (measured on Fashion-MNIST's 10 000 test images, one
    thread, channels_last: the built-in CNN 1.15 s in chunks of 256 against 3.65 s in chunks of 2048,
    LeNet-5 0.55 against 0.85 s, a small ResNet 1.43 against 3.18 s; 256 was the best or within 10 % of it
    for each, and an MLP's time does not depend on the chunk).
    """

    CHUNK = 2048
    CONV_CHUNK = 256

    def __init__(
        self,
        network: Network,
        num_classes: int,
        device: torch.device,
        *,
        channels_last: bool,
        guard: Callable[[], AbstractContextManager] = nullcontext,
    ):
        self.network, self.num_classes, self.device, self.guard = network, num_classes, device, guard
        self.replicas = _ThreadReplicas(network, device, channels_last=channels_last, training=False)
        self.chunk = self.CONV_CHUNK if any(isinstance(m, nn.Conv2d) for m in network.module.modules()) else self.CHUNK

    def __call__(
        self,
        w: torch.Tensor,
        b: torch.Tensor | None,
        x: torch.Tensor,
        y: torch.Tensor,
        parallel: Callable[[Callable, list], list] | None = None,
    ) -> tuple[float, float, list[float]]:
        size = self.chunk
        starts = list(range(0, len(x), size))

        @torch.no_grad()
        def chunk(start: int) -> tuple[float, torch.Tensor, torch.Tensor]:
            with self.guard():
                return counts(start)

        def counts(start: int) -> tuple[float, torch.Tensor, torch.Tensor]:
            replica = self.replicas.get()
            replica.load(w, b)
            xb, yb = x[start : start + size], y[start : start + size]
            if replica.channels_last:
                xb = xb.contiguous(memory_format=torch.channels_last)
            logits = replica.module(xb)
            if tuple(logits.shape[:-1]) != tuple(yb.shape) or logits.shape[-1] < self.num_classes:
                raise OutputMismatch(output_problem(logits, yb, self.num_classes))
            if yb.dim() == 2:
                logits, yb = logits.reshape(-1, logits.shape[-1]), yb.reshape(-1)
            loss = float(nn.functional.cross_entropy(logits, yb, reduction="sum"))
            counted = yb != IGNORE_LABEL
            logits, yb = logits[counted], yb[counted]
            hit = (logits.argmax(1) == yb).float()
            correct = torch.zeros(self.num_classes, device=w.device).index_add_(0, yb, hit)
            total = torch.zeros(self.num_classes, device=w.device).index_add_(0, yb, torch.ones_like(hit))
            return loss, correct, total

        parts = parallel(chunk, starts) if parallel is not None and len(starts) > 1 else [chunk(s) for s in starts]
        correct = torch.zeros(self.num_classes, device=w.device)
        total = torch.zeros(self.num_classes, device=w.device)
        loss_sum = 0.0
        for loss, c, t in parts:
            loss_sum += loss
            correct += c
            total += t
        per_class = [float(c / t) if t > 0 else float("nan") for c, t in zip(correct, total)]
        counted = float(total.sum())
        return float(correct.sum() / total.sum()), loss_sum / max(counted, 1.0), per_class
