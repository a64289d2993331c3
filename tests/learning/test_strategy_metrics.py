"""Each strategy's metrics beside its new vector (``Aggregate``), against hand computations; the learner's record of
them; a strategy that returns a bare tensor; and algorithm.csv as written."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest
import torch
from learn_support import ctx, make, task_setup, vec

from netfl.backend import RoundContext
from netfl.learn.data.datasets import Dataset
from netfl.learn.federation.algorithms import ALGORITHMS, Aggregate, ClientInfo, ClientUpdate, as_aggregate
from netfl.learn.federation.learner import Learner
from netfl.learn.federation.strategy_metrics import AggregationMetrics
from netfl.registry.learning_params import LocalSpec
from netfl.results.algorithm_file import write_algorithm
from netfl.rng import RandomStreams


def metrics(strategy, x, updates, context) -> dict:
    result = strategy.aggregate(x, updates, context)
    assert isinstance(result, Aggregate)
    return dict(result.metrics)


def same(got: dict, expected: dict) -> None:
    """Equal key by key, in order; floats to 1e-12, NaN equal to NaN."""
    assert list(got) == list(expected)
    for name, value in expected.items():
        if isinstance(value, float) and math.isnan(value):
            assert math.isnan(got[name]), name
        else:
            assert got[name] == pytest.approx(value, rel=0, abs=1e-12), name


def test_fedavg_counts_updates_and_samples() -> None:
    s = make("fedavg", ClientInfo((10, 30, 5), 0.1))
    updates = [ClientUpdate(0, 10, vec(1.0), 0), ClientUpdate(1, 30, vec(2.0), 0)]
    same(metrics(s, vec(0.0), updates, ctx(0, 2)), {"updates": 2, "samples": 40})
    same(metrics(s, vec(0.0), [], ctx(1)), {"updates": 0, "samples": 0})


def test_fedavg_known_and_unbiased_weight_sum_is_the_inverse_probability_mass() -> None:
    clients = ClientInfo((1, 1, 1, 1), 0.1, participation=(0.5, 0.25, 1.0, 1.0))
    updates = [ClientUpdate(0, 1, vec(1.0), 0, 0.1), ClientUpdate(1, 1, vec(1.0), 0, 0.1)]
    # sum_k 1 / (N p_k) = 1/(4 * 0.5) + 1/(4 * 0.25) = 0.5 + 1
    for name in ("fedavg_known", "fedavg_unbiased"):
        same(metrics(make(name, clients), vec(0.0), updates, ctx(0, 2)), {"updates": 2, "weight_sum": 1.5})
    same(metrics(make("fedavg_all", clients), vec(0.0), updates, ctx(0, 2)), {"updates": 2, "weight_sum": 0.5})


def test_fedau_reports_the_intervals_it_weighs_with() -> None:
    s = make("fedau", ClientInfo((1, 1, 1), 0.1))
    one = [ClientUpdate(0, 1, vec(1.0), 0)]
    # round 0: nothing recorded, every w = 1; client 0 records interval 1, the others have missed 1 round
    same(metrics(s, vec(0.0), one, ctx(0, 1)), {"updates": 1, "interval_mean": 1.0, "interval_max": 1.0})
    # round 1: w = [1, 1, 1]; client 1 records 1 + 1 = 2
    same(
        metrics(s, vec(0.0), [ClientUpdate(1, 1, vec(1.0), 1)], ctx(1, 1)),
        {"updates": 1, "interval_mean": 1.0, "interval_max": 1.0},
    )
    # round 2: w = [1, 2, 1]; client 2 records 2 + 1 = 3
    same(
        metrics(s, vec(0.0), [ClientUpdate(2, 1, vec(1.0), 2)], ctx(2, 1)),
        {"updates": 1, "interval_mean": 4 / 3, "interval_max": 2.0},
    )
    # round 3, nothing arrives: w = [1, 2, 3]
    same(metrics(s, vec(0.0), [], ctx(3)), {"updates": 0, "interval_mean": 2.0, "interval_max": 3.0})


def test_fedau_cutoff_records_k_for_clients_that_never_come() -> None:
    s = make("fedau", ClientInfo((1, 1), 0.1), K=2)
    metrics(s, vec(0.0), [], ctx(0))  # every client missed 1
    metrics(s, vec(0.0), [], ctx(1))  # missed 2 = K: each records 2
    same(metrics(s, vec(0.0), [], ctx(2)), {"updates": 0, "interval_mean": 2.0, "interval_max": 2.0})


def test_mifa_reports_clients_in_memory_and_the_direction() -> None:
    gamma = 0.1
    s = make("mifa", ClientInfo((1, 1, 1), gamma), server_lr=1.0)
    # client 0: delta = (0.03, -0.04) -> Delta = -delta / gamma = (-0.3, 0.4); G = Delta / 3, ||G|| = 0.5 / 3
    first = [ClientUpdate(0, 1, vec(0.03, -0.04), 0, gamma), ClientUpdate(0, 1, vec(0.03, -0.04), 0, gamma)]
    same(
        metrics(s, vec(0.0, 0.0), first, ctx(0, 2)),
        {"updates": 1, "in_memory": 1, "stepped": 1, "direction_norm": 0.5 / 3},
    )
    # client 1: Delta = (-0.6, -0.8); memory (-0.3, 0.4), (-0.6, -0.8), 0 -> G = (-0.3, -0.4 / 3)
    second = [ClientUpdate(1, 1, vec(0.06, 0.08), 1, gamma)]
    same(
        metrics(s, vec(0.0, 0.0), second, ctx(1, 1)),
        {"updates": 1, "in_memory": 2, "stepped": 1, "direction_norm": math.hypot(0.3, 0.4 / 3)},
    )
    # nothing arrives: the remembered G again
    same(
        metrics(s, vec(0.0, 0.0), [], ctx(2)),
        {"updates": 0, "in_memory": 2, "stepped": 1, "direction_norm": math.hypot(0.3, 0.4 / 3)},
    )


def test_mifa_waiting_for_all_takes_no_step() -> None:
    s = make("mifa", ClientInfo((1, 1), 0.1), wait_for_all=True)
    waiting = metrics(s, vec(0.0), [ClientUpdate(0, 1, vec(0.1), 0, 0.1)], ctx(0, 1))
    same(waiting, {"updates": 1, "in_memory": 1, "stepped": 0, "direction_norm": math.nan})
    # client 1 arrives: Delta = (-1), (-2); G = -1.5
    full = metrics(s, vec(0.0), [ClientUpdate(1, 1, vec(0.2), 1, 0.1)], ctx(1, 1))
    same(full, {"updates": 1, "in_memory": 2, "stepped": 1, "direction_norm": 1.5})


def test_fed_cvar_reports_the_threshold_after_the_round() -> None:
    s = make("fed_cvar", ClientInfo((1,) * 3, 0.1))
    x = vec(1.0, 2.0, 0.0)  # (theta, t)
    same(metrics(s, x, [ClientUpdate(2, 1, vec(0.5, -1.0, 0.25), 0)], ctx(0, 1)), {"updates": 1, "t": 0.25})
    two = [ClientUpdate(0, 1, vec(1.0, 0.0, 1.0), 0), ClientUpdate(1, 9, vec(0.0, 2.0, -0.5), 0)]
    same(metrics(s, x, two, ctx(1, 2)), {"updates": 2, "t": 0.25})  # 0 + mean(1, -0.5)
    same(metrics(s, vec(1.0, 2.0, -0.75), [], ctx(2)), {"updates": 0, "t": -0.75})


def test_afa_cd_reports_staleness_steps_and_the_gradient() -> None:
    s = make("afa_cd", ClientInfo((1,) * 4, local_lr=0.1))
    updates = [
        ClientUpdate(0, 1, vec(-0.2, 0.0), 7, 0.1, 2),  # fresh, K = 2: G = (1, 0)
        ClientUpdate(3, 1, vec(0.0, -1.2), 5, 0.1, 4),  # 2 versions stale, K = 4: G = (0, 3)
    ]
    got = metrics(s, vec(0.0, 0.0), updates, ctx(7, 2))
    expected = {"updates": 2, "staleness_mean": 1.0, "staleness_max": 2, "steps_mean": 3.0}
    same(got, {**expected, "gradient_norm": math.hypot(0.5, 1.5)})
    nothing = {"updates": 0, "staleness_mean": math.nan, "staleness_max": math.nan, "steps_mean": math.nan}
    same(metrics(s, vec(0.0, 0.0), [], ctx(8)), {**nothing, "gradient_norm": math.nan})


def test_afa_cs_reports_the_mean_of_every_workers_latest_gradient() -> None:
    s = make("afa_cs", ClientInfo((1, 1), local_lr=0.1))
    metrics(s, vec(0.0, 0.0), [ClientUpdate(0, 1, vec(-0.2, 0.0), 0, 0.1, 2)], ctx(0, 1))  # memory (1, 0), 0
    got = metrics(s, vec(0.0, 0.0), [ClientUpdate(1, 1, vec(0.0, -0.4), 0, 0.1, 1)], ctx(1, 1))  # (1,0), (0,4)
    # G_t = mean of (1, 0) and (0, 4) = (0.5, 2)
    same(got, {"updates": 1, "staleness_mean": 1.0, "staleness_max": 1, "steps_mean": 1.0, "gradient_norm": 4.25**0.5})


def test_fedbuff_and_fedasync_report_staleness_and_their_weights() -> None:
    clients = ClientInfo((1,) * 4, local_lr=0.1)
    updates = [ClientUpdate(0, 1, vec(0.4), 3), ClientUpdate(1, 1, vec(0.8), 0)]  # at version 3: s = 0 and 3
    same(
        metrics(make("fedbuff", clients), vec(0.0), updates, ctx(3, 2)),
        {"updates": 2, "staleness_mean": 1.5, "staleness_max": 3, "weight_mean": (1 + 0.5) / 2},
    )
    s = make("fedasync", clients, alpha=0.6, staleness="polynomial", a=0.5)
    stale = ClientUpdate(0, 1, vec(1.0), 1, start=vec(0.0))  # at version 4: s = 3, alpha_t = 0.6 * 4^-0.5
    same(
        metrics(s, vec(0.0), [stale], ctx(4, 1)),
        {"updates": 1, "staleness_mean": 3.0, "staleness_max": 3, "alpha_mean": 0.3},
    )


def test_fednova_reports_the_effective_steps() -> None:
    s = make("fednova", ClientInfo((1, 3), local_lr=0.1))
    updates = [ClientUpdate(0, 1, vec(1.0), 0, 0.1, 2), ClientUpdate(1, 3, vec(1.0), 0, 0.1, 6)]
    # p = (1/4, 3/4): tau_eff = 2/4 + 18/4 = 5
    same(metrics(s, vec(0.0), updates, ctx(0, 2)), {"updates": 2, "tau_eff": 5.0, "steps_min": 2, "steps_max": 6})


def test_scaffold_reports_the_control_variate() -> None:
    s = make("scaffold", ClientInfo((1, 1), local_lr=0.1))
    assert metrics(s, vec(0.0), [], ctx(0)) == {"updates": 0, "control_norm": 0.0, "control_change_norm": 0.0}
    # one step at 0.1 moved client 0 by 0.5: Delta c_0 = -0.5 / 0.1 = -5; c = -5 / 2
    got = metrics(s, vec(0.0), [ClientUpdate(0, 1, vec(0.5), 0, 0.1, 1)], ctx(0, 1))
    same(got, {"updates": 1, "control_norm": 2.5, "control_change_norm": 2.5})


def test_mmfl_reports_the_weight_mass_and_the_smallest_probability() -> None:
    s = make("mmfl", ClientInfo((2, 2), local_lr=0.1, task_sizes=((1, 3), (2, 2))), sampling="random")
    s._p = {(0, 0): 0.25, (1, 0): 0.5}
    updates = [ClientUpdate(0, 1, vec(1.0), 0, task=0), ClientUpdate(1, 3, vec(1.0), 0, task=0)]
    # d = (1/4, 3/4): weights 0.25 / 0.25 + 0.75 / 0.5
    same(metrics(s, vec(0.0), updates, ctx(0, 2)), {"updates": 2, "weight_sum": 2.5, "p_min": 0.25})
    same(metrics(s, vec(0.0), [], ctx(1)), {"updates": 0, "weight_sum": 0.0, "p_min": math.nan})


def test_metrics_change_no_vector() -> None:
    """The vector is the rule's arithmetic written out (FedAvg by samples: 1 + 4/4 + 8 * 3/4)."""
    s = make("fedavg", ClientInfo((1, 3), 0.1))
    updates = [ClientUpdate(0, 1, vec(4.0), 0), ClientUpdate(1, 3, vec(8.0), 0)]
    assert s.aggregate(vec(1.0), updates, ctx(0, 2)).vector.tolist() == [1.0 + 1.0 + 6.0]


