"""Local SGD of many jobs at once, stacked along a leading axis and trained chunk by chunk.

A plain per-client loop is fast on a CPU for one reason: a client's model
stays in the cache for all of its steps. Advancing every job of a round one
step at a time does the opposite -- each step streams every model through
memory -- and a fresh (jobs x model size) gradient per step makes the
kernel zero new pages (system time). So here jobs train in *chunks*, a
chunk runs all its steps before the next one starts, and parameters are
updated in place. A chunk is sized to the cache on a CPU, and to the free
memory on a GPU, where the larger the chunk the fuller the device
(:func:`jobs_per_chunk`). Two kernels train a chunk:

* :class:`~netfl.learn.training.fused_mlp.FusedMLP` (Linear/ReLU stacks): hand-written batched matrix products;
* :class:`FunctionalKernel` (any module ``vmap`` can batch, buffers included): ``torch.func`` --
  ``vmap(grad(loss))`` over the chunk, then an in-place ``_foreach_add_``. On a GPU a chunk's step is
  then a few large kernels (a stacked convolution is one grouped convolution) instead of one small kernel
  per client and layer.

Jobs may differ in length: sorted by steps, the jobs still running at step
t are a suffix of their chunk, so shorter jobs are neither padded nor
masked.

A strategy's gradient :class:`~netfl.learn.training.objective.Correction`
``a (w - w0) + b`` is folded into the same in-place update: the decay
factor becomes ``1 - lr (wd + a)`` and the constant ``lr (a w0 - b)`` (one
row per job, computed once per chunk) is added after each step. The result
equals one-by-one :func:`~netfl.learn.training.reference.train_one` on the same
minibatches up to float rounding (the batched kernels sum in another order).
"""

from __future__ import annotations

import copy
from bisect import bisect_right
from collections.abc import Callable, Sequence
from typing import Protocol

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from netfl.learn.models.flat_model import Network, task_loss
from netfl.learn.models.params import ParamLayout
from netfl.learn.models.pool_first import pool_before_activation
from netfl.learn.training.objective import Correction
from netfl.learn.training.reference import TrainJob

#: Parameter bytes of one chunk on a CPU: a few times a core's L2 cache. Measured on W1 (one thread):
#: 4-8 MiB is fastest; 64 MiB (a whole round at once) is 1.4x slower. Chunks are what the worker
#: threads share out (netfl.learn.training.runtime), so the budget does not grow with the thread count.
CPU_CHUNK_BYTES = 4 * 2**20
#: The share of a GPU's free memory one chunk may fill (parameters, their gradients and the activations).
GPU_MEMORY_SHARE = 0.5


class ChunkKernel(Protocol):
    def train(
        self,
        w: torch.Tensor,
        buffers: torch.Tensor | None,
        x: torch.Tensor,
        y: torch.Tensor,
        batches: torch.Tensor,
        steps: list[int],
        *,
        lr: float,
        weight_decay: float,
        pull: float = 0.0,
        offset: torch.Tensor | None = None,
        seeds: list[int] | None = None,
    ) -> None:
        """Advance the rows of ``w`` (n x dim, jobs sorted by ``steps``) and ``buffers`` (n x buffer size) in
        place; each step: ``w <- (1 - lr (weight_decay + pull)) w - lr grad + offset``. ``seeds``: each job's
        (for a kernel whose module draws random numbers). A kernel whose ``takes_same_start`` is true is also
        passed ``same_start=True``: every row of ``w`` starts as the same model, as a chunk's jobs here do.
        A kernel's ``row_multiple`` (if any): the rows of ``w`` lie a multiple of that many elements apart."""


