"""The divergence watch alone: which vectors are finite, what each policy does with the rest, and what a
non-finite test loss is blamed on."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from netfl.backend import Diverged, Evaluation
from netfl.learn.federation.divergence_watch import DivergenceWatch, all_finite, kept, require_finite

NAN, INF = float("nan"), float("inf")


def test_all_finite_sees_nan_inf_and_an_overflowing_sum() -> None:
    big = torch.full((4,), 3e38)  # finite values whose float32 sum overflows: checked element by element
    vectors = [torch.ones(3), torch.tensor([1.0, NAN]), torch.tensor([-INF]), big, torch.zeros(0)]
    assert all_finite(vectors) == [True, False, False, True, True]
    assert all_finite([]) == []


def test_kept_drops_the_refused_rows_of_every_column() -> None:
    assert kept([True, False, True], [1, 2, 3], "abc") == ([1, 3], ["a", "c"])


def test_stop_raises_naming_the_clients_once_each_in_order() -> None:
    with pytest.raises(Diverged) as info:
        DivergenceWatch("stop").nonfinite("update", 4, [7, 2, 7])
    assert (info.value.divergence.where, info.value.divergence.round_index) == ("update", 4)
    assert info.value.divergence.clients == (2, 7)


def test_skip_update_counts_what_it_drops() -> None:
    watch = DivergenceWatch("skip_update")
    deltas = [torch.ones(2), torch.tensor([NAN, 0.0]), torch.ones(2), torch.ones(2)]
    buffers = [None, None, torch.tensor([INF]), torch.zeros(1)]  # a non-finite buffer makes its update so
    assert watch.finite_updates(3, [0, 1, 2, 3], deltas, buffers) == [True, False, False, True]
    assert watch.updates_skipped == 2
    reports = {5: np.array([1.0, 2.0]), 6: np.array([1.0, NAN])}
    assert list(watch.finite_reports(3, reports, trained=False)) == [5] and watch.updates_skipped == 3


def test_non_finite_reports_are_losses_unless_the_probe_trained() -> None:
    for trained, where in ((False, "loss"), (True, "update")):
        with pytest.raises(Diverged) as info:
            DivergenceWatch().finite_reports(1, {0: np.array([INF])}, trained)
        assert info.value.divergence.where == where


def test_an_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="stop, skip_update"):
        DivergenceWatch("ignore")


def test_global_models_and_test_losses_always_stop_the_run() -> None:
    require_finite([torch.ones(2)], 0, ())
    with pytest.raises(Diverged) as info:
        require_finite([torch.ones(2), torch.tensor([NAN])], 6, (1, 3))
    assert (info.value.divergence.where, info.value.divergence.clients) == ("global_model", (1, 3))
    watch = DivergenceWatch("skip_update")
    watch.check_evaluations([Evaluation(0.5, 1.0)])
    watch.made_by = (9, (4,))
    with pytest.raises(Diverged) as info:
        watch.check_evaluations([Evaluation(0.5, 1.0), Evaluation(0.1, math.inf)])
    d = info.value.divergence
    assert (d.where, d.round_index, d.clients) == ("evaluation", 9, (4,))
