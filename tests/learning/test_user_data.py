"""Data sets of the user's own: .npz, .pt, a Python loader and LEAF's JSON layout, written here in each format;
the rules they become a Dataset by, and every refusal's message."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from netfl.errors import DataError
from netfl.learn.data.user_data import dataset_from_arrays, load_user_dataset, read_leaf


def _arrays(n: int = 30, classes: int = 3) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"x": rng.random((n, 4), dtype=np.float32), "y": np.arange(n) % classes}


def test_npz_pt_and_a_loader_give_the_same_data_set(tmp_path: Path) -> None:
    arrays = {**_arrays(), "x_test": np.ones((6, 4), np.float32), "y_test": np.array([0, 1, 2, 0, 1, 2])}
    np.savez(tmp_path / "d.npz", **arrays)
    torch.save({k: torch.from_numpy(np.asarray(v)) for k, v in arrays.items()}, tmp_path / "d.pt")
    (tmp_path / "loader.py").write_text(
        "import numpy as np\n"
        "def load(scale=1.0):\n"
        "    data = dict(np.load('d.npz'))\n"
        "    data['x'] = data['x'] * scale\n"
        "    return data\n"
    )
    npz = load_user_dataset("d.npz", base_dir=tmp_path)
    pt = load_user_dataset("d.pt", base_dir=tmp_path)
    import os

    cwd = os.getcwd()
    os.chdir(tmp_path)  # the loader opens its file relative to the working directory, as user code does
    try:
        loaded = load_user_dataset("loader.py:load", base_dir=tmp_path, args={"scale": 1.0})
    finally:
        os.chdir(cwd)
    for d in (npz, pt, loaded):
        assert d.input_shape == (4,) and d.num_classes == 3 and d.train_x.dtype == torch.float32
        assert d.train_y.dtype == torch.int64 and len(d.train_x) == 30 and len(d.test_x) == 6
        assert torch.equal(d.train_x, npz.train_x) and torch.equal(d.test_y, npz.test_y)
        assert d.client_names is None and not d.per_token


def test_without_a_test_split_a_stratified_seeded_share_is_held_out() -> None:
    a = dataset_from_arrays("a", _arrays(40, 4), test_fraction=0.25, seed=5)
    b = dataset_from_arrays("a", _arrays(40, 4), test_fraction=0.25, seed=5)
    assert len(a.test_y) == 8 and len(a.train_y) == 32  # round(10 x 0.25) = 2 per label (half to even)
    assert np.bincount(a.test_y.numpy()).tolist() == [2, 2, 2, 2]  # stratified by label
    assert torch.equal(a.test_x, b.test_x)  # the seed decides
    assert not torch.equal(a.test_x, dataset_from_arrays("a", _arrays(40, 4), test_fraction=0.25, seed=6).test_x)


def test_integer_inputs_are_token_ids_and_labels_may_be_per_token() -> None:
    rng = np.random.default_rng(1)
    tokens = rng.integers(0, 9, (20, 7), dtype=np.int32)
    labels = rng.integers(0, 9, (20, 7))
    labels[:, -1] = -100  # padding: ignored
    d = dataset_from_arrays("t", {"x": tokens, "y": labels, "num_classes": 12}, test_fraction=0.2)
    assert d.train_x.dtype == torch.int64 and d.per_token and d.num_classes == 12 and d.input_shape == (7,)


def test_input_shape_reshapes_each_sample() -> None:
    d = dataset_from_arrays("f", {"x": np.zeros((10, 16), np.float32), "y": np.arange(10) % 2}, input_shape=(1, 4, 4))
    assert d.input_shape == (1, 4, 4) and d.train_x.shape[1:] == (1, 4, 4)
    with pytest.raises(DataError, match=r"samples have 16 values \(16,\); input_shape \[3, 4, 4\] holds 48"):
        dataset_from_arrays("f", {"x": np.zeros((10, 16), np.float32), "y": np.arange(10) % 2}, input_shape=(3, 4, 4))


def test_client_ids_are_numbered_in_ascending_order_and_keep_only_training_samples() -> None:
    arrays = {**_arrays(12), "client": np.array(["b", "a", "c"] * 4), "x_test": np.zeros((2, 4), np.float32),
              "y_test": np.array([0, 1])}  # fmt: skip
    d = dataset_from_arrays("c", arrays)
    assert d.client_names == ("a", "b", "c")
    assert d.train_client.tolist() == [1, 0, 2] * 4
    split = dataset_from_arrays("c", {**_arrays(12), "client": np.arange(12) // 4}, test_fraction=0.5, seed=0)
    assert set(split.train_client.tolist()) == set(range(len(split.client_names)))  # renumbered 0..


@pytest.mark.parametrize(
    "arrays,message",
    [
        ([1, 2], "expected a mapping of arrays with keys x, y, client, x_test, y_test, num_classes"),
        ({"x": np.zeros((3, 2)), "labels": [0, 1, 0]}, "unknown key(s) labels; accepted: x, y, client"),
        ({"x": np.zeros((3, 2))}, "no 'y'; a data set needs x (the samples) and y (their labels)"),
        ({**_arrays(), "x_test": np.zeros((2, 4))}, "give both x_test and y_test, or neither"),
        ({"x": np.zeros((3, 2)), "y": [0, 1]}, "y has shape (2,); expected (3,) or (3, T)"),
        ({"x": np.zeros((3, 2)), "y": [0, -1, 1]}, "y holds label -1; labels are 0, 1, ..."),
        ({"x": np.zeros((3, 2)), "y": [0, 1.5, 1]}, "y must hold whole-number class labels"),
        ({"x": np.zeros((3, 2)), "y": [0, -100, 1]}, "y holds -100, which marks an ignored position in per-token"),
        ({"x": np.zeros((3, 2)), "y": ["cat", "dog", "cat"]}, "labels are class numbers 0, 1, ... (map names"),
        ({"x": np.array([["a"], ["b"], ["c"]]), "y": [0, 1, 0]}, "x holds <U1 values; netfl trains on numbers"),
        ({"x": np.zeros((20, 2)), "y": np.arange(20) % 4, "num_classes": 3}, "num_classes is 3, but a label reaches 3"),
        ({"x": np.full((4, 2), np.nan), "y": [0, 1, 0, 1]}, "x holds NaN or infinite values"),
        ({**_arrays(), "client": [0, 1]}, "client has shape (2,); expected (30,)"),
        ({"x": np.zeros((1, 2)), "y": [0]}, "too few to hold out a test set"),
    ],
)
def test_every_refusal_names_the_data_and_what_is_accepted(arrays, message) -> None:
    with pytest.raises(DataError, match="^mine.npz: .*" + re.escape(message)):
        dataset_from_arrays("mine.npz", arrays)


def test_unreadable_files_are_refused_without_running_code(tmp_path: Path) -> None:
    np.savez(tmp_path / "objects.npz", x=np.array([{"a": 1}], dtype=object), y=np.array([0]))
    with pytest.raises(DataError, match="objects.npz: x is an array of Python objects, which netfl does not unpickle"):
        load_user_dataset("objects.npz", base_dir=tmp_path)

    class Evil:
        def __reduce__(self):
            return (print, ("ran",))

    torch.save({"x": Evil(), "y": [0]}, tmp_path / "evil.pt")
    with pytest.raises(DataError) as refused:
        load_user_dataset("evil.pt", base_dir=tmp_path)
    message = str(refused.value)  # torch's advice (weights_only=False: run the file's code) is no use to a user
    assert "weights_only=False" not in message and "add_safe_globals" not in message
    assert "cannot read it: it refers to print, which only running code could rebuild" in message
    assert "netfl reads a .pt file with torch.load(weights_only=True) and no other way: a dict of tensors" in message
    assert "or save the arrays with numpy.savez, or give a loader (dataset.path: my_data.py:load)" in message
    (tmp_path / "garbage.pt").write_bytes(b"neither zip nor pickle")
    with pytest.raises(DataError, match=r"garbage.pt: cannot read it: not a file torch.save wrote of plain values \("):
        load_user_dataset("garbage.pt", base_dir=tmp_path)
    (tmp_path / "broken.npz").write_bytes(b"not a zip")
    with pytest.raises(DataError, match="not a readable .npz file"):
        load_user_dataset("broken.npz", base_dir=tmp_path)


def test_a_loaders_errors_name_its_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("def load():\n    return {'x': [[0.0]]}['y']\n")
    with pytest.raises(DataError, match=r"bad.py:2: KeyError in load\(\): 'y'"):
        load_user_dataset("bad.py:load", base_dir=tmp_path)
    with pytest.raises(DataError, match=r"bad.py: no 'lod' in this data loader file; defined there: load"):
        load_user_dataset("bad.py:lod", base_dir=tmp_path)


# --------------------------------------------------------------------------------------------------- LEAF


def _leaf(folder: Path, split: str, users: dict[str, tuple[list, list]]) -> None:
    (folder / split).mkdir(parents=True, exist_ok=True)
    data = {
        "users": list(users),
        "num_samples": [len(x) for x, _ in users.values()],
        "user_data": {u: {"x": x, "y": y} for u, (x, y) in users.items()},
    }
    (folder / split / f"all_data_{split}.json").write_text(json.dumps(data))


def test_leaf_femnist_features_with_writers_as_clients(tmp_path: Path) -> None:
    pixels = [[0.0] * 15 + [1.0]] * 3
    _leaf(tmp_path / "femnist", "train", {"f0001_12": (pixels, [3, 4, 61]), "f0002_07": (pixels[:2], [0, 1])})
    _leaf(tmp_path / "femnist", "test", {"f0001_12": (pixels[:1], [5])})
    d = load_user_dataset("femnist", base_dir=tmp_path, input_shape=(1, 4, 4))
    assert d.input_shape == (1, 4, 4) and d.num_classes == 62 and len(d.train_y) == 5 and len(d.test_y) == 1
    assert d.client_names == ("f0001_12", "f0002_07") and d.train_client.tolist() == [0, 0, 0, 1, 1]


def test_leaf_shakespeare_characters_and_per_token_targets(tmp_path: Path) -> None:
    x = ["to be or", "not to b"]
    _leaf(tmp_path / "s", "train", {"HAMLET": (x, ["n", "e"]), "JULIET": (["wherefor"], ["e"])})
    d = load_user_dataset("s", base_dir=tmp_path, test_fraction=0.34, vocabulary="used")
    vocabulary = sorted(set("to be ornot to bwherefore"))
    assert d.vocabulary.tokens == tuple(vocabulary) and d.num_classes == len(vocabulary)
    leaf = read_leaf(tmp_path / "s", targets="every_token", vocabulary="used")
    first = leaf.arrays["x"][0]
    assert "".join(vocabulary[i] for i in first) == "to be or"
    assert "".join(vocabulary[i] for i in leaf.arrays["y"][0]) == "o be orn"  # x shifted by one, then y
    assert leaf.users == ("HAMLET", "JULIET") and leaf.arrays["client"].tolist() == [0, 0, 1]


def test_leaf_sent140_text_becomes_leafs_word_ids(tmp_path: Path) -> None:
    """LEAF's line_to_indices: its split_line's tokens (case kept, . , ! ? ; apart), the first 25, a word outside
    the vocabulary and padding both len(vocabulary)."""
    tweets = [["1", "date", "q", "u", "I love it"], ["2", "date", "q", "u", "I hate it, I do"]]
    _leaf(tmp_path / "sent", "train", {"u1": (tweets, [1, 0]), "u2": (tweets[:1], [1])})
    leaf = read_leaf(tmp_path / "sent")
    assert leaf.arrays["x"].shape == (3, 25)
    words = leaf.vocabulary.tokens
    assert words[:2] == ("I", "it") and leaf.vocabulary.unknown == len(words) == 6  # by frequency, then by name
    assert set(words) == {"I", "it", "love", "hate", ",", "do"}
    first = [words[i] for i in leaf.arrays["x"][0] if i < len(words)]
    assert first == ["I", "love", "it"] and leaf.arrays["x"][0][3:].tolist() == [6] * 22  # padding: the unknown id
    (tmp_path / "words.txt").write_text("love\nI\n")
    given = read_leaf(tmp_path / "sent", vocabulary=tmp_path / "words.txt")
    assert given.vocabulary.tokens == ("love", "I") and given.arrays["x"][1][:6].tolist() == [1, 2, 2, 2, 1, 2]


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda d: d.update(num_samples=[5]), "num_samples says user 'u' has 5 samples, user_data holds 2"),
        (lambda d: d["user_data"]["u"].update(y=[1]), "user 'u' has 2 samples x but 1 labels y"),
        (lambda d: d.pop("user_data"), "not LEAF's layout"),
        (lambda d: d["user_data"]["u"].update(x=[{"a": 1}, {"a": 2}]), "a LEAF sample netfl cannot read"),
        (lambda d: d["user_data"]["u"].update(x=["abc", "ab"]), "LEAF's character samples all have one length"),
    ],
)
def test_leaf_files_that_do_not_hold_what_they_say_are_refused(tmp_path: Path, mutate, message) -> None:
    data = {"users": ["u"], "num_samples": [2], "user_data": {"u": {"x": [[0.0, 1.0], [1.0, 0.0]], "y": [0, 1]}}}
    mutate(data)
    (tmp_path / "l" / "train").mkdir(parents=True)
    (tmp_path / "l" / "train" / "a.json").write_text(json.dumps(data))
    with pytest.raises(DataError, match=message):
        load_user_dataset("l", base_dir=tmp_path)


def test_test_labels_above_every_training_label_are_refused_naming_both_sets() -> None:
    """Without num_classes, a label 12 in y_test over training labels 0-7 would build a 13-output model and
    write class_8..12 accuracy columns no device ever trains for."""
    x = np.zeros((16, 4), np.float32)
    arrays = {"x": x, "y": np.arange(16) % 8, "x_test": x[:5], "y_test": np.array([0, 1, 12, 3, 9])}
    with pytest.raises(DataError) as caught:
        dataset_from_arrays("mine.npz", arrays)
    assert str(caught.value) == (
        "mine.npz: y_test holds label(s) 9, 12, outside the training labels y (0-7); netfl would build a 13-class "
        "model whose classes 8..12 no device trains on. Fix y_test, or give num_classes: 13 if the data set has "
        "those classes"
    )
    assert dataset_from_arrays("mine.npz", {**arrays, "num_classes": 13}).num_classes == 13  # declared: accepted
    within = {**arrays, "y_test": np.array([0, 1, 7, 3, 2])}
    assert dataset_from_arrays("mine.npz", within).num_classes == 8
    per_token = {"x": x, "y": np.tile([[0, 2, -100]], (16, 1)), "x_test": x[:2], "y_test": np.array([[0, 5, 1]] * 2)}
    with pytest.raises(DataError, match=r"y_test holds label\(s\) 5, outside the training labels y \(0, 2\)"):
        dataset_from_arrays("mine.npz", per_token)


def _declaring(path: Path, shape: tuple[int, ...], dtype: str = "<f4") -> Path:
    """A .npz whose x.npy header declares ``shape`` (and holds no data: netfl must refuse it from the header)."""
    import io
    import zipfile

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": dtype, "fortran_order": False, "shape": shape})
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("x.npy", header.getvalue())  # magic and header, no data
        y = io.BytesIO()
        np.save(y, np.zeros(shape[0] if shape[0] < 10 else 3, dtype=np.int64))
        archive.writestr("y.npy", y.getvalue())
    return path


def test_a_npz_declaring_more_than_the_data_budget_is_refused_from_its_header(tmp_path: Path, monkeypatch) -> None:
    """An 8.9 MB .npz whose x declared 250 000 x 2 048 float32 was read until the process was killed: the header
    says the size before a byte of data is read."""
    from netfl.learn.data.data_budget import data_budget

    monkeypatch.setenv("NETFL_DATA_BUDGET", "1GB")
    assert data_budget().bytes == 1e9 and data_budget().describe() == "1 GB (NETFL_DATA_BUDGET)"
    _declaring(tmp_path / "bomb.npz", (250_000, 2_048))
    with pytest.raises(DataError) as refused:
        load_user_dataset("bomb.npz", base_dir=tmp_path)
    assert str(refused.value) == (
        f"{tmp_path / 'bomb.npz'}: its arrays take 2.05 GB once loaded and 2.46 GB while they load -- x 250,000 x "
        "2,048 float32 (2.05 GB); y 3 int64 (24 B) -- over the data budget of 1 GB (NETFL_DATA_BUDGET)"
    )
    monkeypatch.delenv("NETFL_DATA_BUDGET")
    assert "a quarter of this machine's memory; set NETFL_DATA_BUDGET to change it" in data_budget().describe()
    _declaring(tmp_path / "huge.npz", (10**7, 10**6))  # 40 TB: beyond any machine's default budget
    with pytest.raises(
        DataError,
        match=(
            r"huge.npz: its arrays take 40 TB once loaded "
            r"and 48 TB while they load -- x 10,000,000 x "
        ),
    ):
        load_user_dataset("huge.npz", base_dir=tmp_path)
    monkeypatch.setenv("NETFL_DATA_BUDGET", "a lot")
    with pytest.raises(DataError, match="NETFL_DATA_BUDGET='a lot': 'a lot' is not a bytes quantity"):
        data_budget()


def test_pt_and_loader_arrays_are_sized_before_netfl_copies_them(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("NETFL_DATA_BUDGET", "100kB")
    torch.save({"x": torch.zeros(1000, 32), "y": torch.zeros(1000, dtype=torch.long)}, tmp_path / "big.pt")
    with pytest.raises(
        DataError,
        match=(
            r"big.pt: its arrays take 136 kB once loaded "
            r"and 162 kB while they load -- x 1,000 x 32 "
        ),
    ):
        load_user_dataset("big.pt", base_dir=tmp_path)
    (tmp_path / "my_data.py").write_text(
        "import numpy as np\n\ndef load():\n    return {'x': np.zeros((1000, 32)), 'y': np.zeros(1000, int)}\n"
    )
    with pytest.raises(
        DataError,
        match=(
            r"my_data.py:load: its arrays take 136 kB once loaded "
            r"and 400 kB while they load -- x 1,000 "
        ),
    ):
        load_user_dataset("my_data.py:load", base_dir=tmp_path)
    monkeypatch.setenv("NETFL_DATA_BUDGET", "1MB")
    assert len(load_user_dataset("big.pt", base_dir=tmp_path).train_y) == 800  # within it: read as before