# ---------------------------------------------------------------- the contract


class Bare(ALGORITHMS["fedavg"]):
    """A strategy written before metrics: it returns the vector alone."""

    def aggregate(self, x, updates, context):
        return super().aggregate(x, updates, context).vector


def test_a_bare_tensor_is_a_vector_without_metrics() -> None:
    s = Bare(Bare.Params(), ClientInfo((1, 1), 0.1))
    result = as_aggregate(s.aggregate(vec(0.0), [ClientUpdate(0, 1, vec(2.0), 0)], ctx(0, 1)), s)
    assert result.vector.tolist() == [2.0] and result.metrics == {}


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        ([1.0], "returned list; return the next global vector"),
        (Aggregate([1.0]), "returned Aggregate with a list vector"),
        (Aggregate(vec(0.0), {"updates": "two"}), "metric 'updates' is str 'two'; a metric must be a number"),
        (Aggregate(vec(0.0), {"stepped": True}), "metric 'stepped' is bool"),
        (Aggregate(vec(0.0), {"round": 1}), "metric 'round': a metric's name must be"),
    ],
)
def test_anything_else_is_refused_naming_the_strategys_aggregate(returned, message) -> None:
    class Wrong(ALGORITHMS["fedavg"]):
        def aggregate(self, x, updates, context):
            return returned

    s = Wrong(Wrong.Params(), ClientInfo((1,), 0.1))
    with pytest.raises(TypeError, match=message) as caught:
        as_aggregate(s.aggregate(vec(0.0), [], ctx(0)), s)
    assert f"{__file__}:" in str(caught.value)  # the file (and line) of Wrong.aggregate


