"""LEAF's JSON read one sample at a time (netfl/learn/data/leaf_json.py): the same arrays and the same refusals as
json.loads gave, at a peak of a few times the file's size rather than about ten."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from netfl.errors import DataError
from netfl.learn.data.leaf_json import loads_leaf
from netfl.learn.data.user_data import read_leaf


def _write(path: Path, users: dict[str, tuple[list, list]], **dumps) -> Path:
    data = {
        "users": list(users),
        "num_samples": [len(x) for x, _ in users.values()],
        "user_data": {u: {"x": x, "y": y} for u, (x, y) in users.items()},
    }
    path.write_text(json.dumps(data, **dumps))
    return path


def _old_reader(file: Path) -> dict[str, np.ndarray]:
    """What netfl built from a LEAF feature file with json.loads, before this reader."""
    data = json.loads(file.read_text())
    users = [data["user_data"][u] for u in data["users"]]
    return {
        "x": np.asarray([x for u in users for x in u["x"]], dtype=np.float32),
        "y": np.asarray([y for u in users for y in u["y"]], dtype=np.int64),
        "client": np.concatenate([np.full(len(u["x"]), i, dtype=np.int64) for i, u in enumerate(users)]),
    }


def test_a_feature_file_gives_exactly_the_arrays_json_loads_gave(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    users = {}
    for i, n in enumerate([3, 1, 0, 4, 2]):  # a user without samples as well
        rows = [[float(v) for v in rng.normal(0, 10.0 ** rng.integers(-45, 40), 7)] for _ in range(n)]
        for row in rows[:1]:
            row[:3] = [0, -7, 1e-320]  # integers and a subnormal double, as json writes them
        users[f"f{i:04d}_0{i}"] = (rows, [int(v) for v in rng.integers(0, 62, n)])
    for indent in (None, 2):  # compact, and spread over lines with spaces
        file = _write(tmp_path / f"data{indent}.json", users, indent=indent)
        leaf = read_leaf(file)
        old = _old_reader(file)
        assert set(leaf.arrays) == set(old) and leaf.users == tuple(users)
        for key, value in old.items():
            assert leaf.arrays[key].dtype == value.dtype and leaf.arrays[key].shape == value.shape
            assert np.array_equal(leaf.arrays[key], value, equal_nan=True)
        assert leaf.arrays["x"].shape == (10, 7) and leaf.arrays["client"].tolist() == [0, 0, 0, 1, 3, 3, 3, 3, 4, 4]


def test_the_parse_is_json_loads_but_for_rows_of_numbers(tmp_path: Path) -> None:
    text = json.dumps(
        {
            "users": ["a", "b", "c", "d"],
            "extra": {"x": [[1.5]], "nested": [1, {"k": None}]},
            "user_data": {
                "a": {"y": [1, 2], "x": [[1.5, 2], [3, 4.25]], "z": True},
                "b": {"x": [[1.0, True]], "y": [0]},  # a boolean: not a number row, left as json gave it
                "c": {"x": [[1.0], [2.0, 3.0]], "y": [0, 1]},  # two lengths: left as lists
                "d": {"x": ["to be", "or not"], "y": ["o", "t"]},
            },
        }
    )
    got, expected = loads_leaf(text), json.loads(text)
    block = got["user_data"]["a"].pop("x")
    assert block.dtype == np.float32 and block.tolist() == [[1.5, 2.0], [3.0, 4.25]]
    del expected["user_data"]["a"]["x"]
    c = got["user_data"]["c"]["x"]
    assert [r.tolist() for r in c] == [[1.0], [2.0, 3.0]]  # float32 rows in a list: same lengths as json's
    got["user_data"]["c"]["x"] = expected["user_data"]["c"]["x"]
    assert got == expected


@pytest.mark.parametrize(
    "text",
    [
        '{"users": ["u"], "user_data": {"u": {"x": [[1.0, 2.0] [3.0]], "y": [0, 1]}}}',  # a comma missing
        '{"users": ["u"], "user_data": {"u": {"x": [[1.0, 2.0], [3.0, 4',  # cut short
        '{"users": ["u"], "user_data": {"u": {"x" [[1.0]], "y": [0]}}}',  # a colon missing
        '{"users": ["u"], "user_data": {"u": {"x": [[1.0]], "y": [0]}}} {}',  # more after the data
        '{"users": ["u"], "user_data": {"u": {"x": [[1.0]] "y": [0]}}}',
        '{"users": ["u"], "user_data": {"u": {"x": [[1.0], ], "y": [0]}}}',
        '{"users": ["u"], "user_data": {u: {"x": [[1.0]], "y": [0]}}}',
        '{"users": ["u"], "user_data": {"u": {"x": [[nan]], "y": [0]}}}',
        '\ufeff{"users": []}',
        "",
    ],
)
def test_a_malformed_file_is_refused_with_json_s_own_message_naming_the_file(tmp_path: Path, text: str) -> None:
    file = tmp_path / "bad.json"
    file.write_text(text, encoding="utf-8")
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    with pytest.raises(DataError) as caught:
        read_leaf(file)
    assert str(caught.value) == f"{file}: not a readable JSON file ({expected.value})"


def test_the_arrays_are_sized_against_the_data_budget_before_they_are_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = _write(tmp_path / "d.json", {"u1": ([[0.5] * 100] * 30, [1] * 30), "u2": ([[0.5] * 100] * 20, [0] * 20)})
    # x alone is 50 x 100 x 4 B = 20 kB, with y and client more, and its test share (a fifth) set aside while the
    # samples are split
    monkeypatch.setenv("NETFL_DATA_BUDGET", "24kB")
    with pytest.raises(DataError) as caught:
        read_leaf(file)
    message = str(caught.value)
    assert message.startswith(
        f"{file}: its arrays take 20.8 kB once loaded and 24.8 kB while they load -- x 50 x 100 float32 (20 kB); y 50"
    )
    assert "over the data budget of 24 kB (NETFL_DATA_BUDGET)" in message
    monkeypatch.setenv("NETFL_DATA_BUDGET", "25kB")
    assert read_leaf(file).arrays["x"].shape == (50, 100)


@pytest.mark.slow
def test_a_feature_file_is_read_at_under_three_times_its_size(tmp_path: Path) -> None:
    """json.loads held a Python float per number: a 204 MB file peaked at 2.1 GB."""
    rng = np.random.default_rng(0)
    file = tmp_path / "femnist_like.json"
    users = [f"f{i:04d}" for i in range(40)]
    with file.open("w") as out:  # about 25 MB: 40 writers of 100 samples of 784 pixels, FEMNIST's layout
        out.write(f'{{"users": {json.dumps(users)}, "num_samples": {json.dumps([100] * 40)}, "user_data": {{')
        for i, user in enumerate(users):
            rows = np.round(rng.random((100, 784)), 4).tolist()
            labels = rng.integers(0, 62, 100).tolist()
            out.write(("," if i else "") + json.dumps(user) + ": " + json.dumps({"x": rows, "y": labels}))
        out.write("}}")
    size = file.stat().st_size
    assert 20e6 < size < 30e6
    tracemalloc.start()
    try:
        leaf = read_leaf(file)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert leaf.arrays["x"].shape == (4000, 784) and leaf.arrays["x"].dtype == np.float32
    assert peak < 3 * size, f"peak {peak / 1e6:.1f} MB reading a {size / 1e6:.1f} MB file"
