"""Model builders and their analytic FLOP and byte counts (hand-computed)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from netfl.learn.models.builtin import (
    MODEL_NAMES,
    build_model,
    forward_flops_per_sample,
    model_num_bytes,
    training_flops_per_sample,
)
from netfl.registry.models import TEXT_MODELS


@pytest.mark.parametrize("name", [name for name in MODEL_NAMES if name not in TEXT_MODELS])
@pytest.mark.parametrize("shape", [(1, 8, 8), (1, 28, 28), (3, 32, 32)])
def test_output_shapes(name: str, shape: tuple[int, int, int]) -> None:
    model = build_model(name, shape, 10)
    out = model(torch.zeros(5, *shape))
    assert out.shape == (5, 10)
    assert forward_flops_per_sample(model, shape) > 0


def test_unknown_model_lists_names() -> None:
    with pytest.raises(ValueError) as info:
        build_model("resnet", (1, 8, 8), 10)
    assert all(name in str(info.value) for name in MODEL_NAMES)


def test_mlp_hidden_sizes() -> None:
    model = build_model("mlp", (1, 8, 8), 10, hidden=(32, 16))
    widths = [(m.in_features, m.out_features) for m in model if isinstance(m, nn.Linear)]
    assert widths == [(64, 32), (32, 16), (16, 10)]


def test_logistic_flops_and_bytes() -> None:
    model = build_model("logistic", (1, 8, 8), 10)
    assert forward_flops_per_sample(model, (1, 8, 8)) == 2 * 64 * 10 + 10 == 1290
    assert training_flops_per_sample(model, (1, 8, 8)) == 3 * 1290
    assert model_num_bytes(model) == (64 * 10 + 10) * 4 == 2600


def test_lenet5_28x28_structure_and_flops() -> None:
    model = build_model("lenet5", (1, 28, 28), 10)
    fc1 = next(m for m in model if isinstance(m, nn.Linear))
    assert fc1.in_features == 16 * 5 * 5
    conv1 = 2 * 1 * 25 * 6 * 28 * 28 + 6 * 28 * 28
    conv2 = 2 * 6 * 25 * 16 * 10 * 10 + 16 * 10 * 10
    fcs = (2 * 400 * 120 + 120) + (2 * 120 * 84 + 84) + (2 * 84 * 10 + 10)
    assert forward_flops_per_sample(model, (1, 28, 28)) == conv1 + conv2 + fcs == 839558
    params = (25 * 6 + 6) + (6 * 25 * 16 + 16) + (400 * 120 + 120) + (120 * 84 + 84) + (84 * 10 + 10)
    assert model_num_bytes(model) == 4 * params


def test_cnn_28x28_flops() -> None:
    model = build_model("cnn", (1, 28, 28), 10)
    conv1 = 2 * 1 * 9 * 32 * 28 * 28 + 32 * 28 * 28
    conv2 = 2 * 32 * 9 * 32 * 14 * 14 + 32 * 14 * 14
    fcs = (2 * 32 * 7 * 7 * 128 + 128) + (2 * 128 * 10 + 10)
    assert forward_flops_per_sample(model, (1, 28, 28)) == conv1 + conv2 + fcs


def test_flops_grouped_conv_without_bias_and_hooks_removed() -> None:
    conv = nn.Conv2d(4, 8, 3, groups=2, bias=False)
    model = nn.Sequential(conv)
    # 2 * (4/2) * 9 * 8 * 6 * 6, no bias
    assert forward_flops_per_sample(model, (4, 8, 8)) == 2 * 2 * 9 * 8 * 36
    assert not conv._forward_hooks
