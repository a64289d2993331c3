"""The fused kernel of multi-layer perceptrons: many clients' SGD on ``Linear, ReLU, ..., Linear`` at once.

Recognised on any module whose forward is such a chain -- the built-in ``logistic`` and ``mlp``, and a
user's own MLP however it is written (``nn.Sequential``, or a class calling ``flatten``, its ``nn.Linear``
layers and ``relu``) -- by tracing it with :mod:`torch.fx`. A module that cannot be traced, or holds anything
else (another activation, dropout, normalisation, a softmax), is not an MLP here and trains on another path
(:mod:`netfl.learn.training.trainer`).
"""

from __future__ import annotations

import torch
from torch import fx, nn

from netfl.learn.models.params import ParamLayout
from netfl.learn.training.stacked import running_from, stacked_views

__all__ = ["FusedMLP", "linear_relu_chain"]


def linear_relu_chain(module: nn.Module, *, flat_input: bool) -> list[str] | None:
    """The names of the ``nn.Linear`` submodules of ``module`` if its forward is ``flatten?, Linear, (ReLU,
    Linear)*`` (each with a bias) applied in a chain, else None. ``flat_input``: the samples are vectors, so
    no flatten is needed first."""
    owners = [m for m in module.modules() if next(m.parameters(recurse=False), None) is not None]
    if any(not isinstance(m, nn.Linear) for m in owners):
        return None  # weights outside Linear layers (an embedding, a recurrent layer): not traced, 70 ms saved
    try:
        graph = fx.symbolic_trace(module).graph
    except Exception:  # anything fx cannot trace (control flow on values, unsupported calls) is not a chain
        return None
    steps: list[tuple[str, str | None]] = []
    previous = None
    for node in graph.nodes:
        if node.op == "placeholder":
            if previous is not None:
                return None  # a second input
            previous = node
            continue
        if node.op == "output":
            if node.args[0] is not previous:
                return None
            break
        tensor_args = [a for a in node.args if isinstance(a, fx.Node)]
        if tensor_args != [previous] or node.kwargs.get("input", previous) is not previous:
            return None  # not a chain: a skip connection, or a second tensor
        kind = _step_kind(module, node)
        if kind is None:
            return None
        if kind[0] != "identity":
            steps.append(kind)
        previous = node
    if steps and steps[0][0] == "flatten":
        steps = steps[1:]
    elif not flat_input:
        return None
    kinds = [k for k, _ in steps]
    if not kinds or len(kinds) % 2 == 0 or kinds != ["linear" if i % 2 == 0 else "relu" for i in range(len(kinds))]:
        return None
    return [name for kind, name in steps if kind == "linear"]


def _step_kind(root: nn.Module, node: fx.Node) -> tuple[str, str | None] | None:
    if node.op == "call_module":
        sub = root.get_submodule(node.target)
        if isinstance(sub, nn.Linear):
            return ("linear", node.target) if sub.bias is not None else None
        if isinstance(sub, nn.ReLU):
            return ("relu", None)
        if isinstance(sub, nn.Flatten):
            return ("flatten", None) if (sub.start_dim, sub.end_dim) == (1, -1) else None
        if isinstance(sub, nn.Identity):
            return ("identity", None)
        return None
    if node.op == "call_function":
        if node.target in (torch.relu, nn.functional.relu, torch.relu_):
            return ("relu", None)
        if node.target is torch.flatten and _flatten_args(node.args[1:], node.kwargs):
            return ("flatten", None)
        return None
    if node.op == "call_method":
        if node.target in ("relu", "relu_"):
            return ("relu", None)
        if node.target == "flatten" and _flatten_args(node.args[1:], node.kwargs):
            return ("flatten", None)
        return None
    return None


def _flatten_args(args: tuple, kwargs: dict) -> bool:
    """``flatten(x, 1)`` / ``x.flatten(1)`` (from the second dimension on, to the end)."""
    start = args[0] if args else kwargs.get("start_dim", 0)
    end = args[1] if len(args) > 1 else kwargs.get("end_dim", -1)
    return start == 1 and end == -1


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
    def of(cls, model: nn.Module, layout: ParamLayout, input_shape: tuple[int, ...]) -> FusedMLP | None:
        """The kernel for ``model`` if it is such a stack (built-in or the user's own), else None."""
        chain = linear_relu_chain(model, flat_input=len(input_shape) == 1)
        if chain is None:
            return None
        names = [(f"{name}.weight", f"{name}.bias") for name in chain]
        if [n for pair in names for n in pair] != list(layout.names):
            return None  # frozen layers, or parameters in another order than the chain
        return cls(layout, names)

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
        """Advance the rows of ``w`` (n x dim, jobs sorted by ``steps``) in place (``seeds``: not used).

        Each step: ``w <- (1 - lr (weight_decay + pull)) w - lr grad + offset`` (offset: n x dim or None).
        """
        n, b = len(steps), batches.shape[2]
        params = stacked_views(w, self.layout)
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
            first = running_from(steps, step)
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
