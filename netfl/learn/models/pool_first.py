"""Max-pooling before a piecewise-linear activation: the same numbers, a fraction of the activation's work.

A conv net's ``ReLU`` followed by ``MaxPool2d(2)`` applies the activation, forward and backward, to four
times the elements it needs: for a non-decreasing activation ``f``, ``maxpool(f(x)) == f(maxpool(x))``
element for element, and the gradient reaches the same input (the window's first maximum, and where ``f``
ties values -- ReLU's negatives -- its derivative there is zero on both sides). So the training replicas
run the pooling first. Measured on one core, channels_last, alternately in one process: a training step of
32 on the built-in CNN takes 0.73-0.77x the time; whole jobs, where the step is not all the work, 0.93x
(W2 of ``benchmarks/``, 2 rounds) and 0.98x (``topologies/fashion-mnist.yaml``, LeNet-5), their outputs
the same bytes.

Only activations computed exactly (comparisons and one multiplication: ``ReLU``, ``ReLU6``,
``LeakyReLU`` with a slope >= 0, ``Hardtanh``) are moved: a transcendental one (``Tanh``, ``Sigmoid``) may
round an element differently in a vector kernel's body and its tail, so its results could move by an ulp.
Only ``nn.Sequential`` containers are rewritten (anywhere in the module): their order is their forward
pass, where a ``forward`` written by hand could use the layers in any way.
"""

from __future__ import annotations

from torch import nn

__all__ = ["pool_before_activation"]

_MAX_POOLS = (
    nn.MaxPool1d,
    nn.MaxPool2d,
    nn.MaxPool3d,
    nn.AdaptiveMaxPool1d,
    nn.AdaptiveMaxPool2d,
    nn.AdaptiveMaxPool3d,
)


def _exact_non_decreasing(layer: nn.Module) -> bool:
    kind = type(layer)
    if kind in (nn.ReLU, nn.ReLU6):
        return True
    if kind is nn.LeakyReLU:
        return layer.negative_slope >= 0
    if kind is nn.Hardtanh:
        return layer.min_val <= layer.max_val
    return False


def _plain_max_pool(layer: nn.Module) -> bool:
    return type(layer) in _MAX_POOLS and not layer.return_indices


def pool_before_activation(module: nn.Module) -> int:
    """Swap, in place, every activation that a max-pooling follows in an ``nn.Sequential`` of ``module``;
    return how many. Neither layer holds parameters or buffers, so the module's state keeps its names."""
    swapped = 0
    for child in module.modules():
        if type(child) is not nn.Sequential:
            continue
        i = 0
        while i + 1 < len(child):
            first, second = child[i], child[i + 1]
            if _exact_non_decreasing(first) and _plain_max_pool(second):
                child[i], child[i + 1] = second, first  # each under the other's name: the order of the names stays
                swapped += 1
                i += 2
            else:
                i += 1
    return swapped
