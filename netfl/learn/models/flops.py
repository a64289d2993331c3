"""A module's forward FLOPs per sample, counted on the module itself.

A device's compute time is its training FLOPs over its speed (torch never decides simulated time), so the
FLOPs of the module a task trains are counted by running it once, in training mode, on a batch of two copies of
one sample (a batch of one would be refused by BatchNorm in training mode) and halving the count, under a
:class:`~torch.overrides.TorchFunctionMode` that adds up, for every call of a matrix product, convolution,
recurrent layer or attention, what it costs:

* 2 FLOPs per multiply-add, and one per output for a bias: ``linear`` ``2 in out + out``; convolutions
  ``2 (Cin/groups) prod(kernel)`` per output (+1 with a bias); a transposed convolution the same per input;
  ``matmul``/``mm``/``bmm`` ``2 K`` per output (``addmm``/``baddbmm`` +1);
* recurrent layers (``nn.RNN``, ``nn.GRU``, ``nn.LSTM``): their gate products, every weight matrix ``2 rows
  cols`` per time step (+ both biases), layer by layer and direction by direction;
* attention: ``scaled_dot_product_attention`` ``4 L S E`` (scores and weighted sum), and ``nn.MultiheadAttention``
  its projections and attention.

Activations, normalisation, pooling and element-wise arithmetic are a rounding error next to those and are not
counted. The built-in models' counts equal their analytic ones (:func:`netfl.registry.models.model_cost`; a
test pins that). Counting at this level -- the functions a module calls -- rather than with
``torch.utils.flop_counter`` (torch's operator-level counter) avoids importing ``torch._dynamo``, which that
counter pulls in and which costs seconds at the start of every run.

A formula that fails on what a module hands it is netfl's failure, not the module's: it is reported as such
(:class:`~netfl.errors.ModelError` naming the function, not the user's line that called it), with
``model.flops_per_sample`` as the way around it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from netfl.errors import ModelError

__all__ = ["forward_flops"]


#: The batch the count runs on: two copies of the sample (BatchNorm refuses one sample per channel in training).
COUNT_BATCH = 2


def forward_flops(module: nn.Module, sample: torch.Tensor) -> float:
    """FLOPs of ``module``'s forward pass per sample, for ``sample`` (a batch whose first sample is counted): in
    training mode as a job runs it, on :data:`COUNT_BATCH` copies of that sample, the count divided by them (for
    the products and convolutions counted, a batch of B costs B times one sample); the module's buffers
    (BatchNorm's running statistics) are left as they were."""
    saved = {name: b.detach().clone() for name, b in module.named_buffers()} if sample.device.type != "meta" else {}
    was_training = module.training
    counter = _Counter()
    batch = sample[:1].expand(COUNT_BATCH, *sample.shape[1:]).contiguous()
    try:
        module.train()
        with torch.no_grad(), counter:
            module(batch)
    finally:
        module.train(was_training)
        with torch.no_grad():
            for name, buffer in module.named_buffers():
                if name in saved:
                    buffer.copy_(saved[name])
    return counter.total / COUNT_BATCH


def _numel(shape: Any) -> int:
    return math.prod(int(v) for v in shape)


def _linear(input, weight, bias=None) -> int:
    """``x W^T + b``; a 1-D weight (a dot product per row, which ``F.linear`` accepts) is one output."""
    outputs, inputs = (weight.shape[0], weight.shape[1]) if weight.dim() == 2 else (1, weight.shape[-1])
    out = _numel(input.shape[:-1]) * outputs
    return 2 * out * inputs + (out if bias is not None else 0)


def _bilinear(input1, input2, weight, bias=None) -> int:
    batch = _numel(input1.shape[:-1])
    return 2 * batch * _numel(weight.shape) + (batch * weight.shape[0] if bias is not None else 0)


def _conv(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> int:
    """Convolution: every output of ``conv(input)`` costs ``2 (Cin/groups) prod(kernel)`` (+1 with a bias)."""
    out = _conv_out_numel(input, weight, stride, padding, dilation)
    return out * (2 * _numel(weight.shape[1:]) + (1 if bias is not None else 0))


def _conv_out_numel(input, weight, stride, padding, dilation) -> int:
    dims = weight.dim() - 2
    spatial = input.shape[-dims:]

    def per_dim(value, i):
        return value[i] if isinstance(value, (tuple, list)) else value

    if isinstance(padding, str):  # "same" keeps the size; "valid" pads nothing
        sizes = list(spatial) if padding == "same" else None
        if sizes is None:
            padding = 0
    if not isinstance(padding, str):
        sizes = [
            (spatial[i] + 2 * per_dim(padding, i) - per_dim(dilation, i) * (weight.shape[2 + i] - 1) - 1)
            // per_dim(stride, i)
            + 1
            for i in range(dims)
        ]
    batch = input.shape[0] if input.dim() == dims + 2 else 1
    return batch * weight.shape[0] * _numel(sizes)


def _conv_transpose(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1) -> int:
    """Transposed convolution: every input element is multiplied into ``(Cout/groups) prod(kernel)`` outputs."""
    dims = weight.dim() - 2
    flops = 2 * _numel(input.shape) * _numel(weight.shape[1:])
    if bias is not None:
        batch = input.shape[0] if input.dim() == dims + 2 else 1
        spatial = [(input.shape[-dims + i] - 1) * (stride[i] if isinstance(stride, (tuple, list)) else stride)
                   + weight.shape[2 + i] for i in range(dims)]  # fmt: skip
        flops += batch * weight.shape[1] * groups * _numel(spatial)
    return flops


def _matmul(a, b, *args, **kwargs) -> int:
    """``a @ b``: every output costs ``2 K`` (K the contracted size)."""
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        return 0
    if a.dim() == 0 or b.dim() == 0:
        return 0
    k = a.shape[-1]
    out = _numel(a.shape[:-1]) * (b.shape[-1] if b.dim() > 1 else 1)
    if a.dim() > 2 or b.dim() > 2:  # broadcast batch dimensions
        batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]) if a.dim() > 1 and b.dim() > 1 else ()
        rows = a.shape[-2] if a.dim() > 1 else 1
        out = _numel(batch) * rows * (b.shape[-1] if b.dim() > 1 else 1)
    return 2 * out * k