def jobs_per_chunk(per_job_bytes: int, device: torch.device, free_bytes: int | None = None) -> int:
    """How many jobs train together: a CPU chunk holds :data:`CPU_CHUNK_BYTES` of parameters (``per_job_bytes``
    counts those); a GPU chunk fills :data:`GPU_MEMORY_SHARE` of the free memory (``per_job_bytes`` counts
    parameters, gradients and activations; ``free_bytes`` is asked of the device when not given)."""
    if device.type == "cpu":
        return max(1, CPU_CHUNK_BYTES // max(1, per_job_bytes))
    if free_bytes is None:
        free_bytes, _ = torch.cuda.mem_get_info(device)
    return max(1, int(free_bytes * GPU_MEMORY_SHARE) // max(1, per_job_bytes))


def train_stacked(
    kernel: ChunkKernel,
    start: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    jobs: Sequence[TrainJob],
    *,
    lr: float,
    weight_decay: float,
    per_chunk: int,
    start_buffers: torch.Tensor | None = None,
    parallel: Callable[[Callable, list], list] | None = None,
) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
    """Train ``jobs`` from the vector ``start`` (and buffers ``start_buffers``, or each job's own) on (x, y), at
    most ``per_chunk`` at a time; return each job's final vector and buffers.

    Every job has the same minibatch size; their corrections all have the same ``pull`` (None counts as no
    correction). ``parallel``: a map that trains chunks side by side (the worker threads), for kernels that may
    run in several threads. The vectors returned are rows of the chunks they trained in (no copy): the caller
    may change them in place.
    """
    corrections = [job.correction for job in jobs]
    if all(c is None for c in corrections):
        corrections = None
    pull = 0.0
    if corrections is not None:
        pulls = {c.pull if c is not None else 0.0 for c in corrections}
        if len(pulls) > 1:
            raise ValueError(f"jobs trained together need the same correction pull, got {sorted(pulls)}")
        (pull,) = pulls
    order = sorted(range(len(jobs)), key=lambda j: len(jobs[j].minibatches))
    chunks = [order[first : first + per_chunk] for first in range(0, len(order), per_chunk)]

    def train_chunk(members: list[int]) -> tuple[torch.Tensor, torch.Tensor | None]:
        steps = [len(jobs[j].minibatches) for j in members]
        b = jobs[members[0]].minibatches.shape[1]
        batches = torch.zeros(len(members), steps[-1], b, dtype=torch.long)
        for row, j in enumerate(members):  # rows past a job's own steps are never read
            batches[row, : steps[row]] = jobs[j].minibatches
        w = _rows(start.detach(), len(members), getattr(kernel, "row_multiple", 1))
        bufs = None
        if start_buffers is not None:
            bufs = torch.stack([jobs[j].buffers if jobs[j].buffers is not None else start_buffers for j in members])
        offset = None if corrections is None else _offset(start, [corrections[j] for j in members], lr, pull)
        same = {"same_start": True} if getattr(kernel, "takes_same_start", False) else {}
        kernel.train(
            w, bufs, x, y, batches.to(x.device), steps, lr=lr, weight_decay=weight_decay, pull=pull, offset=offset,
            seeds=[jobs[j].seed for j in members], **same,
        )  # fmt: skip
        return w, bufs

    trained = parallel(train_chunk, chunks) if parallel is not None else [train_chunk(c) for c in chunks]
    out: list[tuple[torch.Tensor, torch.Tensor | None]] = [(start, None)] * len(jobs)
    for members, (w, bufs) in zip(chunks, trained):
        for row, j in enumerate(members):
            out[j] = (w[row], bufs[row] if bufs is not None else None)
    return out


def _rows(start: torch.Tensor, n: int, multiple: int) -> torch.Tensor:
    """``n`` copies of ``start`` as the rows of an (n x dim) matrix whose rows lie ``multiple``-aligned apart
    in memory (a kernel's ``row_multiple``: the batched kernel reads every client's embedding table as rows
    of one matrix, which needs the row length to be a multiple of the table's width)."""
    dim = start.shape[0]
    length = -(-dim // multiple) * multiple
    w = start.new_empty(n, length)[:, :dim]
    w.copy_(start.expand(n, -1))
    return w


def _offset(start: torch.Tensor, corrections: Sequence[Correction | None], lr: float, pull: float) -> torch.Tensor:
    """``lr (pull w0 - shift_j)`` for each job j: the constant part of its corrected step."""
    offset = (lr * pull * start.detach()).expand(len(corrections), -1).clone()
    for row, correction in enumerate(corrections):
        if correction is not None and correction.shift is not None:
            offset[row].sub_(correction.shift.to(offset), alpha=lr)
    return offset


def running_from(steps: list[int], step: int) -> int:
    """The first job (of a chunk sorted by steps) that still runs at ``step``."""
    return bisect_right(steps, step)


def stacked_views(w: torch.Tensor, layout: ParamLayout) -> dict[str, torch.Tensor]:
    """Each named parameter of the n stacked flat vectors in ``w`` (n x dim), as an n x shape view."""
    out, offset = {}, 0
    for name, numel, shape in zip(layout.names, layout.numels, layout.shapes):
        out[name] = w[:, offset : offset + numel].view(len(w), *shape)
        offset += numel
    return out


class FunctionalKernel:
    """Any module ``vmap`` can batch: per step, ``vmap(grad(loss))`` over the chunk and an in-place update.

    Buffers ride along batched: a module that updates them in training (BatchNorm) updates each job's own.
    ``torch.func`` keeps its transforms' state per process, so this kernel runs in one thread.
    """

    def __init__(self, network: Network):
        self.network = network
        self.module = module = copy.deepcopy(network.module)  # its own copy, pooling before the activation
        pool_before_activation(module)

        def loss(params: dict, buffers: dict, xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
            return task_loss(functional_call(module, {**params, **buffers}, (xb,)), yb)

        self.gradients = vmap(grad(loss))

    def train(
        self,
        w: torch.Tensor,
        buffers: torch.Tensor | None,
        x: torch.Tensor,
        y: torch.Tensor,
        batches: torch.Tensor,
        steps: list[int],
        *,
        lr: float,
        weight_decay: float,
        pull: float = 0.0,
        offset: torch.Tensor | None = None,
        seeds: list[int] | None = None,
    ) -> None:
        network = self.network
        self.module.train()
        n, b = len(steps), batches.shape[2]
        params = stacked_views(w, network.params)
        own = read_buffers(network, buffers)
        xbuf = torch.empty((n * b, *x.shape[1:]), dtype=x.dtype, device=x.device)
        decay = 1.0 - lr * (weight_decay + pull)
        for step in range(steps[-1] if steps else 0):
            first = running_from(steps, step)
            m = n - first
            idx = batches[first:, step].reshape(-1)
            xb = torch.index_select(x, 0, idx, out=xbuf[: m * b]).view(m, b, *x.shape[1:])
            running = {name: p[first:] for name, p in params.items()}
            grads = self.gradients(running, {k: v[first:] for k, v in own.items()}, xb, y[idx].view(m, b, *y.shape[1:]))
            targets = list(running.values())
            if weight_decay or pull:
                torch._foreach_mul_(targets, decay)
            torch._foreach_add_(targets, [grads[name] for name in running], alpha=-lr)
            if offset is not None:
                w[first:].add_(offset[first:])
        write_buffers(network, buffers, own)


def read_buffers(network: Network, buffers: torch.Tensor | None) -> dict[str, torch.Tensor]:
    """Each job's buffers (rows of ``buffers``) as stacked tensors of their own (contiguous, each its own dtype:
    a module updates them in place, which vmap carries out only on such tensors); :func:`write_buffers` puts
    them back into the chunk's rows after training."""
    if buffers is None or not network.buffers:
        return {}
    layout = network.buffers
    views = stacked_views(buffers, ParamLayout(layout.names, layout.shapes, layout.numels))
    return {
        name: (view.clone() if dtype.is_floating_point else view.round()).to(dtype)
        for (name, view), dtype in zip(views.items(), layout.dtypes)
    }


def write_buffers(network: Network, buffers: torch.Tensor | None, own: dict[str, torch.Tensor]) -> None:
    if buffers is not None and own:
        n = len(buffers)
        buffers.copy_(torch.stack([network.buffers.pack({k: v[j] for k, v in own.items()}) for j in range(n)]))


def activation_bytes(network: Network, xb: torch.Tensor, yb: torch.Tensor) -> int:
    """Bytes one job's minibatch ``xb`` keeps alive through a training step: every submodule's output (saved
    for the backward pass, and its gradient), measured by running the module once."""
    total = 0

    def count(_module: nn.Module, _inputs: tuple, output) -> None:
        nonlocal total
        for t in output if isinstance(output, (tuple, list)) else (output,):
            if isinstance(t, torch.Tensor):
                total += 2 * t.numel() * t.element_size()

    leaves = [m for m in network.module.modules() if not list(m.children())]
    handles = [m.register_forward_hook(count) for m in leaves]
    try:
        with torch.no_grad():
            network.module.train()
            w = network.initial_params().to(xb.device)
            buffers = network.buffer_tensors(network.initial_buffers().to(xb.device))
            task_loss(network.forward(w, buffers, xb), yb)
    finally:
        for handle in handles:
            handle.remove()
    return total
