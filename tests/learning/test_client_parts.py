"""Every client's sample indices in one array (ClientParts): the narrowest type, and the same draws as before."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from netfl.learn.data import client_parts
from netfl.learn.data.client_parts import ClientParts, index_dtype, sample_parts, uniform_picks


@pytest.mark.parametrize(
    ("samples", "dtype"),
    [(1, np.uint16), (65_536, np.uint16), (65_537, np.int32), (2**31, np.int32), (2**31 + 1, np.int64)],
)
def test_indices_take_the_narrowest_type_that_holds_every_sample(samples: int, dtype) -> None:
    assert index_dtype(samples) == np.dtype(dtype)


def test_parts_keep_their_indices_narrow_and_read_them_as_32_bits_at_least() -> None:
    parts = ClientParts(np.array([3, 65_535, 0, 7], dtype=np.int64), np.array([0, 2, 4]))
    assert parts.indices.dtype == np.uint16 and parts.indices.tolist() == [3, 65_535, 0, 7]
    assert parts[0].dtype == np.int32 and parts[0].tolist() == [3, 65_535] and parts[1].tolist() == [0, 7]
    assert [p.tolist() for p in parts] == [[3, 65_535], [0, 7]] and parts.sizes.tolist() == [2, 2]
    assert torch.arange(70_000.0)[torch.from_numpy(parts[0])].tolist() == [3.0, 65_535.0]  # torch indexes with it
    assert ClientParts(np.array([65_536]), np.array([0, 1])).indices.dtype == np.int32
    assert ClientParts(np.array([2**31]), np.array([0, 1])).indices.dtype == np.int64
    assert ClientParts(np.array([-1, 2]), np.array([0, 2])).indices.dtype == np.int64  # kept for a check to refuse
    assert ClientParts(np.empty(0, dtype=np.int64), np.array([0, 0])).indices.dtype == np.int32


@pytest.mark.parametrize("samples", [5, 1797, 70_000])
def test_uniform_picks_are_one_whole_draw_made_in_bounded_steps(samples: int, monkeypatch) -> None:
    """Drawn 7 at a time (an odd step: the generator's spare 32 bits carry over), the picks and the generator's
    state afterwards are those of one ``integers`` call of 64-bit integers."""
    monkeypatch.setattr(client_parts, "_PICKS_PER_STEP", 7)
    whole, steps = np.random.default_rng(3), np.random.default_rng(3)
    expected = whole.integers(0, samples, size=100)
    picks = uniform_picks(steps, samples, 100)
    assert picks.dtype == index_dtype(samples) and picks.tolist() == expected.tolist()
    assert steps.random(3).tolist() == whole.random(3).tolist()


def test_sampled_iid_parts_are_the_whole_draw_of_before() -> None:
    """More devices than samples: each device's 4 picks are the generator's uniform integers in device order."""
    labels = np.arange(50) % 10
    parts = sample_parts(labels, 30, 4, "iid", np.random.default_rng(11))
    expected = np.random.default_rng(11).integers(0, 50, size=120)
    assert parts.indices.dtype == np.uint16 and parts.indices.tolist() == expected.tolist()
    assert parts.offsets.tolist() == list(range(0, 121, 4))


@pytest.mark.parametrize(("kind", "options"), [("dirichlet", {"alpha": 0.5}), ("classes", {"classes_per_client": 2})])
def test_sampled_label_skewed_parts_are_the_draws_of_before(kind: str, options: dict) -> None:
    """The label-skewed kinds deal each label's samples as they did with 64-bit slots and indices (the draws
    written out here as before); only the arrays' types are narrower."""
    labels = np.random.default_rng(0).integers(0, 10, size=300)
    parts = sample_parts(labels, 40, 5, kind, np.random.default_rng(5), **options)
    rng = np.random.default_rng(5)
    present = np.unique(labels)
    if kind == "dirichlet":
        mix = rng.dirichlet(np.full(10, 0.5), size=40)
    else:
        chosen = np.argsort(rng.random((40, 10)), axis=1)[:, :2]
        mix = np.zeros((40, 10))
        np.put_along_axis(mix, chosen, 0.5, axis=1)
    counts = rng.multinomial(5, mix / mix.sum(axis=1, keepdims=True))
    slot_label = np.repeat(np.tile(np.arange(10), 40), counts.ravel())
    expected = np.empty(200, dtype=np.int64)
    for position, label in enumerate(present):
        slots = np.flatnonzero(slot_label == position)
        pool = np.flatnonzero(labels == label)
        if len(slots) <= len(pool):
            expected[slots] = rng.permutation(pool)[: len(slots)]
        else:
            expected[slots] = pool[rng.integers(0, len(pool), size=len(slots))]
    assert parts.indices.dtype == np.uint16 and parts.indices.tolist() == expected.tolist()
