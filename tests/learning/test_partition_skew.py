"""Partition options: labels held exclusively by some clients, and quantity skew (hand-checked sizes)."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from netfl.assemble.learning import partition_options
from netfl.config import scenario_from_dict
from netfl.config.schema import PartitionSpec
from netfl.errors import ScenarioError
from netfl.learn.data.partition import partition_indices


def _labels(n_per_class: int = 100, num_classes: int = 10) -> np.ndarray:
    return np.random.default_rng(0).permutation(np.repeat(np.arange(num_classes), n_per_class))


def _check_disjoint_complete(parts: list[np.ndarray], n: int) -> None:
    allidx = np.concatenate(parts)
    assert len(np.unique(allidx)) == len(allidx) == n
    assert all(p.dtype == np.int64 and np.all(np.diff(p) > 0) for p in parts if len(p) > 1)


# ------------------------------------------------------------------------ exclusive


def test_exclusive_the_papers_setup() -> None:
    """K = 30, 100 samples per label: users 27-29 alone hold labels 8 and 9 (200 samples: 67, 67, 66);
    the other 27 share labels 0-7 iid (800 samples: 17 clients with 30, 10 with 29)."""
    y = _labels()
    parts = partition_indices(y, 30, "iid", np.random.default_rng(0), exclusive=[([27, 28, 29], [8, 9])])
    _check_disjoint_complete(parts, len(y))
    assert [len(p) for p in parts[27:]] == [67, 67, 66]
    assert sorted(len(p) for p in parts[:27]) == [29] * 10 + [30] * 17
    for i, p in enumerate(parts):
        held = set(y[p].tolist())
        assert held <= ({8, 9} if i >= 27 else set(range(8))), (i, held)
    # shared iid among the rare users: each of them sees both labels
    assert all(set(y[p].tolist()) == {8, 9} for p in parts[27:])


def test_exclusive_several_groups_in_given_order() -> None:
    """Client 4 alone holds all 100 samples of label 0; clients 2 and 0 split labels 1 and 2 (100 each)."""
    y = _labels()
    parts = partition_indices(
        y,
        6,
        "iid",
        np.random.default_rng(3),
        exclusive=[{"clients": [4], "labels": [0]}, {"clients": [2, 0], "labels": [2, 1]}],
    )
    _check_disjoint_complete(parts, len(y))
    assert np.array_equal(parts[4], np.flatnonzero(y == 0))
    assert len(parts[2]) == len(parts[0]) == 100
    assert np.array_equal(np.sort(np.concatenate([parts[0], parts[2]])), np.flatnonzero((y == 1) | (y == 2)))
    for i in (1, 3, 5):  # 700 samples of labels 3..9, iid: 234, 233, 233
        assert set(y[parts[i]].tolist()) <= set(range(3, 10))
    assert [len(parts[i]) for i in (1, 3, 5)] == [234, 233, 233]


def test_exclusive_with_classes_for_the_others() -> None:
    """The other clients use kind classes over the remaining labels only."""
    y = _labels()
    parts = partition_indices(y, 8, "classes", np.random.default_rng(1), classes_per_client=2, exclusive=[([7], [9])])
    assert set(y[parts[7]].tolist()) == {9} and len(parts[7]) == 100
    for p in parts[:7]:
        held = set(y[p].tolist())
        assert len(held) == 2 and 9 not in held


def test_exclusive_is_deterministic_and_seeded() -> None:
    y = _labels()
    ex = [([27, 28, 29], [8, 9])]
    a = partition_indices(y, 30, "iid", np.random.default_rng(5), exclusive=ex)
    b = partition_indices(y, 30, "iid", np.random.default_rng(5), exclusive=ex)
    c = partition_indices(y, 30, "iid", np.random.default_rng(6), exclusive=ex)
    assert all(np.array_equal(p, q) for p, q in zip(a, b))
    assert not all(np.array_equal(p, q) for p, q in zip(a, c))


def test_no_options_is_the_plain_kind() -> None:
    """Absent options change nothing: iid is still array_split of one permutation, draw for draw."""
    y = _labels()
    parts = partition_indices(y, 7, "iid", np.random.default_rng(9), exclusive=None, quantity_skew=None)
    expected = np.array_split(np.random.default_rng(9).permutation(len(y)), 7)
    assert all(np.array_equal(p, np.sort(e)) for p, e in zip(parts, expected))
    for kind, kw in [("dirichlet", {"alpha": 0.3}), ("classes", {"classes_per_client": 2}), ("by_label", {})]:
        a = partition_indices(y, 8, kind, np.random.default_rng(4), **kw)
        b = partition_indices(y, 8, kind, np.random.default_rng(4), exclusive=None, quantity_skew=None, **kw)
        assert all(np.array_equal(p, q) for p, q in zip(a, b))


@pytest.mark.parametrize(
    "exclusive, message",
    [
        ([([30], [8])], r"exclusive\[0\].clients: device 30 does not exist: devices are 0..29"),
        ([([-1], [8])], r"exclusive\[0\].clients\[0\]: must be >= 0 \(got -1\)"),
        ([([3], [10])], r"label 10 is not in the data set \(labels present: 0..9\)"),
        ([([3], [1]), ([4], [1])], r"exclusive\[1\].labels: label 1 is also given in exclusive\[0\]"),
        ([([3, 3], [1])], r"exclusive\[0\].clients: client 3 is given twice in this group"),
        ([([3], [1]), ([3], [2])], r"client 3 is also given in exclusive\[0\]"),
        ([([3], [])], r"exclusive\[0\].labels: List should have at least 1 item"),
        ([([3], [1.5])], r"exclusive\[0\].labels\[0\]: Input should be a valid integer"),
        ([(list(range(30)), [1])], r"every client is in a group, so labels \[0, 2, 3, 4, 5, 6, 7, 8, 9\]"),
        ([([1], list(range(10)))], "the groups take every label, so clients 0, 2..29 would hold nothing"),
        ([({"clients": [1]})], "missing 'labels'"),
    ],
)
def test_exclusive_refusals(exclusive: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        partition_indices(_labels(), 30, "iid", np.random.default_rng(0), exclusive=exclusive)


def test_exclusive_group_needs_a_sample_per_client() -> None:
    y = np.array([0, 0, 0, 1, 1, 2])
    with pytest.raises(ValueError, match="labels \\[2\\] have 1 samples for 2 clients"):
        partition_indices(y, 4, "iid", np.random.default_rng(0), exclusive=[([0, 1], [2])])


def test_exclusive_reports_a_kind_problem_among_the_others() -> None:
    with pytest.raises(ValueError, match=r"1..8 .* got 9 \(among the 29 clients and 8 labels outside"):
        partition_indices(
            _labels(), 30, "classes", np.random.default_rng(0), classes_per_client=9, exclusive=[([3], [1, 2])]
        )


# ------------------------------------------------------------------------ quantity skew


def test_quantity_skew_iid_ten_percent_hold_half() -> None:
    """1000 samples, 10 clients, 10 % hold 52.6 %: one client holds 526; the other 474 go 53 to six
    clients and 52 to three (largest remainder, ties to the lower index). The heavy client is the
    generator's first draw."""
    y = _labels()
    parts = partition_indices(y, 10, "iid", np.random.default_rng(0), quantity_skew=(0.1, 0.526))
    _check_disjoint_complete(parts, len(y))
    heavy = int(np.random.default_rng(0).choice(10, size=1, replace=False)[0])
    sizes = [len(p) for p in parts]
    assert sizes[heavy] == 526
    light = [s for i, s in enumerate(sizes) if i != heavy]
    assert light == [53] * 6 + [52] * 3