# ------------------------------------------------------------- the learner's record


PARTS = [np.arange(0, 10), np.arange(10, 26), np.arange(26, 48)]


def learner(strategy) -> Learner:
    g = torch.Generator().manual_seed(0)
    x, xt = torch.rand(48, 1, 2, 2, generator=g), torch.rand(12, 1, 2, 2, generator=g)
    data = Dataset("toy", x, torch.arange(48) % 3, xt, torch.arange(12) % 3, 3, (1, 2, 2))
    local = LocalSpec(steps=2, batch_size=4, lr=0.2)
    return Learner(
        [task_setup(data, PARTS, "logistic", [], local)],
        strategy=strategy,
        streams=RandomStreams(9),
        training_path="reference",
    )


def two_rounds(lrn: Learner) -> None:
    for index, clients in enumerate([(0, 2), ()]):
        jobs = tuple(lrn.submit(c, index).job for c in clients)
        lrn.aggregate(RoundContext(index, 10.0 * index + 0.5, clients, clients, jobs))


def test_the_learner_records_every_aggregation_and_a_checkpoint_keeps_them() -> None:
    lrn = learner(make("fedavg", ClientInfo(tuple(len(p) for p in PARTS), 0.2)))
    two_rounds(lrn)
    assert lrn.strategy_metrics == [
        AggregationMetrics(0.5, 0, 0, None, {"updates": 2, "samples": 10 + 22}),
        AggregationMetrics(10.5, 1, 0, None, {"updates": 0, "samples": 0}),
    ]
    again = learner(make("fedavg", ClientInfo(tuple(len(p) for p in PARTS), 0.2)))
    again.restore(lrn.state())
    assert again.strategy_metrics == lrn.strategy_metrics