def _addmm(bias, a, b, *args, **kwargs) -> int:
    return _matmul(a, b) + a.shape[0] * b.shape[-1]


def _baddbmm(bias, a, b, *args, **kwargs) -> int:
    return _matmul(a, b) + a.shape[0] * a.shape[1] * b.shape[2]


def _sdpa(query, key, value, *args, **kwargs) -> int:
    """Scores ``Q K^T`` and the weighted sum ``A V``: ``2 L S E`` each, per batch and head."""
    batch = _numel(query.shape[:-2])
    length, source, embed = query.shape[-2], key.shape[-2], query.shape[-1]
    return 2 * batch * length * source * (embed + value.shape[-1])


def _multi_head_attention(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                          *args, **kwargs) -> int:  # fmt: skip
    """``nn.MultiheadAttention``: the input projections of query, key and value, attention, output projection."""
    length, source = query.shape[0], key.shape[0]  # (L, N, E) as the functional form receives them
    batch = query.shape[1] if query.dim() == 3 else 1
    embed = query.shape[-1]
    kdim, vdim = key.shape[-1], value.shape[-1]
    projections = 2 * batch * embed * (length * embed + source * kdim + source * vdim)
    attention = 4 * batch * length * source * embed
    output = 2 * batch * length * embed * embed
    biases = batch * embed * (length + 2 * source + length) if in_proj_bias is not None else 0
    return projections + attention + output + biases


def _recurrent(gates: int) -> Callable[..., int]:
    """An ``nn.RNN`` (1 gate), ``nn.GRU`` (3) or ``nn.LSTM`` (4) as ``torch._VF`` runs it: for every layer and
    direction, at every time step, ``2 rows cols`` per weight matrix and ``rows`` per bias."""

    def count(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first=False, *rest):
        if isinstance(params, (list, tuple)) and params and isinstance(params[0], torch.Tensor):
            weights = list(params)
        else:  # the packed-sequence form: (data, batch_sizes, hx, params, ...)
            return 0
        steps = input.shape[1] if batch_first else input.shape[0]
        batch = (input.shape[0] if batch_first else input.shape[1]) if input.dim() == 3 else 1
        total = 0
        for w in weights:
            if w.dim() == 2:
                total += 2 * w.shape[0] * w.shape[1]
            elif w.dim() == 1:
                total += w.shape[0]
        return total * steps * batch

    return count


