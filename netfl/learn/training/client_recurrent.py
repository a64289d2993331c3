"""``nn.LSTM``, ``nn.GRU`` and ``nn.RNN`` for K clients (:mod:`netfl.learn.training.client_layers`): every layer and
direction, LSTM and GRU with their backward pass written out."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence

from netfl.learn.training.client_batch import Clients, Unbatchable, project

__all__ = ["recurrent"]


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
            xp = project(layer_in.reshape(k, t_in * b, -1), w_ih, bias, c.shared).view(k, t_in, b, -1)
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
