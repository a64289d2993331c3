"""Several clients' local steps at once for the user's own recurrent, embedding and attention modules, by plain
autograd: the ``batched`` training path.

A plain per-client loop trains a small LSTM or Transformer slowly on a CPU because each operation is tiny: a
time step of one client's minibatch is a matrix product of a few rows, and the interpreter's and autograd's
cost per operation dominates. ``torch.func`` cannot stack those clients on a CPU (``vmap`` has no rule for
torch's fused recurrent kernel, and cannot run in two threads). So a chunk of K jobs runs a *rewritten copy*
of the module instead: the K clients' minibatches concatenated along the batch dimension, and every layer
that holds weights computing each client with its own (:mod:`netfl.learn.training.client_layers`, batched
matrix products). The user's ``forward`` runs unchanged; one operation now does K clients' work.

Whether that is right for a given module is checked, not assumed, once per task (:func:`plan_for`):

* every layer with parameters or buffers must be one the batched path computes (exact types:
  ``Linear``, ``Embedding(Bag)``, ``LSTM``/``GRU``/``RNN``, ``MultiheadAttention`` -- hence
  ``TransformerEncoder(Layer)`` --, ``LayerNorm``, ``BatchNorm``); parameters used directly by a hand-written
  forward are poisoned (NaN) in the copy, so such a use cannot pass silently;
* each layer's batch dimension is found by running the module on 2 and on 3 samples;
* one step of two clients with different weights and data is computed both ways -- batched, and each client
  alone on a replica with its own dropout seeds (:mod:`netfl.learn.training.replicas`) -- and the gradients
  and buffers must agree to float rounding, and the batched step must draw nothing from torch's global
  generator. A forward that mixes samples (a mean over the batch), or anything else that would make clients
  see each other, fails here.

A module that fails any check trains on replicas, and ``netfl validate`` says why. Random draws: each
client's dropout masks come from its own generators seeded from its job, the same masks as the replicas
draw, so results equal one job at a time up to float rounding whatever the chunking and thread count. Jobs
are trained in chunks (:func:`netfl.learn.training.stacked.train_stacked`); chunks run in the worker
threads, each thread on its own copy.
"""

from __future__ import annotations

import copy
import math
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from functools import partial

import torch
from torch import nn
from torch.nn import functional as F

from netfl.learn.models.flat_model import IGNORE_LABEL, Network, OutputMismatch, output_problem, task_loss
from netfl.learn.training.client_layers import LAYERS, Clients, Unbatchable, add_rows, known_batch_dim
from netfl.learn.training.stacked import read_buffers, running_from, stacked_views, write_buffers

__all__ = ["BatchedKernel", "BatchPlan", "plan_for", "SEQUENCE_LAYERS"]

#: The layers that make a module a sequence model, the modules this path is for (an MLP or a CNN trains
#: faster on the fused kernel or on replicas).
SEQUENCE_LAYERS = (nn.RNNBase, nn.Embedding, nn.EmbeddingBag, nn.MultiheadAttention)
#: Jobs in one chunk at most. Measured on the char-LSTM and Transformer workloads of benchmarks/speed.py (one
#: thread): 16 to 32 clients per chunk are within a few per cent of each other; more only holds more memory.
CHUNK_JOBS = 32
#: Parameter bytes of one chunk at most, for larger models (where one client's products are large already).
CHUNK_PARAM_BYTES = 16 * 2**20


