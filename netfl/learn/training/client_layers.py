"""Layers that compute several clients at once, each client with its own weights: the pieces of the batched path
(:mod:`netfl.learn.training.batched`).

The clients' minibatches are concatenated along the batch dimension (client 0's samples first), so that the
user's own ``forward`` -- reshapes, slices, activations, ``scaled_dot_product_attention`` -- runs unchanged on
``K * B`` samples: everything that works sample by sample is already per client. Only layers with parameters
or buffers (and dropout, whose masks come from each client's own generator) need to know the clients apart;
each such layer's ``forward`` is replaced by one of the functions here, which reads the K clients' stacked
weights from :class:`Clients` and computes all clients with batched matrix products (``bmm``):

* ``Linear`` -- one ``baddbmm``; ``Embedding`` / ``EmbeddingBag`` -- one lookup in the clients' tables laid
  end to end (client k's ids offset by k x the vocabulary);
* ``LSTM`` / ``GRU`` / ``RNN`` -- PyTorch's equations (gate order i, f, g, o and r, z, n), every layer and
  direction: the input projections of all time steps as one ``baddbmm``, then one ``baddbmm`` and a few
  element-wise operations per time step for all clients together (torch's fused recurrent kernel has no
  stacked form);
* ``MultiheadAttention`` -- the projections per client, attention over the K x B samples' heads;
* ``LayerNorm`` and ``BatchNorm`` -- normalisation per sample (LayerNorm) or per client's minibatch
  (BatchNorm: the clients' channels side by side), each client's affine weights and running statistics;
* ``Dropout`` -- each client's mask drawn from its own generator, of the shape a client alone would draw: the
  same masks as on the replicas (:mod:`netfl.learn.training.replicas`). Attention-weight dropout inside
  ``MultiheadAttention`` draws, per client, from a second generator that stands for torch's global one (which
  the one-at-a-time path seeds from the job), in the same order and shapes: the same masks again.

What a layer cannot do batched (a packed sequence, dropout between recurrent layers, ``max_norm``...) raises
:class:`Unbatchable`, so that the task trains one job at a time on replicas instead, saying why.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import PackedSequence

__all__ = ["LAYERS", "Clients", "Unbatchable", "add_rows", "client_tables", "known_batch_dim"]


class Unbatchable(RuntimeError):
    """A layer is used in a way the batched path does not compute: the reason, for ``netfl validate``."""


class Clients:
    """What the batched layers of one forward pass share: the number of clients, their stacked parameters and
    buffers (named as in the module, client axis first) and their generators (one per client: dropout layers'
    ``dropout``, and ``global_`` standing for torch's global generator). ``shared``: every client's weights
    are the same (a chunk's first step: its jobs start from one model), so a layer may compute all clients'
    rows with one matrix product (each client's weight gradient is still its own)."""

    def __init__(self) -> None:
        self.k = 0
        self.shared = False
        self.params: dict[str, torch.Tensor] = {}
        self.buffers: dict[str, torch.Tensor] = {}
        self.frozen: dict[str, torch.Tensor] = {}
        self.dropout: list[torch.Generator] = []
        self.global_: list[torch.Generator] = []

    def param(self, name: str | None) -> torch.Tensor | None:
        """Client-stacked ``name`` (a frozen parameter: the module's own, the same for every client)."""
        if name is None:
            return None
        if name in self.params:
            return self.params[name]
        frozen = self.frozen[name]
        return frozen.unsqueeze(0).expand(self.k, *frozen.shape)

    def masks(self, generators: list[torch.Generator], shape: tuple[int, ...], dim: int, keep: float, like):
        """Each client's Bernoulli(keep) draw of ``shape`` from its own generator, laid side by side along ``dim``."""
        draws = [
            torch.empty(shape, dtype=like.dtype, device=like.device).bernoulli_(keep, generator=g) for g in generators
        ]
        return torch.cat(draws, dim=dim) if len(draws) > 1 else draws[0]


def _to_clients(x: torch.Tensor, dim: int, k: int) -> tuple[torch.Tensor, torch.Size]:
    """``x`` with its batch dimension ``dim`` (K x B) moved first, viewed as (K, rest, last): client rows."""
    moved = x.movedim(dim, 0)
    if moved.shape[0] % k:
        raise Unbatchable(f"a layer's input has {moved.shape[0]} samples in dimension {dim}, not {k} clients' worth")
    return moved.reshape(k, -1, moved.shape[-1]), moved.shape


def _from_clients(out: torch.Tensor, shape: torch.Size, dim: int) -> torch.Tensor:
    return out.reshape(*shape[:-1], out.shape[-1]).movedim(0, dim)


def _project(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, shared: bool = False) -> torch.Tensor:
    """Client rows (K, n, in) through each client's (K, out, in) weight: (K, n, out). ``shared``: the clients'
    weights are equal (:class:`Clients`), one product of K x n rows."""
    if shared:
        return _SharedProject.apply(x, weight, bias)
    if bias is None:
        return torch.bmm(x, weight.transpose(1, 2))
    return torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))


class _SharedProject(torch.autograd.Function):
    """:func:`_project` where every client's weight equals client 0's: the forward and the input's gradient as
    one matrix product of K x n rows (a ``bmm`` of K products of n rows is slower), each client's weight and
    bias gradients from its own rows."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        k, n, width = x.shape
        flat = x.reshape(k * n, width)
        w = weight[0].t()
        out = flat @ w if bias is None else torch.addmm(bias[0], flat, w)
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return out.view(k, n, -1)

    @staticmethod
    def backward(ctx, d_out):
        x, weight = ctx.saved_tensors
        k, n, width = x.shape
        d_x = d_w = d_b = None
        if ctx.needs_input_grad[0]:
            d_x = (d_out.reshape(k * n, -1) @ weight[0]).view(k, n, width)
        if ctx.needs_input_grad[1]:
            d_w = torch.bmm(d_out.transpose(1, 2), x)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            d_b = d_out.sum(1)
        return d_x, d_w, d_b


def linear(m: nn.Linear, c: Clients, names: dict, dim: int, x: torch.Tensor) -> torch.Tensor:
    rows, shape = _to_clients(x, dim, c.k)
    return _from_clients(_project(rows, c.param(names["weight"]), c.param(names.get("bias")), c.shared), shape, dim)


def _client_ids(ids: torch.Tensor, dim: int, k: int, vocabulary: int) -> tuple[torch.Tensor, torch.Size]:
    """Each client's ids (K, n), checked against the vocabulary (an id past it would read another client's row)."""
    moved = ids.movedim(dim, 0)
    if moved.shape[0] % k:
        raise Unbatchable(f"an embedding's input has {moved.shape[0]} samples in dimension {dim}, not {k} clients'")
    rows = moved.reshape(k, -1)
    if rows.numel() and (int(rows.min()) < 0 or int(rows.max()) >= vocabulary):
        raise IndexError(f"token ids reach {int(rows.min())}..{int(rows.max())}; the embedding has {vocabulary} rows")
    return rows, moved.shape


def _plain_embedding(m: nn.Module) -> None:
    if m.max_norm is not None or m.scale_grad_by_freq or m.sparse:
        raise Unbatchable(f"{type(m).__name__} with max_norm, scale_grad_by_freq or sparse gradients")


def client_tables(weight: torch.Tensor) -> tuple[torch.Tensor, int] | None:
    """The K clients' (K, rows, width) tables as one (rows', width) matrix over the same memory, and the row
    at which client k's table starts (k x that step), or None when the layout does not allow it.

    A chunk's tables are views into its rows of parameters (trained in place, no copy), so client k's table
    starts k x (row length) floats after client 0's; where that length is a multiple of the width (the batched
    kernel pads the rows so: :attr:`~netfl.learn.training.batched.BatchedKernel.row_multiple`), the tables are
    rows of one strided matrix that ``embedding_bag`` and ``index_add_`` take as is. A frozen table (the same
    for every client, stride 0) is its own matrix with step 0."""
    k, rows, width = weight.shape
    between, along, inner = weight.stride()
    if inner != 1 or along != width or between % width:
        return None
    step = between // width
    return weight.as_strided(((k - 1) * step + rows, width), (width, 1)), step


def _tables_or_copy(weight: torch.Tensor) -> tuple[torch.Tensor, int]:
    """:func:`client_tables`, or the tables copied end to end where the layout does not allow a view."""
    return client_tables(weight) or (weight.reshape(-1, weight.shape[-1]), weight.shape[1])


def embedding(m: nn.Embedding, c: Clients, names: dict, dim: int, ids: torch.Tensor) -> torch.Tensor:
    _plain_embedding(m)
    rows, shape = _client_ids(ids, dim, c.k, m.num_embeddings)
    weight = c.param(names["weight"])
    offsets = torch.arange(c.k, device=ids.device).unsqueeze(1) * m.num_embeddings
    out = F.embedding(rows + offsets, weight.reshape(-1, weight.shape[-1]))
    if m.padding_idx is not None:  # the padding row gets no gradient, as nn.Embedding's
        out = torch.where((rows == m.padding_idx).unsqueeze(-1), out.detach(), out)
    return out.reshape(*shape, out.shape[-1]).movedim(0, dim)


def embedding_bag(
    m: nn.EmbeddingBag, c: Clients, names: dict, dim: int, ids: torch.Tensor, offsets=None, per_sample_weights=None
) -> torch.Tensor:
    _plain_embedding(m)
    if offsets is not None or ids.dim() != 2 or dim != 0:
        raise Unbatchable("EmbeddingBag on a 1-D input with offsets (the batched path takes bags as rows (N, L))")
    rows, _ = _client_ids(ids, 0, c.k, m.num_embeddings)
    weight = c.param(names["weight"])
    if per_sample_weights is None and m.mode in ("sum", "mean") and torch.is_grad_enabled():
        return _ClientBags.apply(rows.view(ids.shape), weight, m.mode, m.padding_idx)
    if torch.is_grad_enabled():  # per-sample weights or max: autograd through a copy of the tables
        table, step = weight.reshape(-1, weight.shape[-1]), weight.shape[1]
    else:
        table, step = _tables_or_copy(weight)
    flat = _bag_ids(rows.view(ids.shape), c.k, step, m.padding_idx)
    return F.embedding_bag(flat, table, mode=m.mode, per_sample_weights=per_sample_weights, padding_idx=m.padding_idx)


def _bag_ids(rows: torch.Tensor, k: int, step: int, padding_idx: int | None) -> torch.Tensor:
    """Bags (K x n, L) of client ids as rows of the clients' tables laid ``step`` rows apart; client 0's
    padding id stands for every client's, so that ``embedding_bag`` leaves it out of each bag."""
    flat = rows + (torch.arange(k, device=rows.device) * step).repeat_interleave(rows.shape[0] // k).unsqueeze(1)
    if padding_idx is not None:
        flat = torch.where(rows == padding_idx, padding_idx, flat)
    return flat


class _ClientBags(torch.autograd.Function):
    """``EmbeddingBag`` (sum or mean) over the clients' tables (:func:`client_tables`), its weight gradient
    sparse: the rows the bags read, nothing else. A dense gradient of K tables, zeroed and added whole every
    step, costs more than the rest of a bag-of-words model's step (K x 5000 x 32 floats against 25 x 1024 rows
    read); the SGD step then adds the sparse gradient into the rows it names (:func:`add_rows`)."""

    @staticmethod
    def forward(ctx, rows, weight, mode, padding_idx):
        k = weight.shape[0]
        table, step = _tables_or_copy(weight)
        ctx.save_for_backward(rows)
        ctx.shape, ctx.mode, ctx.padding_idx = weight.shape, mode, padding_idx
        return F.embedding_bag(_bag_ids(rows, k, step, padding_idx), table, mode=mode, padding_idx=padding_idx)

    @staticmethod
    def backward(ctx, d_out):
        (rows,) = ctx.saved_tensors
        k, vocabulary, width = ctx.shape
        bags, length = rows.shape
        keep = rows != ctx.padding_idx if ctx.padding_idx is not None else None
        if ctx.mode == "mean":
            counts = keep.sum(1, keepdim=True) if keep is not None else rows.new_full((bags, 1), length)
            d_out = d_out / counts.clamp(min=1)
        client = torch.arange(k, device=rows.device).repeat_interleave(bags // k * length)
        ids = rows.reshape(-1)
        values = d_out.unsqueeze(1).expand(bags, length, width).reshape(-1, width)
        if keep is not None:
            client, ids, values = client[keep.reshape(-1)], ids[keep.reshape(-1)], values[keep.reshape(-1)]
        indices = torch.stack([client, ids])
        return (
            None,
            torch.sparse_coo_tensor(indices, values, (k, vocabulary, width), check_invariants=False),
            None,
            None,
        )


def add_rows(target: torch.Tensor, grad: torch.Tensor, alpha: float) -> None:
    """``target += alpha * grad`` for a sparse (client, row) gradient of the (K, rows, width) tables, in place
    (``target`` is a view into the chunk's rows): one ``index_add_`` of its rows as they come into
    :func:`client_tables` (``add_`` of a sparse tensor sorts and merges them first; ``index_add_`` with an
    ``alpha`` is three times slower than scaling the rows first), else an accumulating ``index_put_``. The
    gradient is used up: its rows are scaled in place (no second copy of them, a few MB, per step)."""
    client, row = grad._indices()
    values = grad._values().mul_(alpha)
    tables = client_tables(target)
    if tables is None:
        target.index_put_((client, row), values, accumulate=True)
    else:
        table, step = tables
        table.index_add_(0, client * step + row, values)


def layer_norm(m: nn.LayerNorm, c: Clients, names: dict, dim: int, x: torch.Tensor) -> torch.Tensor:
    if dim >= x.dim() - len(m.normalized_shape):
        raise Unbatchable("LayerNorm normalising over the batch dimension")
    out = F.layer_norm(x, m.normalized_shape, None, None, m.eps)
    weight = c.param(names.get("weight"))
    if weight is None:
        bias = c.param(names.get("bias"))
        if bias is None:
            return out
        weight = torch.ones_like(bias)
    size = math.prod(m.normalized_shape)
    moved = out.movedim(dim, 0)
    rows = moved.reshape(c.k, -1, size)
    bias = c.param(names.get("bias"))
    scaled = (
        rows * weight.reshape(c.k, 1, size)
        if bias is None
        else torch.addcmul(bias.reshape(c.k, 1, size), rows, weight.reshape(c.k, 1, size))
    )
    return scaled.reshape(moved.shape).movedim(0, dim)


def batch_norm(
    m: nn.BatchNorm1d | nn.BatchNorm2d | nn.BatchNorm3d, c: Clients, names: dict, dim: int, x: torch.Tensor
) -> torch.Tensor:
    """Each client's minibatch statistics: (K x B, C, ...) laid out as (B, K x C, ...), one channel per client's
    channel, and each client's running statistics updated in place (rows of its stacked buffers)."""
    if not m.training:
        raise Unbatchable("BatchNorm in evaluation mode inside training")
    k, channels = c.k, x.shape[1]
    b = x.shape[0] // k
    spread = x.reshape(k, b, *x.shape[1:]).transpose(0, 1).reshape(b, k * channels, *x.shape[2:])
    mean = var = None
    factor = 0.0 if m.momentum is None else m.momentum
    if m.track_running_stats:
        mean, var = c.buffers[names["running_mean"]], c.buffers[names["running_var"]]
        tracked = c.buffers[names["num_batches_tracked"]]
        tracked.add_(1)
        if m.momentum is None:  # a cumulative average: one factor for all clients only when their counts agree
            if bool((tracked != tracked[0]).any()):
                raise Unbatchable("BatchNorm with momentum=None and clients of different batch counts")
            factor = 1.0 / float(tracked[0])
        mean, var = mean.view(-1), var.view(-1)
    weight, bias = c.param(names.get("weight")), c.param(names.get("bias"))
    out = F.batch_norm(
        spread,
        mean,
        var,
        None if weight is None else weight.reshape(-1),
        None if bias is None else bias.reshape(-1),
        True,
        factor,
        m.eps,
    )
    return out.reshape(b, k, *x.shape[1:]).transpose(0, 1).reshape(x.shape)


def dropout(m: nn.Module, c: Clients, names: dict, dim: int, x: torch.Tensor, *, channels: int | None) -> torch.Tensor:
    """The replicas' seeded dropout (:class:`netfl.learn.training.replicas._SeededDropout`) per client."""
    if not m.training or m.p == 0.0:
        return x
    if m.p == 1.0:
        return x * 0.0
    per_client = list(x.shape)
    per_client[dim] //= c.k
    if channels is not None:
        if dim >= x.dim() - channels:
            raise Unbatchable(f"{type(m).__name__} over the batch dimension")
        per_client[x.dim() - channels :] = [1] * channels
    keep = c.masks(c.dropout, tuple(per_client), dim, 1.0 - m.p, x)
    return x * keep / (1.0 - m.p)


# ------------------------------------------------------------------ recurrent layers


class _LSTMLayer(torch.autograd.Function):
    """One LSTM layer and direction for K clients, backward written out (backpropagation through time).

    Autograd through a loop over time steps would record a dozen small operations per step and compute the
    recurrent weights' gradient one step at a time. Here each step is one product of ``[x_t, h_prev]`` with
    the clients' ``[W_ih, W_hh]`` (the classic fused form: no separate input projection, and no (T, K, B, 4H)
    tensor copied between layouts), in buffers allocated once; ``tanh(z)`` is computed as ``2 sigmoid(2z) - 1``
    (one ``sigmoid`` over all four gates: torch's CPU ``tanh`` costs three of its ``sigmoid``); each step's
    local derivatives are computed in the forward, while its gates are in the cache, so that the backward
    walks the steps back with five element-wise operations and one product each; the weights' gradient is one
    ``bmm`` over all steps (T x B rows). ``shared``: every client holds the same weights (the first step of a
    chunk), so each step's product is one matrix product of K x B rows.

    ``x``: (K, T, B, F); returns the outputs (T, K, B, H), h_n and c_n (K, B, H).
    """

    @staticmethod
    def forward(ctx, x, w_ih, w_hh, bias, h0, c0, reverse, shared):
        k, steps, b, width = x.shape
        hidden = w_hh.shape[-1]
        gates = 4 * hidden
        i_, f_, g_, o_ = (slice(n * hidden, (n + 1) * hidden) for n in range(4))
        # slot s holds [x_t, h_prev] for the step that reads it: forward t reads slot t and writes h_t into
        # slot t + 1; reverse t reads slot t + 1 and writes into slot t
        xh = x.new_empty(steps + 1, k, b, width + hidden)
        (xh[1:] if reverse else xh[:-1])[..., :width].copy_(x.transpose(0, 1))
        xh[steps if reverse else 0, ..., width:] = h0
        weights = torch.cat([w_ih, w_hh], dim=2)  # (K, 4H, F + H)
        doubled = weights.clone()
        doubled[:, g_].mul_(2.0)  # tanh(z) = 2 sigmoid(2z) - 1: the g gate's pre-activation doubled
        if bias is not None:
            bias = bias.clone()
            bias[:, g_].mul_(2.0)
        acts = x.new_empty(steps, k, b, gates)
        # local[t]: d gates / (dc, dc, dc, dh) -- (g i', c_prev f', i g', tanh(c) o'); to_cell[t]: o tanh'(c)
        local = x.new_empty(steps, k, b, gates)
        to_cell = x.new_empty(steps, k, b, hidden)
        rows = k * b
        w = doubled[0].t() if shared else doubled.transpose(1, 2)
        c = c0
        for t in range(steps - 1, -1, -1) if reverse else range(steps):
            read, write = (t + 1, t) if reverse else (t, t + 1)
            a, d = acts[t], local[t]
            if shared and bias is None:
                torch.mm(xh[read].view(rows, -1), w, out=a.view(rows, gates))
            elif shared:
                torch.addmm(bias[0], xh[read].view(rows, -1), w, out=a.view(rows, gates))
            elif bias is None:
                torch.bmm(xh[read], w, out=a)
            else:
                torch.baddbmm(bias.unsqueeze(1), xh[read], w, out=a)
            a.sigmoid_()
            torch.addcmul(a, a, a, value=-1.0, out=d)  # s (1 - s), each gate
            g = a[..., g_].mul_(2.0).sub_(1.0)
            d[..., i_].mul_(g)
            d[..., f_].mul_(c)
            c = torch.mul(a[..., f_], c).addcmul_(a[..., i_], g)
            torch.addcmul(a[..., i_], a[..., i_] * g, g, value=-1.0, out=d[..., g_])  # i (1 - g^2)
            tc = torch.mul(c, 2.0).sigmoid_().mul_(2.0).sub_(1.0)
            h = torch.mul(a[..., o_], tc, out=xh[write, ..., width:])
            d[..., o_].mul_(tc)
            torch.addcmul(a[..., o_], h, tc, value=-1.0, out=to_cell[t])  # o (1 - tanh(c)^2)
        ctx.save_for_backward(xh, acts, local, to_cell, weights)
        ctx.reverse, ctx.shared, ctx.width, ctx.has_bias = reverse, shared, width, bias is not None
        out = xh[:-1, ..., width:] if reverse else xh[1:, ..., width:]
        return out, xh[0 if reverse else steps, ..., width:].clone(), c

    @staticmethod
    def backward(ctx, d_out, d_h, d_c):
        xh, acts, local, to_cell, weights = ctx.saved_tensors
        steps, k, b, gates = acts.shape
        hidden, width, reverse = gates // 4, ctx.width, ctx.reverse
        dh = d_h.clone() if d_h is not None else acts.new_zeros(k, b, hidden)
        dc = d_c.clone() if d_c is not None else acts.new_zeros(k, b, hidden)
        # client-major (K, T, B, 4H), so that the weights' gradient reads each client's T x B rows as they lie
        # (a time-major buffer is copied whole, 10 MB for the char-LSTM, into fresh pages, every call)
        d_gates = acts.new_empty(k, steps, b, gates)
        d_xh = acts.new_empty(steps, k, b, width + hidden)  # at t: [dx_t, dh_prev]
        rows, three = k * b, 3 * hidden
        w0 = weights[0]
        scratch = acts.new_empty(k, b, gates) if ctx.shared else None  # the one product reads rows end to end
        for t in range(steps) if reverse else range(steps - 1, -1, -1):
            if d_out is not None:
                dh = dh + d_out[t]
            dc.addcmul_(dh, to_cell[t])
            out, factors = (scratch if ctx.shared else d_gates[:, t]), local[t]
            torch.mul(
                dc.unsqueeze(2),
                factors[..., :three].view(k, b, 3, hidden),
                out=out[..., :three].unflatten(-1, (3, hidden)),
            )
            torch.mul(dh, factors[..., three:], out=out[..., three:])
            dc.mul_(acts[t, :, :, hidden : 2 * hidden])
            if ctx.shared:
                torch.mm(out.view(rows, gates), w0, out=d_xh[t].view(rows, -1))
                d_gates[:, t] = out
            else:
                torch.bmm(out, weights, out=d_xh[t])
            dh = d_xh[t, ..., width:]
        # the weights' gradient, all steps at once (T x B rows): sum over steps of d_gates_t^T [x_t, h_prev]
        flat = steps * b
        d_rows = d_gates.view(k, flat, gates)
        read = (xh[1:] if reverse else xh[:-1]).transpose(0, 1).reshape(k, flat, -1)
        d_w = torch.bmm(d_rows.transpose(1, 2), read)
        d_bias = d_rows.sum(1) if ctx.has_bias else None
        d_x = d_xh[..., :width].transpose(0, 1)
        return d_x, d_w[..., :width], d_w[..., width:], d_bias, dh.clone(), dc, None, None


class _GRULayer(torch.autograd.Function):
    """One GRU layer and direction for K clients, backward written out (as :class:`_LSTMLayer`); ``shared``:
    every client holds the same weights (a chunk's first step), so each step's recurrent product is one matrix
    product of K x B rows."""

    @staticmethod
    def forward(ctx, xp, w_hh, b_hh, h0, reverse, shared):
        k, steps, b, gates = xp.shape
        hidden = gates // 3
        rz = xp.new_empty(steps, k, b, 2 * hidden)
        news = xp.new_empty(steps, k, b, hidden)
        hp_n = xp.new_empty(steps, k, b, hidden)
        hs = xp.new_empty(steps, k, b, hidden)
        w = w_hh.transpose(1, 2)
        h = h0
        for t in range(steps - 1, -1, -1) if reverse else range(steps):
            if shared:  # every client's weights equal client 0's: one product of K x B rows
                flat = h.reshape(k * b, hidden)
                hp = (flat @ w[0] if b_hh is None else torch.addmm(b_hh[0], flat, w[0])).view(k, b, gates)
            else:
                hp = torch.bmm(h, w) if b_hh is None else torch.baddbmm(b_hh.unsqueeze(1), h, w)
            x_t = xp[:, t]
            torch.add(x_t[..., : 2 * hidden], hp[..., : 2 * hidden], out=rz[t]).sigmoid_()
            hp_n[t] = hp[..., 2 * hidden :]
            n = torch.addcmul(x_t[..., 2 * hidden :], rz[t][..., :hidden], hp_n[t], out=news[t]).tanh_()
            h = torch.addcmul(n, rz[t][..., hidden:], h - n, out=hs[t])
        ctx.save_for_backward(rz, news, hp_n, hs, h0, w_hh)
        ctx.reverse, ctx.has_bias, ctx.shared = reverse, b_hh is not None, shared
        return hs.transpose(0, 1), h.clone()

    @staticmethod
    def backward(ctx, d_out, d_h):
        rz, news, hp_n, hs, h0, w_hh = ctx.saved_tensors
        steps, k, b, hidden = hs.shape
        order = list(range(steps - 1, -1, -1)) if ctx.reverse else list(range(steps))
        d_x = hs.new_empty(steps, k, b, 3 * hidden)
        d_hp = hs.new_empty(steps, k, b, 3 * hidden)
        h_prev = torch.empty_like(hs)
        for n, t in enumerate(order):
            h_prev[t] = hs[order[n - 1]] if n else h0
        dh = d_h if d_h is not None else h0.new_zeros(h0.shape)
        for t in reversed(order):
            if d_out is not None:
                dh = dh + d_out[:, t]
            r, z, n = rz[t][..., :hidden], rz[t][..., hidden:], news[t]
            d_n = dh * (1 - z) * (1 - n * n)
            torch.mul(d_n * hp_n[t], r * (1 - r), out=d_x[t][..., :hidden])
            torch.mul(dh * (h_prev[t] - n), z * (1 - z), out=d_x[t][..., hidden : 2 * hidden])
            d_x[t][..., 2 * hidden :] = d_n
            d_hp[t][..., : 2 * hidden] = d_x[t][..., : 2 * hidden]
            torch.mul(d_n, r, out=d_hp[t][..., 2 * hidden :])
            if ctx.shared:
                dh = dh * z + (d_hp[t].reshape(k * b, 3 * hidden) @ w_hh[0]).view(k, b, hidden)
            else:
                dh = dh * z + torch.bmm(d_hp[t], w_hh)
        rows = steps * b
        flat_hp = d_hp.transpose(0, 1).reshape(k, rows, 3 * hidden)
        d_w = torch.bmm(flat_hp.transpose(1, 2), h_prev.transpose(0, 1).reshape(k, rows, hidden))
        d_b = flat_hp.sum(1) if ctx.has_bias else None
        return d_x.transpose(0, 1), d_w, d_b, dh, None, None


def _rnn_steps(xp, w_hh, h, order, activation):
    w = w_hh.transpose(1, 2)
    xs = xp.unbind(1)
    out = [None] * len(xs)
    for t in order:
        h = activation(torch.baddbmm(xs[t], h, w))
        out[t] = h
    return out, h


def recurrent(m: nn.RNNBase, c: Clients, names: dict, dim: int, input, hx=None):
    """``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` for K clients: the same outputs and final states, per client."""
    if isinstance(input, PackedSequence):
        raise Unbatchable(f"{type(m).__name__} on a PackedSequence")
    if input.dim() != 3:
        raise Unbatchable(f"{type(m).__name__} on an unbatched input")
    if m.training and m.dropout > 0 and m.num_layers > 1:
        raise Unbatchable(f"{type(m).__name__} with dropout between layers (drawn inside torch's fused kernel)")
    if getattr(m, "proj_size", 0):
        raise Unbatchable("LSTM with proj_size")
    k, hidden, layers = c.k, m.hidden_size, m.num_layers
    directions = 2 if m.bidirectional else 1
    batch_major = input if m.batch_first else input.transpose(0, 1)
    n, steps = batch_major.shape[0], batch_major.shape[1]
    b = n // k
    seq = batch_major.reshape(k, b, steps, -1).transpose(1, 2)  # (K, T, B, F)
    lstm = m.mode == "LSTM"
    h0 = c0 = None
    if hx is not None:
        h0, c0 = hx if lstm else (hx, None)
        h0 = h0.reshape(layers * directions, k, b, hidden)
        c0 = c0.reshape(layers * directions, k, b, hidden) if c0 is not None else None
    zeros = seq.new_zeros(k, b, hidden)
    finals_h, finals_c = [], []
    layer_in = seq
    for layer in range(layers):
        outs = []
        for direction in range(directions):
            suffix = f"_l{layer}" + ("_reverse" if direction else "")
            w_ih, w_hh = c.param(names["weight_ih" + suffix]), c.param(names["weight_hh" + suffix])
            b_ih, b_hh = c.param(names.get("bias_ih" + suffix)), c.param(names.get("bias_hh" + suffix))
            index = layer * directions + direction
            h = h0[index] if h0 is not None else zeros
            t_in = layer_in.shape[1]
            # both biases in one, except GRU's b_hh, which r gates (PyTorch's equations)
            bias = b_ih if m.mode == "GRU" or b_ih is None else b_ih + b_hh
            if lstm:
                cell = c0[index] if c0 is not None else zeros
                out, h, cell = _LSTMLayer.apply(layer_in, w_ih, w_hh, bias, h, cell, bool(direction), c.shared)
                finals_c.append(cell)
                finals_h.append(h)
                outs.append(out.transpose(0, 1))  # (K, T, B, H)
                continue
            xp = _project(layer_in.reshape(k, t_in * b, -1), w_ih, bias, c.shared).view(k, t_in, b, -1)
            if m.mode == "GRU":
                out, h = _GRULayer.apply(xp, w_hh, b_hh, h, bool(direction), c.shared)
            else:
                order = range(t_in - 1, -1, -1) if direction else range(t_in)
                out, h = _rnn_steps(xp, w_hh, h, order, torch.tanh if m.mode == "RNN_TANH" else torch.relu)
                out = torch.stack(out, 1)
            finals_h.append(h)
            outs.append(out)  # (K, T, B, H)
        layer_in = outs[0] if directions == 1 else torch.cat(outs, -1)
    width = layer_in.shape[-1]
    if m.batch_first:
        output = layer_in.transpose(1, 2).reshape(n, steps, width)
    else:
        output = layer_in.permute(1, 0, 2, 3).reshape(steps, n, width)
    h_n = torch.stack(finals_h).reshape(layers * directions, n, hidden)
    if lstm:
        return output, (h_n, torch.stack(finals_c).reshape(layers * directions, n, hidden))
    return output, h_n


# ------------------------------------------------------------------ attention


def attention(
    m: nn.MultiheadAttention,
    c: Clients,
    names: dict,
    dim: int,
    query,
    key,
    value,
    key_padding_mask=None,
    need_weights=True,
    attn_mask=None,
    average_attn_weights=True,
    is_causal=False,
):
    """``nn.MultiheadAttention`` for K clients (``F.multi_head_attention_forward``'s rules, each client's
    projections)."""
    if m.bias_k is not None or m.add_zero_attn:
        raise Unbatchable("MultiheadAttention with add_bias_kv or add_zero_attn")
    if query.dim() != 3:
        raise Unbatchable("MultiheadAttention on an unbatched input")
    k = c.k
    q_in, k_in, v_in = (t if m.batch_first else t.transpose(0, 1) for t in (query, key, value))
    n, length, embed = q_in.shape
    source = k_in.shape[1]
    heads = m.num_heads
    head = embed // heads
    b = n // k
    bias = c.param(names.get("in_proj_bias"))
    biases = (None, None, None) if bias is None else bias.split(embed, dim=1)
    if m.in_proj_weight is not None:  # one projection for query, key and value
        weight = c.param(names["in_proj_weight"])
        if query is key and key is value:
            q, kk, v = _project(q_in.reshape(k, b * length, embed), weight, bias, c.shared).chunk(3, dim=-1)
        else:
            wq, wk, wv = weight.split(embed, dim=1)
            q = _project(q_in.reshape(k, b * length, -1), wq, biases[0], c.shared)
            kk = _project(k_in.reshape(k, b * source, -1), wk, biases[1], c.shared)
            v = _project(v_in.reshape(k, b * source, -1), wv, biases[2], c.shared)
    else:
        q = _project(q_in.reshape(k, b * length, -1), c.param(names["q_proj_weight"]), biases[0], c.shared)
        kk = _project(k_in.reshape(k, b * source, -1), c.param(names["k_proj_weight"]), biases[1], c.shared)
        v = _project(v_in.reshape(k, b * source, -1), c.param(names["v_proj_weight"]), biases[2], c.shared)
    q = q.reshape(n, length, heads, head).transpose(1, 2)  # (N, heads, L, head)
    kk = kk.reshape(n, source, heads, head).transpose(1, 2)
    v = v.reshape(n, source, heads, head).transpose(1, 2)
    key_padding_mask = _additive(key_padding_mask, q.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint")
    causal = bool(is_causal and key_padding_mask is None and not need_weights)
    mask = None
    if not causal:
        mask = _additive(attn_mask, q.dtype)
        if mask is not None:
            mask = mask.view(1, 1, length, source) if mask.dim() == 2 else mask.view(n, heads, length, source)
        if key_padding_mask is not None:
            padding = key_padding_mask.view(n, 1, 1, source)
            mask = padding if mask is None else mask + padding
    p = m.dropout if m.training else 0.0
    weights = None
    if need_weights or p > 0.0:
        scores = torch.matmul(q * (1.0 / math.sqrt(head)), kk.transpose(-2, -1))
        if mask is not None:
            scores = scores + mask
        elif causal:
            scores = scores + torch.full((length, source), float("-inf"), device=q.device).triu(1)
        weights = scores.softmax(dim=-1)
        attended = weights
        if p > 0.0:  # torch's dropout: a Bernoulli draw the shape of one client's weights, scaled by 1/(1-p)
            noise = c.masks(c.global_, (b, heads, length, source), 0, 1.0 - p, weights)
            attended = weights * noise.div_(1.0 - p)
        out = torch.matmul(attended, v)
    else:
        out = F.scaled_dot_product_attention(q, kk, v, attn_mask=mask, is_causal=causal)
    out = out.transpose(1, 2).reshape(k, b * length, embed)
    out = _project(out, c.param(names["out_proj.weight"]), c.param(names.get("out_proj.bias")), c.shared)
    out = out.view(n, length, -1)
    if not m.batch_first:
        out = out.transpose(0, 1)
    if not need_weights:
        return out, None
    return out, weights.mean(dim=1) if average_attn_weights else weights


def _additive(mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """An attention mask as scores to add: a boolean one -inf where True (masked out), a float one as it is."""
    if mask is None or mask.is_floating_point():
        return None if mask is None else mask.to(dtype)
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(mask, float("-inf"))


def _dropout_kind(channels: int | None) -> Callable:
    def forward(m, c, names, dim, x):
        return dropout(m, c, names, dim, x, channels=channels)

    return forward


#: The layers the batched path computes, by exact type (a subclass may change ``forward``).
LAYERS: dict[type, Callable] = {
    nn.Linear: linear,
    nn.Embedding: embedding,
    nn.EmbeddingBag: embedding_bag,
    nn.LayerNorm: layer_norm,
    nn.BatchNorm1d: batch_norm,
    nn.BatchNorm2d: batch_norm,
    nn.BatchNorm3d: batch_norm,
    nn.LSTM: recurrent,
    nn.GRU: recurrent,
    nn.RNN: recurrent,
    nn.MultiheadAttention: attention,
    nn.Dropout: _dropout_kind(None),
    nn.Dropout1d: _dropout_kind(1),
    nn.Dropout2d: _dropout_kind(2),
    nn.Dropout3d: _dropout_kind(3),
}


def known_batch_dim(m: nn.Module) -> int | None:
    """The batch dimension of a layer's input where its kind fixes it (None: found by running the module)."""
    if isinstance(m, (nn.RNNBase, nn.MultiheadAttention)):
        return 0 if m.batch_first else 1
    if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.EmbeddingBag)):
        return 0
    return None