def test_quantity_skew_iid_several_heavy() -> None:
    """2000 samples, 20 clients, 25 % (5) hold 60 %: 240 each; the 15 others share 800: 5 x 54, 10 x 53."""
    y = _labels(200)
    parts = partition_indices(y, 20, "iid", np.random.default_rng(2), quantity_skew={"clients": 0.25, "share": 0.6})
    _check_disjoint_complete(parts, len(y))
    heavy = np.sort(np.random.default_rng(2).choice(20, size=5, replace=False))
    sizes = np.array([len(p) for p in parts])
    assert sizes[heavy].tolist() == [240] * 5
    assert sorted(np.delete(sizes, heavy).tolist()) == [53] * 10 + [54] * 5


def test_quantity_skew_classes_hand_checked() -> None:
    """4 clients holding both of 2 labels (100 samples each), 25 % hold 40 %: the heavy client gets
    40 of each label (80), every other client 20 of each (40)."""
    y = _labels(100, 2)
    parts = partition_indices(
        y, 4, "classes", np.random.default_rng(7), classes_per_client=2, quantity_skew=(0.25, 0.4)
    )
    _check_disjoint_complete(parts, len(y))
    heavy = int(np.random.default_rng(7).choice(4, size=1, replace=False)[0])
    for i, p in enumerate(parts):
        assert np.bincount(y[p], minlength=2).tolist() == ([40, 40] if i == heavy else [20, 20])