@dataclass(frozen=True)
class BatchPlan:
    """How to rewrite a task's module: each computed layer's path, its batch dimension and its parameter and
    buffer names (local name -> the module's name; a tied parameter maps to its first name)."""

    layers: dict[str, tuple[int, dict[str, str]]]

    def chunk_jobs(self, param_bytes: int, jobs: int | None = None) -> int:
        """Jobs per chunk; given the number of ``jobs``, the chunks made as even as the cap allows (50 jobs
        with a cap of 32: two chunks of 25, not 32 and 18: each chunk's step costs about the same whatever
        its size, so the fewest chunks, evenly filled, is fastest)."""
        cap = max(1, min(CHUNK_JOBS, CHUNK_PARAM_BYTES // max(1, param_bytes)))
        if not jobs:
            return cap
        return -(-jobs // -(-jobs // cap))


def is_sequence_model(module: nn.Module) -> bool:
    return any(isinstance(m, SEQUENCE_LAYERS) for m in module.modules())


def plan_for(network: Network, x: torch.Tensor, y: torch.Tensor, guard=nullcontext) -> tuple[BatchPlan | None, str]:
    """The module's batch plan, checked against one client at a time (module docstring), or None and why not."""
    if not is_sequence_model(network.module):
        return None, "not a sequence model (no recurrent, embedding or attention layer)"
    if len(x) < 6:
        return None, "fewer than 6 training samples to check the batched path on"
    layers, problem = _layers(network.module)
    if problem:
        return None, problem
    try:
        with guard():
            dims = _batch_dims(network.module, list(layers), x)
    except Unbatchable as exc:
        return None, str(exc)
    except Exception as exc:  # the module's own error on 2 or 3 samples: say it, train it on replicas
        return None, f"the module failed on 2-3 samples ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
    if isinstance(dims, str):
        return None, dims
    plan = BatchPlan({name: (dims[name], names) for name, names in layers.items()})
    try:
        with guard():
            problem = _disagreement(network, plan, x, y)
    except Unbatchable as exc:
        return None, str(exc)
    except Exception as exc:  # noqa: BLE001 -- anything the rewritten module raises means: not batched
        return None, f"the batched forward failed ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
    return (None, problem) if problem else (plan, "")


def _layers(module: nn.Module) -> tuple[dict[str, dict[str, str]], str]:
    """Each layer the batched path computes (name -> its parameter and buffer names), or why it cannot."""
    canonical = {id(p): n for n, p in module.named_parameters()}
    buffer_names = {id(b): n for n, b in module.named_buffers()}
    layers: dict[str, dict[str, str]] = {}
    inside: list[str] = []
    for name, m in module.named_modules():
        if any(name.startswith(prefix + ".") for prefix in inside):
            continue
        if type(m) in LAYERS:
            names = {local: canonical[id(p)] for local, p in m.named_parameters(remove_duplicate=False)}
            names.update({local: buffer_names[id(b)] for local, b in m.named_buffers()})
            layers[name] = names
            inside.append(name)
        elif own := [k for k, _ in (*m.named_parameters(recurse=False), *m.named_buffers(recurse=False))]:
            held = ", ".join(own)
            where = f"'{name}'" if name else "the model itself"
            return {}, f"{where} ({type(m).__name__}) holds {held}, which the batched path does not compute"
    return layers, ""


def _batch_dims(module: nn.Module, names: list[str], x: torch.Tensor) -> dict[str, int] | str:
    """Each layer's batch dimension: the one dimension of its input that is 2 on 2 samples and 3 on 3."""
    probe = copy.deepcopy(module)
    probe.train()
    named = dict(probe.named_modules())
    seen: dict[str, list[list[tuple[int, ...]]]] = {name: [[], []] for name in names}
    run = [0]

    def recorder(name: str):
        def hook(_m, args, _kwargs):
            first = args[0] if args else None
            if isinstance(first, torch.Tensor):
                seen[name][run[0]].append(tuple(first.shape))
            else:
                seen[name][run[0]].append(())

        return hook

    handles = [named[name].register_forward_pre_hook(recorder(name), with_kwargs=True) for name in names]
    state = torch.get_rng_state()
    try:
        with torch.no_grad():
            for run[0], size in enumerate((2, 3)):
                probe(x[:size])
    finally:
        torch.set_rng_state(state)
        for handle in handles:
            handle.remove()
    dims: dict[str, int] = {}
    for name in names:
        two, three = seen[name]
        if not two:
            dims[name] = known_batch_dim(named[name]) or 0  # never called: any dimension will do
            continue
        found = set()
        for a, b in zip(two, three):
            differ = [d for d, (u, v) in enumerate(zip(a, b)) if u != v]
            if len(a) != len(b) or len(differ) != 1 or (a[differ[0]], b[differ[0]]) != (2, 3):
                return f"'{name}' ({type(named[name]).__name__}) gets an input without one batch dimension ({a})"
            found.add(differ[0])
        known = known_batch_dim(named[name])
        if len(found) != 1 or len(two) != len(three) or (known is not None and found != {known}):
            return f"'{name}' ({type(named[name]).__name__}) is called with its batch in different dimensions"
        dims[name] = found.pop()
    return dims


class _Copy:
    """One thread's rewritten copy of the module: computed layers read the clients' weights from ``clients``."""

    def __init__(self, network: Network, plan: BatchPlan):
        module = copy.deepcopy(network.module)
        self.clients = clients = Clients()
        named = dict(module.named_modules())
        for name, (dim, names) in plan.layers.items():
            layer = named[name]
            layer.forward = partial(LAYERS[type(layer)], layer, clients, names, dim)
        trainable = set(network.params.names)
        with torch.no_grad():
            for name, p in module.named_parameters():
                if name in trainable:
                    p.fill_(float("nan"))  # a forward that reads a weight directly cannot pass the check
                else:
                    clients.frozen[name] = p.detach()
        module.train()
        self.module = module


def table_row_multiple(module: nn.Module, plan: BatchPlan) -> int:
    """The multiple of a chunk's row length that lets every embedding bag's table of the plan be read in place as
    rows of one matrix (:func:`~netfl.learn.training.client_embeddings.client_tables`): the least common multiple
    of their widths and 16 (a cache line of floats); 1 without embedding bags, or when that is large."""
    named = dict(module.named_modules())
    widths = [named[name].embedding_dim for name in plan.layers if isinstance(named[name], nn.EmbeddingBag)]
    multiple = math.lcm(16, *widths) if widths else 1
    return multiple if multiple <= 4096 else 1


def client_losses(logits: torch.Tensor, y: torch.Tensor, k: int) -> torch.Tensor:
    """The sum over K clients of each one's task loss (mean cross-entropy over its labelled positions): the
    gradient of each client's weights is that of its own loss."""
    if logits.dim() != y.dim() + 1 or tuple(logits.shape[:-1]) != tuple(y.shape):
        raise OutputMismatch(output_problem(logits, y))
    per = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="none").view(k, -1)
    counted = (y.view(k, -1) != IGNORE_LABEL).sum(1)
    return (per.sum(1) / counted).sum()


class BatchedKernel:
    """Trains chunks of jobs on per-thread rewritten copies (a :class:`~netfl.learn.training.stacked.ChunkKernel`)."""

    takes_same_start = True  # told that a chunk's jobs start from one model (train_stacked's chunks do)

    def __init__(self, network: Network, plan: BatchPlan, guard: Callable[[], AbstractContextManager] = nullcontext):
        self.network, self.plan, self.guard = network, plan, guard
        self._local = threading.local()
        self.row_multiple = table_row_multiple(network.module, plan)
        named = dict(network.module.named_modules())
        self.tables = {
            names["weight"] for name, (_, names) in plan.layers.items() if isinstance(named[name], nn.EmbeddingBag)
        }

    def _copy(self) -> _Copy:
        made = getattr(self._local, "copy", None)
        if made is None:
            made = self._local.copy = _Copy(self.network, self.plan)
        return made

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
        same_start: bool = False,
    ) -> None:
        """As :meth:`netfl.learn.training.stacked.ChunkKernel.train`; ``same_start``: every row of ``w`` is the
        same model (the first step then computes the clients' products as one, :class:`Clients`)."""
        with self.guard():  # in the thread that runs the user's module
            self._train(w, buffers, x, y, batches, steps, lr, weight_decay, pull, offset, seeds, same_start)

    def _train(self, w, buffers, x, y, batches, steps, lr, weight_decay, pull, offset, seeds, same_start) -> None:
        made = self._copy()
        layout = self.network.params
        n = len(steps)
        # embedding bags' tables are trained in place, in the chunk's rows (the bulk of a bag-of-words model's
        # weights, read as rows of one matrix: client_tables; their gradient sparse); the other weights on
        # contiguous copies, which the batched products read faster (the char-LSTM trained 10 % slower on
        # views), copied back at the end
        views = stacked_views(w, layout)
        params = {name: view if name in self.tables else view.clone() for name, view in views.items()}
        offsets = stacked_views(offset, layout) if offset is not None else None
        own = read_buffers(self.network, buffers)
        seeds = seeds if seeds is not None else [0] * n
        dropout = [torch.Generator(device=x.device).manual_seed(s) for s in seeds]
        global_ = [torch.Generator(device=x.device).manual_seed(s) for s in seeds]
        decay = 1.0 - lr * (weight_decay + pull)
        for step in range(steps[-1] if steps else 0):
            first = running_from(steps, step)
            idx = batches[first:, step].reshape(-1)
            leaves = {name: p[first:].detach().requires_grad_(True) for name, p in params.items()}
            grads = self.gradients(made, leaves, {k: v[first:] for k, v in own.items()}, x[idx], y[idx],
                                    dropout[first:], global_[first:], shared=same_start and step == 0)  # fmt: skip
            targets = list(leaves.values())
            with torch.no_grad():
                if decay != 1.0:
                    torch._foreach_mul_(targets, decay)
                dense = [n for n, g in enumerate(grads) if not g.is_sparse]
                torch._foreach_add_([targets[n] for n in dense], [grads[n] for n in dense], alpha=-lr)
                for target, grad in zip(targets, grads):
                    if grad.is_sparse:  # an embedding bag's: the rows its bags read, duplicates summed
                        add_rows(target, grad, -lr)
                if offsets is not None:
                    torch._foreach_add_(targets, [offsets[name][first:] for name in leaves])
        for name, view in views.items():
            if name not in self.tables:
                view.copy_(params[name])
        write_buffers(self.network, buffers, own)

    @staticmethod
    def gradients(made: _Copy, leaves, buffers, xb, yb, dropout, global_, shared=False) -> list[torch.Tensor]:
        clients = made.clients
        clients.k, clients.params, clients.buffers, clients.shared = len(dropout), leaves, buffers, shared
        clients.dropout, clients.global_ = dropout, global_
        loss = client_losses(made.module(xb), yb, clients.k)
        grads = torch.autograd.grad(loss, list(leaves.values()), allow_unused=True)
        return [g if g is not None else torch.zeros_like(p) for g, p in zip(grads, leaves.values())]


def _disagreement(network: Network, plan: BatchPlan, x: torch.Tensor, y: torch.Tensor) -> str:
    """'' when one batched step of two clients (different weights, samples and seeds) gives each client the
    gradient and buffers it gets alone on a replica, and draws nothing from torch's global generator; else what
    differs."""
    from netfl.learn.training.replicas import Replica  # the one-at-a-time path: replicas import nothing of this

    k, b = 2, 3
    start = network.initial_params().to(x.device)
    g = torch.Generator().manual_seed(0)
    w = torch.stack([start + 0.05 * torch.randn(start.shape, generator=g).to(start) for _ in range(k)])
    buffers = network.initial_buffers().to(x.device)
    idx = torch.arange(k * b, device=x.device)
    seeds = [11, 12]
    kernel = BatchedKernel(network, plan)
    made = _Copy(network, plan)
    views = stacked_views(w, network.params)
    leaves = {name: v.clone().requires_grad_(True) for name, v in views.items()}
    own = read_buffers(network, buffers.expand(k, -1).clone() if network.buffers else None)
    state = torch.get_rng_state()
    dropout = [torch.Generator(device=x.device).manual_seed(s) for s in seeds]
    global_ = [torch.Generator(device=x.device).manual_seed(s) for s in seeds]
    grads = kernel.gradients(made, leaves, own, x[idx], y[idx], dropout, global_)
    if not torch.equal(torch.get_rng_state(), state):
        torch.set_rng_state(state)
        return "the module draws from torch's global generator in a way the batched path cannot give each client"
    batched = torch.cat([(g.to_dense() if g.is_sparse else g).reshape(k, -1) for g in grads], dim=1)
    replica = Replica(network, x.device, channels_last=False, training=True)
    try:
        for j in range(k):
            replica.load(w[j], buffers)
            replica.generator.manual_seed(seeds[j])
            torch.manual_seed(seeds[j])
            for grad in replica.grads:
                grad.zero_()
            rows = idx[j * b : (j + 1) * b]
            task_loss(replica.module(x[rows]), y[rows]).backward()
            alone = torch.cat([grad.reshape(-1) for grad in replica.grads])
            # float rounding moves a gradient by far less than 0.1 % of its norm (BatchNorm on 3 samples included);
            # a client that sees another's samples or a weight used outside its layer moves it by its own size
            off = float(torch.linalg.vector_norm(batched[j] - alone))
            if not off <= 1e-3 * float(torch.linalg.vector_norm(alone)) + 1e-7:
                return (
                    f"a batched step differs from one client alone (the gradient off by {off:.3g}): the forward "
                    "mixes samples of a minibatch or uses a weight outside its layer"
                )
            if own:
                mine = network.buffers.pack({name: v[j] for name, v in own.items()})
                theirs = replica.buffers_vector()
                if not torch.allclose(mine, theirs, rtol=1e-4, atol=1e-6):
                    return "a batched step moves the buffers otherwise than one client alone"
    finally:
        torch.set_rng_state(state)
    return ""
