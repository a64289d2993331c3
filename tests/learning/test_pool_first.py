"""Pooling before the activation (netfl/learn/models/pool_first.py): the same outputs and gradients to the bit."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from netfl.learn.models.builtin import build_model
from netfl.learn.models.pool_first import pool_before_activation


def tied_images(shape: tuple[int, ...]) -> torch.Tensor:
    """Values on a coarse grid: many ties in each pooling window, negatives, zeros and positives."""
    generator = torch.Generator().manual_seed(0)
    return (torch.randint(-3, 4, shape, generator=generator) / 2).float()


def outputs_and_gradients(module: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, list]:
    x = x.clone().requires_grad_(True)
    out = module(x)
    (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
    return out.detach(), x.grad, [p.grad for p in module.parameters()]


@pytest.mark.parametrize(
    "activation",
    [nn.ReLU(), nn.ReLU(inplace=True), nn.ReLU6(), nn.LeakyReLU(0.1), nn.Hardtanh(-0.5, 0.5)],
    ids=["relu", "relu-inplace", "relu6", "leaky", "hardtanh"],
)
@pytest.mark.parametrize(
    "pool", [nn.MaxPool2d(2), nn.MaxPool2d(3, stride=2, padding=1), nn.AdaptiveMaxPool2d(3)], ids=str
)
def test_the_swapped_layers_give_the_same_outputs_and_gradients(activation: nn.Module, pool: nn.Module) -> None:
    torch.manual_seed(0)
    original = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), activation, pool, nn.Flatten(), nn.LazyLinear(3))
    x = tied_images((5, 2, 8, 8))
    original(x)  # the lazy layer takes its shape
    swapped = copy.deepcopy(original)
    assert pool_before_activation(swapped) == 1
    assert isinstance(swapped[1], type(pool)) and isinstance(swapped[2], type(activation))
    assert list(swapped.state_dict()) == list(original.state_dict())
    out, x_grad, grads = outputs_and_gradients(original, x)
    out2, x_grad2, grads2 = outputs_and_gradients(swapped, x)
    assert torch.equal(out, out2) and torch.equal(x_grad, x_grad2)
    assert all(torch.equal(a, b) for a, b in zip(grads, grads2))


def test_the_built_in_conv_nets_are_rewritten_and_keep_their_state_names() -> None:
    for name, expected in (("cnn", 2), ("lenet5", 2)):
        model = build_model(name, (1, 28, 28), 10)
        names = list(model.state_dict())
        assert pool_before_activation(model) == expected, name
        assert list(model.state_dict()) == names


def test_a_sequential_inside_a_users_module_is_rewritten_but_a_hand_written_forward_is_not() -> None:
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.MaxPool2d(2))
            self.act, self.pool = nn.ReLU(), nn.MaxPool2d(2)  # used by forward, in an order only it knows

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.pool(self.act(self.features(x)))

    net = Net()
    assert pool_before_activation(net) == 1
    assert isinstance(net.features[1], nn.MaxPool2d) and isinstance(net.act, nn.ReLU)


@pytest.mark.parametrize(
    "layers",
    [
        [nn.Tanh(), nn.MaxPool2d(2)],  # transcendental: a vector kernel may round differently
        [nn.Sigmoid(), nn.MaxPool2d(2)],
        [nn.LeakyReLU(-0.5), nn.MaxPool2d(2)],  # decreasing on the negatives: max and activation do not commute
        [nn.ReLU(), nn.MaxPool2d(2, return_indices=True)],  # the indices would be the pooled ReLU's
        [nn.ReLU(), nn.AvgPool2d(2)],  # an average does not commute with ReLU
        [nn.MaxPool2d(2), nn.ReLU()],  # already pooled first
    ],
    ids=["tanh", "sigmoid", "negative-slope", "indices", "average", "pooled-first"],
)
def test_what_would_change_a_number_is_left_alone(layers: list[nn.Module]) -> None:
    module = nn.Sequential(nn.Conv2d(1, 2, 3), *layers)
    before = [type(m) for m in module]
    assert pool_before_activation(module) == 0
    assert [type(m) for m in module] == before


def test_a_subclass_of_sequential_is_left_alone() -> None:
    class Logged(nn.Sequential):
        def forward(self, x: torch.Tensor) -> torch.Tensor:  # could use its layers in any order
            return super().forward(x)

    module = Logged(nn.ReLU(), nn.MaxPool2d(2))
    assert pool_before_activation(module) == 0