def test_quantity_skew_classes_mmfl_scale() -> None:
    """100 clients with 3 labels each: the 10 heavy clients hold 52.6 % of the 10000 samples, ~526 each."""
    y = _labels(1000)
    parts = partition_indices(
        y,
        100,
        "classes",
        np.random.default_rng(0),
        classes_per_client=3,
        quantity_skew={"clients": 0.1, "share": 0.526},
    )
    _check_disjoint_complete(parts, len(y))
    heavy = np.random.default_rng(0).choice(100, size=10, replace=False)
    sizes = np.array([len(p) for p in parts])
    assert abs(sizes[heavy].sum() - 5260) <= 30  # at most one sample per (client, label) cut
    assert np.all(np.abs(sizes[heavy] - 526) <= 3)
    assert np.all(np.abs(np.delete(sizes, heavy) - 4740 / 90) <= 3)
    assert all(len(np.unique(y[p])) == 3 for p in parts)


def test_quantity_skew_is_deterministic() -> None:
    y = _labels(1000)
    for kind, kw in [("iid", {}), ("classes", {"classes_per_client": 3})]:
        a = partition_indices(y, 50, kind, np.random.default_rng(11), quantity_skew=(0.2, 0.5), **kw)
        b = partition_indices(y, 50, kind, np.random.default_rng(11), quantity_skew=(0.2, 0.5), **kw)
        c = partition_indices(y, 50, kind, np.random.default_rng(12), quantity_skew=(0.2, 0.5), **kw)
        assert all(np.array_equal(p, q) for p, q in zip(a, b))
        assert not all(np.array_equal(p, q) for p, q in zip(a, c))


