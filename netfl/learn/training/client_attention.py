"""``nn.MultiheadAttention`` for K clients (:mod:`netfl.learn.training.client_layers`), and so
``nn.TransformerEncoder(Layer)``: each client's projections, attention over the K x B samples' heads."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from netfl.learn.training.client_batch import Clients, Unbatchable, project

__all__ = ["attention"]


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
            q, kk, v = project(q_in.reshape(k, b * length, embed), weight, bias, c.shared).chunk(3, dim=-1)
        else:
            wq, wk, wv = weight.split(embed, dim=1)
            q = project(q_in.reshape(k, b * length, -1), wq, biases[0], c.shared)
            kk = project(k_in.reshape(k, b * source, -1), wk, biases[1], c.shared)
            v = project(v_in.reshape(k, b * source, -1), wv, biases[2], c.shared)
    else:
        q = project(q_in.reshape(k, b * length, -1), c.param(names["q_proj_weight"]), biases[0], c.shared)
        kk = project(k_in.reshape(k, b * source, -1), c.param(names["k_proj_weight"]), biases[1], c.shared)
        v = project(v_in.reshape(k, b * source, -1), c.param(names["v_proj_weight"]), biases[2], c.shared)
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
    out = project(out, c.param(names["out_proj.weight"]), c.param(names.get("out_proj.bias")), c.shared)
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