def test_a_strategy_returning_a_bare_tensor_still_trains(tmp_path) -> None:
    """The same models as the strategy that reports metrics; its rows carry none, and algorithm.csv then holds the
    place columns alone."""
    bare = learner(Bare(Bare.Params(), ClientInfo(tuple(len(p) for p in PARTS), 0.2)))
    full = learner(make("fedavg", ClientInfo(tuple(len(p) for p in PARTS), 0.2)))
    two_rounds(bare)
    two_rounds(full)
    assert torch.equal(bare.global_vector, full.global_vector)
    assert [row.metrics for row in bare.strategy_metrics] == [{}, {}]
    write_algorithm(tmp_path / "algorithm.csv", bare.strategy_metrics)
    assert (tmp_path / "algorithm.csv").read_text().splitlines() == ["sim_time_s,round,task", "0.5,0,0", "10.5,1,0"]


def test_algorithm_csv_writes_counts_exact_floats_nan_and_edges(tmp_path) -> None:
    rows = [
        AggregationMetrics(1.25, 0, 0, None, {"updates": 2, "t": 0.1}),
        AggregationMetrics(2.5, 1, 1, 3, {"updates": 0, "t": math.nan, "extra": 1 / 3}),
    ]
    write_algorithm(tmp_path / "algorithm.csv", rows)
    with (tmp_path / "algorithm.csv").open() as f:
        assert list(csv.reader(f)) == [
            ["sim_time_s", "round", "task", "edge", "updates", "t", "extra"],
            ["1.25", "0", "0", "", "2", "0.1", ""],
            ["2.5", "1", "1", "3", "0", "nan", repr(1 / 3)],
        ]