@pytest.mark.parametrize(
    "kind, kw, skew, message",
    [
        ("dirichlet", {"alpha": 0.5}, (0.1, 0.5), "quantity_skew works with kind 'iid' or 'classes', not 'dirichlet'"),
        ("by_label", {}, (0.1, 0.5), "not 'by_label'"),
        ("iid", {}, (0.01, 0.5), "0.01 of 10 clients rounds to 0 client"),
        ("iid", {}, (0.99, 0.5), "rounds to 10 client"),
        ("iid", {}, (0.1, 1.0), r"quantity_skew.share: must be < 1.0 \(got 1.0\)"),
        ("iid", {}, (0.0, 0.5), r"quantity_skew.clients: must be > 0.0 \(got 0.0\)"),
        # one heavy client of 10 with 3 labels each can hold its 3 labels at most: 30 %
        ("classes", {"classes_per_client": 3}, (0.1, 0.526), "the closest fit gives them 30.0%"),
    ],
)
def test_quantity_skew_refusals(kind: str, kw: dict, skew: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        partition_indices(_labels(), 10, kind, np.random.default_rng(0), quantity_skew=skew, **kw)


def test_quantity_skew_refuses_empty_clients() -> None:
    y = _labels(2, 10)  # 20 samples, 10 clients; 10 % hold 95 %: 19 for one, 1 sample for nine
    with pytest.raises(ValueError, match="leaves client"):
        partition_indices(y, 10, "iid", np.random.default_rng(0), quantity_skew=(0.1, 0.97))


def test_quantity_skew_with_exclusive_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot be combined"):
        partition_indices(
            _labels(), 10, "iid", np.random.default_rng(0), exclusive=[([1], [1])], quantity_skew=(0.1, 0.5)
        )


# ------------------------------------------------------------------------ YAML / scenario


BASE: dict[str, Any] = {
    "name": "tiny",
    "stop": {"rounds": 3},
    "task": {"dataset": {"name": "digits"}, "model": {"name": "logistic"}},
    "devices": [{"group": "phones", "count": 30, "compute": {"flops_per_s": "1GFLOPS"}, "link": {"uplink": "5Mbps"}}],
}


def _with_partition(partition: dict) -> dict:
    data = copy.deepcopy(BASE)
    data["task"]["dataset"]["partition"] = partition
    return data


def _problems(partition: dict) -> list[tuple[str, str]]:
    with pytest.raises(ScenarioError) as info:
        scenario_from_dict(_with_partition(partition))
    return info.value.problems


def test_yaml_options_parse_and_feed_partition_indices() -> None:
    s = scenario_from_dict(_with_partition({"kind": "iid", "exclusive": [{"clients": [27, 28, 29], "labels": [8, 9]}]}))
    part = s.task.dataset.partition
    assert part.exclusive[0].clients == [27, 28, 29] and part.exclusive[0].labels == [8, 9]
    y = _labels()
    from_spec = partition_indices(y, 30, part.kind, np.random.default_rng(0), **partition_options(part))
    from_pairs = partition_indices(y, 30, "iid", np.random.default_rng(0), exclusive=[([27, 28, 29], [8, 9])])
    assert all(np.array_equal(p, q) for p, q in zip(from_spec, from_pairs))

    s = scenario_from_dict(
        _with_partition(
            {"kind": "classes", "classes_per_client": 3, "quantity_skew": {"clients": "10%", "share": "52.6%"}}
        )
    )
    part = s.task.dataset.partition
    assert part.quantity_skew.clients == pytest.approx(0.1) and part.quantity_skew.share == pytest.approx(0.526)
    a = partition_indices(
        _labels(1000), 100, "classes", np.random.default_rng(0), classes_per_client=3, **partition_options(part)
    )
    b = partition_indices(
        _labels(1000), 100, "classes", np.random.default_rng(0), classes_per_client=3, quantity_skew=(0.1, 0.526)
    )
    assert all(np.array_equal(p, q) for p, q in zip(a, b))


@pytest.mark.parametrize(
    "partition, path, message",
    [
        (
            {"kind": "iid", "exclusive": [{"clients": [1], "labels": [0, 1]}, {"clients": [2], "labels": [1]}]},
            "task.dataset.partition",
            r"exclusive[1].labels: label 1 is also given in exclusive[0]",
        ),
        (
            {"kind": "iid", "exclusive": [{"clients": [1, 1], "labels": [0]}]},
            "task.dataset.partition",
            "exclusive[0].clients: client 1 is given twice in this group",
        ),
        (
            {"kind": "iid", "exclusive": [{"clients": [-1], "labels": [0]}]},
            "task.dataset.partition.exclusive[0].clients[0]",
            ">= 0",
        ),
        ({"kind": "iid", "exclusive": []}, "task.dataset.partition.exclusive", "at least 1"),
        (
            {"kind": "iid", "exclusive": [{"client": [1], "labels": [0]}]},
            "task.dataset.partition.exclusive[0].client",
            "unknown key",
        ),
        (
            {"kind": "iid", "quantity_skew": {"clients": 10, "share": "52.6%"}},
            "task.dataset.partition.quantity_skew.clients",
            "< 1",
        ),
        (
            {"kind": "iid", "quantity_skew": {"clients": "ten", "share": "52.6%"}},
            "task.dataset.partition.quantity_skew.clients",
            "not a fraction",
        ),
        (
            {"kind": "dirichlet", "alpha": 0.1, "quantity_skew": {"clients": 0.1, "share": 0.5}},
            "task.dataset.partition",
            "quantity_skew works with kind 'iid' or 'classes', not 'dirichlet'",
        ),
        (
            {
                "kind": "iid",
                "quantity_skew": {"clients": 0.1, "share": 0.5},
                "exclusive": [{"clients": [1], "labels": [0]}],
            },
            "task.dataset.partition",
            "cannot be combined with exclusive",
        ),
    ],
)
def test_yaml_refusals(partition: dict, path: str, message: str) -> None:
    problems = _problems(partition)
    found = [msg for p, msg in problems if p == path]
    assert found and message in found[0], problems


@pytest.mark.parametrize(
    "partition",
    [
        {"kind": "iid", "exclusive": [{"clients": [1], "labels": [0, 1]}, {"clients": [2], "labels": [1]}]},
        {"kind": "dirichlet", "alpha": 0.1, "quantity_skew": {"clients": 0.1, "share": 0.5}},
        {
            "kind": "iid",
            "quantity_skew": {"clients": 0.1, "share": 0.5},
            "exclusive": [{"clients": [1], "labels": [0]}],
        },
        {"kind": "dirichlet"},
        {"kind": "classes", "alpha": 0.5},
    ],
)
def test_the_splitter_refuses_by_the_scenarios_rule_in_its_words(partition: dict) -> None:
    """One rule, stated once (registry/partitions.py): partition_indices refuses what the scenario refuses, with
    the message netfl validate gives."""
    (yaml_path, yaml_message), *_ = _problems(partition)
    options = {k: v for k, v in partition.items() if k != "kind"}
    with pytest.raises(ValueError) as info:
        partition_indices(_labels(), 30, partition["kind"], np.random.default_rng(0), **options)
    assert str(info.value) == yaml_message


def test_partition_spec_defaults_unchanged() -> None:
    spec = PartitionSpec()
    assert spec.kind == "iid" and spec.exclusive is None and spec.quantity_skew is None


@pytest.mark.parametrize(
    "partition, path, message",
    [
        (
            {"kind": "classes", "classes_per_client": 4},
            "task.dataset.partition.classes_per_client",
            "has 3 labels; got 4",
        ),
        (
            {"kind": "iid", "exclusive": [{"clients": [0], "labels": [3]}]},
            "task.dataset.partition.exclusive[0].labels",
            "label 3 does not exist: ",
        ),
    ],
)
def test_labels_a_partition_names_in_users_data_are_checked_once_loaded(partition: dict, path: str, message: str):
    """The rule netfl validate applies to a built-in data set's labels, applied to the user's once they are known."""
    from netfl.assemble.learning import build_task
    from netfl.rng import RandomStreams

    data = _with_partition(partition)
    labels = np.arange(60) % 3
    data["task"]["dataset"] = {"loader": {"x": np.zeros((60, 4), np.float32), "y": labels}, "partition": partition}
    scenario = scenario_from_dict(data)  # the labels are not known before the data is loaded
    with pytest.raises(ScenarioError) as info:
        build_task(scenario, 0, RandomStreams(0), None)
    [(where, said)] = info.value.problems
    assert where == path and message in said, info.value.problems
