"""``nn.LSTM``, ``nn.GRU`` and ``nn.RNN`` for K clients (:mod:`netfl.learn.training.client_layers`), every layer and
direction: LSTM as K calls of torch's fused kernel, GRU with its backward pass written out.

Why the two differ, measured (one thread, 25 clients of a batch of 10, 40 steps, embedding 8, hidden 64, forward
and backward): torch's fused LSTM (oneDNN on a CPU) took 14.5 ms for the 25 clients one after another, a stacked
LSTM of batched products per time step written in torch's operations 24.4 ms (22.4 ms where every client holds the
same weights); torch has no fused GRU on a CPU, so there the stacked form wins (benchmarks/speed.py, section
text: the GRU at a third of a plain loop's time)."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence

from netfl.learn.training.client_batch import Clients, Unbatchable, project

__all__ = ["recurrent"]


class _GRULayer(torch.autograd.Function):
    """One GRU layer and direction for K clients, backward written out (backpropagation through time: autograd
    through a loop over time steps would record a dozen small operations per step); ``shared``:
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


def _lstm_weight_names(m: nn.LSTM) -> list[str]:
    """The LSTM's parameters in the order its fused kernel takes them (layer by layer, each direction: the
    input and hidden weights, then their biases), by the names ``nn.LSTM`` documents."""
    names = []
    for layer in range(m.num_layers):
        for suffix in ("", "_reverse")[: 2 if m.bidirectional else 1]:
            kinds = ("weight_ih", "weight_hh") + (("bias_ih", "bias_hh") if m.bias else ())
            names += [f"{kind}_l{layer}{suffix}" for kind in kinds]
    return names


def _lstm_per_client(m: nn.LSTM, c: Clients, names: dict, input, hx):
    """``nn.LSTM`` for K clients as K calls of torch's fused LSTM (``torch.lstm``, what ``nn.LSTM`` itself calls:
    oneDNN on a CPU, cuDNN on a GPU), each client with its own weights and initial states (the module docstring says
    why). ``unbind`` hands each call its client's weights as views; their gradients are stacked once."""
    k, layers, directions = c.k, m.num_layers, 2 if m.bidirectional else 1
    batch = 0 if m.batch_first else 1
    n = input.shape[batch]
    b = n // k
    xs = input.split(b, dim=batch)
    stacked = [c.param(names[name]).unbind(0) for name in _lstm_weight_names(m)]
    if hx is None:
        zeros = input.new_zeros(layers * directions, b, m.hidden_size)
        hs = cs = [zeros] * k
    else:
        hs, cs = hx[0].split(b, dim=1), hx[1].split(b, dim=1)
    outs, h_n, c_n = [], [], []
    for j in range(k):
        out, h, cell = torch.lstm(
            xs[j],
            (hs[j], cs[j]),
            [w[j] for w in stacked],
            m.bias,
            layers,
            0.0,
            m.training,
            m.bidirectional,
            m.batch_first,
        )
        outs.append(out)
        h_n.append(h)
        c_n.append(cell)
    return torch.cat(outs, dim=batch), (torch.cat(h_n, dim=1), torch.cat(c_n, dim=1))


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
    if m.mode == "LSTM":
        return _lstm_per_client(m, c, names, input, hx)
    k, hidden, layers = c.k, m.hidden_size, m.num_layers
    directions = 2 if m.bidirectional else 1
    batch_major = input if m.batch_first else input.transpose(0, 1)
    n, steps = batch_major.shape[0], batch_major.shape[1]
    b = n // k
    layer_in = batch_major.reshape(k, b, steps, -1).transpose(1, 2)  # (K, T, B, F)
    h0 = hx.reshape(layers * directions, k, b, hidden) if hx is not None else None
    zeros = layer_in.new_zeros(k, b, hidden)
    finals_h = []
    for layer in range(layers):
        outs = []
        for direction in range(directions):
            suffix = f"_l{layer}" + ("_reverse" if direction else "")
            w_ih, w_hh = c.param(names["weight_ih" + suffix]), c.param(names["weight_hh" + suffix])
            b_ih, b_hh = c.param(names.get("bias_ih" + suffix)), c.param(names.get("bias_hh" + suffix))
            h = h0[layer * directions + direction] if h0 is not None else zeros
            # both biases in one, except GRU's b_hh, which r gates (PyTorch's equations)
            bias = b_ih if m.mode == "GRU" or b_ih is None else b_ih + b_hh
            xp = project(layer_in.reshape(k, steps * b, -1), w_ih, bias, c.shared).view(k, steps, b, -1)
            if m.mode == "GRU":
                out, h = _GRULayer.apply(xp, w_hh, b_hh, h, bool(direction), c.shared)
            else:
                order = range(steps - 1, -1, -1) if direction else range(steps)
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
    return output, torch.stack(finals_h).reshape(layers * directions, n, hidden)
