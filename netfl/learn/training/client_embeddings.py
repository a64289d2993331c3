"""``nn.Embedding`` and ``nn.EmbeddingBag`` for K clients (:mod:`netfl.learn.training.client_layers`): a lookup in
the clients' tables laid end to end, an embedding bag's gradient sparse and added into the rows it names."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from netfl.learn.training.client_batch import Clients, Unbatchable

__all__ = ["add_rows", "client_tables", "embedding", "embedding_bag"]


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
