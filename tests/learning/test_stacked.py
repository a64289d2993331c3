"""Stacked local SGD (netfl.learn.stacked) against one job at a time."""

from __future__ import annotations

import pytest
import torch

from netfl.learn import stacked
from netfl.learn.models import build_model
from netfl.learn.params import ParamLayout
from netfl.learn.stacked import FusedMLP, train_stacked
from netfl.learn.training import local_sgd, minibatch_indices


def _data(shape: tuple[int, int, int], n: int = 60, classes: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    return torch.rand(n, *shape, generator=g), torch.randint(0, classes, (n,), generator=g)


def _jobs(n: int, steps: list[int], batch: int) -> list[torch.Tensor]:
    """Each job's minibatches over the whole set, from its own generator (as the learner draws them)."""
    return [minibatch_indices(n, batch, s, torch.Generator().manual_seed(10 + j)) for j, s in enumerate(steps)]


def _one_by_one(model, layout, start, x, y, minibatches, lr, weight_decay):
    """Each job through local_sgd on exactly its own minibatches (a generator replaying them)."""
    ends = []
    for rows in minibatches:
        w = start.clone()
        for idx in rows:
            w.requires_grad_(True)
            loss = torch.nn.functional.cross_entropy(
                torch.func.functional_call(model, layout.unflatten(w), (x[idx],)), y[idx]
            )
            (g,) = torch.autograd.grad(loss, w)
            with torch.no_grad():
                w = w - lr * (g + weight_decay * w)
        ends.append(w.detach())
    return torch.stack(ends)


@pytest.mark.parametrize(
    "name,hidden,fused",
    [("logistic", (), True), ("mlp", (16, 8), True), ("mlp_softmax", (8,), False), ("lenet5", (), False)],
)
@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_stacked_equals_one_job_at_a_time(name, hidden, fused, weight_decay, monkeypatch) -> None:
    shape = (1, 8, 8)
    x, y = _data(shape)
    torch.manual_seed(0)
    model = build_model(name, shape, 4, hidden=hidden)
    layout = ParamLayout.of(model)
    assert (FusedMLP.of(model, layout) is not None) == fused
    start = layout.flatten(model)
    # unequal lengths, in no particular order; a tiny chunk budget puts them in several chunks
    minibatches = _jobs(len(x), [3, 7, 1, 5, 5, 2], batch=6)
    monkeypatch.setattr(stacked, "CPU_CHUNK_BYTES", 2 * start.numel() * start.element_size())
    together = torch.stack(train_stacked(model, layout, start, x, y, minibatches, lr=0.3, weight_decay=weight_decay))
    alone = _one_by_one(model, layout, start, x, y, minibatches, 0.3, weight_decay)
    torch.testing.assert_close(together, alone, rtol=1e-5, atol=1e-6)
    assert not torch.equal(together[0], together[1])
    assert torch.equal(layout.flatten(model), start)  # the model itself is only a recipe: never trained


def test_stacked_matches_local_sgd_with_its_generator() -> None:
    """The reference local_sgd draws the same minibatches from the same generator seed."""
    shape = (1, 4, 4)
    x, y = _data(shape, n=30)
    torch.manual_seed(1)
    model = build_model("mlp", shape, 4, hidden=(12,))
    layout = ParamLayout.of(model)
    start = layout.flatten(model)
    minibatches = _jobs(len(x), [4, 9], batch=8)
    together = torch.stack(train_stacked(model, layout, start, x, y, minibatches, lr=0.2, weight_decay=0.0))
    for j, steps in enumerate([4, 9]):
        alone = local_sgd(
            model,
            layout,
            start,
            x,
            y,
            steps=steps,
            batch_size=8,
            lr=0.2,
            weight_decay=0.0,
            generator=torch.Generator().manual_seed(10 + j),
        )
        torch.testing.assert_close(together[j], alone, rtol=1e-5, atol=1e-6)


def test_fused_kernel_only_takes_plain_linear_relu_stacks() -> None:
    shape = (1, 4, 4)
    for model in (
        torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 4, bias=False)),
        torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 8), torch.nn.Tanh(), torch.nn.Linear(8, 4)),
        torch.nn.Sequential(torch.nn.Linear(16, 4)),
        build_model("cnn", shape, 4),
    ):
        assert FusedMLP.of(model, ParamLayout.of(model)) is None
