"""Natural partitions: each device holds one real client's samples, with a stated rule when the numbers differ."""

from __future__ import annotations

import numpy as np
import pytest

from netfl.learn.data.partition import natural_parts


def _clients() -> np.ndarray:
    return np.array([2, 0, 1, 2, 2, 0, 3, 3, 3, 3, 1])  # sizes: 0 -> 2, 1 -> 2, 2 -> 3, 3 -> 4


def test_as_many_devices_as_clients_each_device_holds_its_client_in_order() -> None:
    parts, chosen = natural_parts(_clients(), 4, "random", np.random.default_rng(0))
    assert chosen.tolist() == [0, 1, 2, 3]
    assert [p.tolist() for p in parts] == [[1, 5], [2, 10], [0, 3, 4], [6, 7, 8, 9]]


@pytest.mark.parametrize("pick,expected", [("first", [0, 1]), ("largest", [2, 3])])
def test_fewer_devices_take_the_first_or_largest_clients(pick: str, expected: list[int]) -> None:
    parts, chosen = natural_parts(_clients(), 2, pick, np.random.default_rng(0))
    assert chosen.tolist() == expected
    assert sorted(len(p) for p in parts) == sorted(np.bincount(_clients())[expected].tolist())


def test_a_random_pick_is_a_seeded_draw_in_ascending_order() -> None:
    picks = {tuple(natural_parts(_clients(), 2, "random", np.random.default_rng(s))[1]) for s in range(30)}
    assert len(picks) > 1 and all(a < b for a, b in picks)
    again = natural_parts(_clients(), 2, "random", np.random.default_rng(7))[1]
    assert again.tolist() == natural_parts(_clients(), 2, "random", np.random.default_rng(7))[1].tolist()


def test_more_devices_than_clients_is_refused_with_the_counts() -> None:
    with pytest.raises(ValueError, match="5 devices but the data names 4 clients: each device holds one real client"):
        natural_parts(_clients(), 5, "first", np.random.default_rng(0))
