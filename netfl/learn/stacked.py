"""Local SGD of many jobs at once, stacked along a leading axis.

A plain per-client loop is fast on a CPU for one reason: a client's model
stays in the cache for all of its steps. Advancing every job of a round one
step at a time does the opposite -- each step streams every model through
memory -- and a fresh (jobs x model size) gradient per step makes the
kernel zero new pages (system time). So here jobs train in *chunks* sized
to the cache, a chunk runs all its steps before the next one starts, and
parameters are updated in place:

* :class:`FusedMLP` (``Flatten, Linear, ReLU, ..., Linear`` under
  cross-entropy: the ``logistic`` and ``mlp`` models): forward, backward
  and update as batched matrix products into buffers allocated once per
  chunk; a weight's update is one in-place ``baddbmm_``
  (``W <- (1 - lr wd) W - lr g^T x``), so no gradient is ever stored;
* any other model: ``torch.func`` -- ``vmap(grad(loss))`` over the chunk,
  then an in-place ``_foreach_add_``.

Jobs may differ in length: sorted by steps, the jobs still running at step
t are a suffix of their chunk, so shorter jobs are neither padded nor
masked.

A strategy's gradient :class:`~netfl.learn.objective.Correction`
``a (w - w0) + b`` is folded into the same in-place update: the decay
factor becomes ``1 - lr (wd + a)`` and the constant ``lr (a w0 - b)`` (one
row per job, computed once per chunk) is added after each step. Without
corrections none of this runs. The result equals one-by-one
:func:`~netfl.learn.training.local_sgd` on the same minibatches up to float
rounding (the batched kernels sum in another order).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from netfl.learn.objective import Correction
from netfl.learn.params import ParamLayout
from netfl.learn.runtime import parallel_map

#: Parameter bytes of one chunk on a CPU: a few times a core's L2 cache. Measured on W1 (one thread):
#: 4-8 MiB is fastest; 64 MiB (a whole round at once) is 1.4x slower. Chunks are what the worker
#: threads share out (netfl.learn.runtime), so the budget does not grow with the thread count.
CPU_CHUNK_BYTES = 4 * 2**20
#: On a GPU there is no cache to respect: the larger the chunk, the fuller the device.
GPU_CHUNK_BYTES = 2**30


def train_stacked(
    model: nn.Module,
    layout: ParamLayout,
    start: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    minibatches: Sequence[torch.Tensor],
    *,
    lr: float,
    weight_decay: float,
    corrections: Sequence[Correction | None] | None = None,
) -> list[torch.Tensor]:
    """Train one job per entry of ``minibatches`` from the vector ``start`` on (x, y); return their final vectors.

    ``minibatches[j]`` (steps_j x b) holds job j's minibatches as indices into (x, y), one row per SGD
    step; every job has the same b. ``corrections[j]`` (if given) is job j's gradient correction; all
    of them have the same ``pull`` (None counts as no correction). The vectors returned are rows of
    the chunks they trained in (no copy): the caller may change them in place.
    """
    if corrections is not None and all(c is None for c in corrections):
        corrections = None
    pull = 0.0
    if corrections is not None:
        pulls = {c.pull if c is not None else 0.0 for c in corrections}
        if len(pulls) > 1:
            raise ValueError(f"jobs trained together need the same correction pull, got {sorted(pulls)}")
        (pull,) = pulls
    kernel = FusedMLP.of(model, layout) or FunctionalKernel(model, layout)
    budget = CPU_CHUNK_BYTES if start.device.type == "cpu" else GPU_CHUNK_BYTES
    per_chunk = max(1, budget // (start.numel() * start.element_size()))
    order = sorted(range(len(minibatches)), key=lambda j: len(minibatches[j]))
    chunks = [order[first : first + per_chunk] for first in range(0, len(order), per_chunk)]

    def train_chunk(jobs: list[int]) -> torch.Tensor:
        steps = [len(minibatches[j]) for j in jobs]
        batches = torch.zeros(len(jobs), steps[-1], minibatches[jobs[0]].shape[1], dtype=torch.long)
        for row, j in enumerate(jobs):  # rows past a job's own steps are never read
            batches[row, : steps[row]] = minibatches[j]
        w = start.detach().expand(len(jobs), -1).clone()
        offset = None if corrections is None else _offset(start, [corrections[j] for j in jobs], lr, pull)
        kernel.train(w, x, y, batches.to(x.device), steps, lr=lr, weight_decay=weight_decay, pull=pull, offset=offset)
        return w

    out: list[torch.Tensor] = [start] * len(minibatches)
    # torch.func keeps its transforms' state per process, not per thread: only the fused kernel runs in parallel
    parallel = isinstance(kernel, FusedMLP) and start.device.type == "cpu"
    trained = parallel_map(train_chunk, chunks) if parallel else [train_chunk(c) for c in chunks]
    for jobs, w in zip(chunks, trained):
        for row, j in enumerate(jobs):
            out[j] = w[row]
    return out


def _offset(start: torch.Tensor, corrections: Sequence[Correction | None], lr: float, pull: float) -> torch.Tensor:
    """``lr (pull w0 - shift_j)`` for each job j: the constant part of its corrected step."""
    offset = (lr * pull * start.detach()).expand(len(corrections), -1).clone()
    for row, correction in enumerate(corrections):
        if correction is not None and correction.shift is not None:
            offset[row].sub_(correction.shift.to(offset), alpha=lr)
    return offset


def _running_from(steps: list[int], step: int) -> int:
    """The first job (of a chunk sorted by steps) that still runs at ``step``."""
    return bisect_right(steps, step)


class FunctionalKernel:
    """Any model: per step, ``vmap(grad(cross-entropy))`` over the chunk and an in-place update."""

    def __init__(self, model: nn.Module, layout: ParamLayout):
        self.layout = layout

        def loss(params: dict[str, torch.Tensor], xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
            return nn.functional.cross_entropy(functional_call(model, params, (xb,)), yb)

        self.gradients = vmap(grad(loss))

    def train(
        self,
        w: torch.Tensor,
        x: torch.Tensor,
        y: torch.Tensor,
        batches: torch.Tensor,
        steps: list[int],
        *,
        lr: float,
        weight_decay: float,
        pull: float = 0.0,
        offset: torch.Tensor | None = None,
    ) -> None:
        """Advance the rows of ``w`` (n x dim, jobs sorted by ``steps``) in place.

        Each step: ``w <- (1 - lr (weight_decay + pull)) w - lr grad + offset`` (offset: n x dim or None).
        """
        n, b = len(steps), batches.shape[2]
        params = _views(w, self.layout)
        xbuf = torch.empty((n * b, *x.shape[1:]), dtype=x.dtype, device=x.device)
        decay = 1.0 - lr * (weight_decay + pull)
        for step in range(steps[-1] if steps else 0):
            first = _running_from(steps, step)
            m = n - first
            idx = batches[first:, step].reshape(-1)
            xb = torch.index_select(x, 0, idx, out=xbuf[: m * b]).view(m, b, *x.shape[1:])
            running = {name: p[first:] for name, p in params.items()}
            grads = self.gradients(running, xb, y[idx].view(m, b))
            targets = list(running.values())
            if weight_decay or pull:
                torch._foreach_mul_(targets, decay)
            torch._foreach_add_(targets, [grads[name] for name in running], alpha=-lr)
            if offset is not None:
                w[first:].add_(offset[first:])


class FusedMLP:
    """``Flatten, Linear, ReLU, ..., Linear`` under mean cross-entropy, trained by hand-written batched kernels.

    Weights are views into the flat vectors (n x out x in, nn.Linear's own layout), so nothing is
    copied in or out. Per step: forward with ``baddbmm`` into preallocated activations; the loss
    gradient ``(softmax - onehot) / b``; then from the last layer down, the gradient for the layer
    below (computed before this layer's weights change), the in-place weight and bias update, and
    the ReLU mask applied through the activation's sign (ReLU outputs are >= 0).
    """

    def __init__(self, layout: ParamLayout, linears: list[tuple[str, str]]):
        self.layout = layout
        self.linears = linears  # (weight name, bias name) per Linear layer, first to last

    @classmethod
    def of(cls, model: nn.Module, layout: ParamLayout) -> FusedMLP | None:
        """The kernel for ``model`` if it is such a stack, else None."""
        if not isinstance(model, nn.Sequential) or not len(model) or not isinstance(model[0], nn.Flatten):
            return None
        layers = list(model)[1:]
        if not layers or not all(isinstance(m, nn.Linear if i % 2 == 0 else nn.ReLU) for i, m in enumerate(layers)):
            return None
        if len(layers) % 2 == 0 or any(m.bias is None for m in layers[::2]):
            return None
        names = [(f"{i + 1}.weight", f"{i + 1}.bias") for i in range(0, len(layers), 2)]
        if [n for pair in names for n in pair] != list(layout.names):
            return None
        return cls(layout, names)

    def train(
        self,
        w: torch.Tensor,
        x: torch.Tensor,
        y: torch.Tensor,
        batches: torch.Tensor,
        steps: list[int],
        *,
        lr: float,
        weight_decay: float,
        pull: float = 0.0,
        offset: torch.Tensor | None = None,
    ) -> None:
        """Advance the rows of ``w`` (n x dim, jobs sorted by ``steps``) in place.

        Each step: ``w <- (1 - lr (weight_decay + pull)) w - lr grad + offset`` (offset: n x dim or None).
        """
        n, b = len(steps), batches.shape[2]
        params = _views(w, self.layout)
        weights = [params[wn] for wn, _ in self.linears]  # n x out x in
        biases = [params[bn] for _, bn in self.linears]  # n x out
        flat_x = x.reshape(len(x), -1)
        new = dict(dtype=w.dtype, device=w.device)
        xbuf = torch.empty(n * b, flat_x.shape[1], **new)
        outputs = [torch.empty(n, b, wt.shape[1], **new) for wt in weights]  # each layer's output (post-ReLU)
        inputs_grad = [torch.empty(n, b, wt.shape[2], **new) for wt in weights[1:]]  # gradient at layers 1..L-1's input
        decay = 1.0 - lr * (weight_decay + pull)
        rows = torch.arange(n * b, device=w.device)
        last = len(weights) - 1
        for step in range(steps[-1] if steps else 0):
            first = _running_from(steps, step)
            m = n - first
            idx = batches[first:, step].reshape(-1)
            h = torch.index_select(flat_x, 0, idx, out=xbuf[: m * b]).view(m, b, -1)
            layer_inputs = [h]
            for k, (wt, bias) in enumerate(zip(weights, biases)):
                h = torch.baddbmm(bias[first:].unsqueeze(1), h, wt[first:].transpose(1, 2), out=outputs[k][:m])
                if k < last:
                    h.relu_()
                    layer_inputs.append(h)
            g = torch.softmax(h, dim=2)  # d(mean CE)/d(logits) = (softmax - onehot) / b
            g.view(m * b, -1)[rows[: m * b], y[idx]] -= 1.0
            g.div_(b)
            for k in range(last, -1, -1):
                wt, bias = weights[k][first:], biases[k][first:]
                below = torch.bmm(g, wt, out=inputs_grad[k - 1][:m]) if k else None
                wt.baddbmm_(g.transpose(1, 2), layer_inputs[k], beta=decay, alpha=-lr)
                if weight_decay or pull:
                    bias.mul_(decay)
                bias.sub_(g.sum(1), alpha=lr)
                if below is not None:
                    g = below.mul_(layer_inputs[k].sign_())
            if offset is not None:
                w[first:].add_(offset[first:])


def _views(w: torch.Tensor, layout: ParamLayout) -> dict[str, torch.Tensor]:
    """Each named parameter of the n stacked flat vectors in ``w`` (n x dim), as an n x shape view."""
    out, offset = {}, 0
    for name, numel, shape in zip(layout.names, layout.numels, layout.shapes):
        out[name] = w[:, offset : offset + numel].view(len(w), *shape)
        offset += numel
    return out