_FORMULAS: dict[Any, Callable[..., int]] = {
    nn.functional.linear: _linear,
    torch._C._nn.linear: _linear,
    nn.functional.bilinear: _bilinear,
    torch.conv1d: _conv,
    torch.conv2d: _conv,
    torch.conv3d: _conv,
    nn.functional.conv1d: _conv,
    nn.functional.conv2d: _conv,
    nn.functional.conv3d: _conv,
    torch.conv_transpose1d: _conv_transpose,
    torch.conv_transpose2d: _conv_transpose,
    torch.conv_transpose3d: _conv_transpose,
    nn.functional.conv_transpose1d: _conv_transpose,
    nn.functional.conv_transpose2d: _conv_transpose,
    nn.functional.conv_transpose3d: _conv_transpose,
    torch.matmul: _matmul,
    torch.mm: _matmul,
    torch.bmm: _matmul,
    torch.Tensor.__matmul__: _matmul,
    torch.Tensor.matmul: _matmul,
    torch.Tensor.mm: _matmul,
    torch.Tensor.bmm: _matmul,
    torch.addmm: _addmm,
    torch.baddbmm: _baddbmm,
    nn.functional.scaled_dot_product_attention: _sdpa,
    nn.functional.multi_head_attention_forward: _multi_head_attention,
    torch._VF.rnn_tanh: _recurrent(1),
    torch._VF.rnn_relu: _recurrent(1),
    torch._VF.gru: _recurrent(3),
    torch._VF.lstm: _recurrent(4),
}


def _recurrent_on_meta(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first=False,
                       *rest):  # fmt: skip
    """What ``torch._VF``'s recurrent functions return, as empty meta tensors of the right shapes (None: the
    packed-sequence form, which runs as it is). On the meta device torch computes them through Python
    decompositions whose first use imports ``torch._dynamo`` -- seconds of a small job's start-up -- for values
    a meta tensor does not have anyway."""
    if not (isinstance(params, (list, tuple)) and input.dim() == 3):
        return None
    states = list(hx) if isinstance(hx, (list, tuple)) else [hx]
    steps, batch = (input.shape[1], input.shape[0]) if batch_first else (input.shape[0], input.shape[1])
    width = (2 if bidirectional else 1) * states[0].shape[-1]
    shape = (batch, steps, width) if batch_first else (steps, batch, width)
    return (input.new_empty(shape), *(s.new_empty(s.shape) for s in states))


_META_OUTPUTS = {torch._VF.rnn_tanh, torch._VF.rnn_relu, torch._VF.gru, torch._VF.lstm}


def _rmatmul(a, b, *args, **kwargs) -> int:
    return _matmul(b, a)


_FORMULAS[torch.Tensor.__rmatmul__] = _rmatmul


class _Counter(TorchFunctionMode):
    """Adds up the FLOPs of the calls it sees (nested calls inside a counted function are not seen: a
    function's own formula covers them)."""

    def __init__(self):
        super().__init__()
        self.total = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        formula = _FORMULAS.get(func)
        if formula is not None:
            try:
                self.total += formula(*args, **kwargs)
            except Exception as exc:  # netfl's formula, not the module: said so, not blamed on the user's line
                name = getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))
                raise ModelError(
                    f"netfl could not count the FLOPs of a call to {name} in the model ({type(exc).__name__}: "
                    f"{exc}); this is a failure of netfl's FLOP count, not of the model: give "
                    "model.flops_per_sample (its training FLOPs per sample) to skip the count"
                ) from None
        if func in _META_OUTPUTS and args and isinstance(args[0], torch.Tensor) and args[0].is_meta:
            out = _recurrent_on_meta(*args, **kwargs)
            if out is not None:
                return out
        return func(*args, **kwargs)
