"""What the batched layers (:mod:`netfl.learn.training.client_layers`) share: the K clients' stacked weights
and generators (:class:`Clients`), the reason a layer cannot be batched (:class:`Unbatchable`), and each
client's projection through its own weights (:func:`project`; ``nn.Linear`` as :func:`linear`)."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["Clients", "Unbatchable", "linear", "project"]


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


def project(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, shared: bool = False) -> torch.Tensor:
    """Client rows (K, n, in) through each client's (K, out, in) weight: (K, n, out). ``shared``: the clients'
    weights are equal (:class:`Clients`), one product of K x n rows."""
    if shared:
        return _SharedProject.apply(x, weight, bias)
    if bias is None:
        return torch.bmm(x, weight.transpose(1, 2))
    return torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))


class _SharedProject(torch.autograd.Function):
    """:func:`project` where every client's weight equals client 0's: the forward and the input's gradient as
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
    return _from_clients(project(rows, c.param(names["weight"]), c.param(names.get("bias")), c.shared), shape, dim)
