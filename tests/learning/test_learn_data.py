"""IDX I/O, data set loaders and client partitioning."""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from netfl.errors import DataError
from netfl.learn.data.datasets import DATASET_NAMES, FASHION_MNIST_DIR, load_dataset
from netfl.learn.data.idx import read_idx, write_idx
from netfl.learn.data.label_mix import label_distribution
from netfl.learn.data.partition import partition_indices

# ------------------------------------------------------------------------------ IDX


@pytest.mark.parametrize("dtype", ["u1", "i1", "i2", "i4", "f4", "f8"])
@pytest.mark.parametrize("compress", [False, True])
def test_idx_round_trip(tmp_path: Path, dtype: str, compress: bool) -> None:
    arr = (np.arange(2 * 3 * 4) - 7).astype(dtype).reshape(2, 3, 4)
    path = tmp_path / "a.idx"
    write_idx(path, arr)
    if compress:  # same name: gzip must be detected from content
        path.write_bytes(gzip.compress(path.read_bytes()))
    out = read_idx(path)
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, arr)


def test_idx_header_is_big_endian(tmp_path: Path) -> None:
    path = tmp_path / "x"
    write_idx(path, np.array([1, 2], dtype=np.int16))
    assert path.read_bytes() == bytes([0, 0, 0x0B, 1, 0, 0, 0, 2, 0, 1, 0, 2])


def test_idx_truncated_payload_names_path(tmp_path: Path) -> None:
    path = tmp_path / "t.idx"
    write_idx(path, np.zeros((4, 5), dtype=np.uint8))
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(DataError, match=r"t\.idx.*truncated"):
        read_idx(path)


@pytest.mark.parametrize(
    "content, problem",
    [
        (b"\x00", "header"),
        (b"\x01\x00\x08\x01\x00\x00\x00\x01\x05", "two zero bytes"),
        (b"\x00\x00\x07\x01\x00\x00\x00\x01\x05", "dtype code 0x07"),
        (b"\x00\x00\x08\x02\x00\x00\x00\x01", "truncated IDX header"),
        (b"\x00\x00\x08\x01\x00\x00\x00\x01\x05\x06", "trailing"),
    ],
)
def test_idx_corrupt_header_names_path(tmp_path: Path, content: bytes, problem: str) -> None:
    path = tmp_path / "bad.idx"
    path.write_bytes(content)
    with pytest.raises(DataError) as info:
        read_idx(path)
    assert str(path) in str(info.value) and problem in str(info.value)


def test_idx_corrupt_gzip_and_missing(tmp_path: Path) -> None:
    path = tmp_path / "c.gz"
    path.write_bytes(gzip.compress(b"\x00\x00\x08\x01\x00\x00\x00\x03abc")[:-10])
    with pytest.raises(DataError, match=r"c\.gz.*gzip"):
        read_idx(path)
    with pytest.raises(DataError, match=r"nope.*not found"):
        read_idx(tmp_path / "nope")


# -------------------------------------------------------------------------- datasets


def test_unknown_dataset_lists_names() -> None:
    with pytest.raises(DataError) as info:
        load_dataset("imagenet")
    assert all(name in str(info.value) for name in DATASET_NAMES)


def test_digits_shapes_and_deterministic_split() -> None:
    ds = load_dataset("digits", test_fraction=0.25, seed=3)
    n = len(ds.train_y) + len(ds.test_y)
    assert n == 1797
    assert abs(len(ds.test_y) - 0.25 * n) <= 10
    assert ds.train_x.shape == (len(ds.train_y), 1, 8, 8)
    assert ds.train_x.dtype == torch.float32 and ds.train_y.dtype == torch.int64
    assert ds.input_shape == (1, 8, 8) and ds.num_classes == 10
    assert 0.0 <= float(ds.train_x.min()) and float(ds.train_x.max()) <= 1.0
    # stratified: every class in test in roughly the test fraction
    counts = torch.bincount(ds.test_y, minlength=10).numpy()
    totals = counts + torch.bincount(ds.train_y, minlength=10).numpy()
    np.testing.assert_allclose(counts / totals, 0.25, atol=0.01)
    again = load_dataset("digits", test_fraction=0.25, seed=3)
    assert torch.equal(ds.test_x, again.test_x) and torch.equal(ds.train_y, again.train_y)
    other = load_dataset("digits", test_fraction=0.25, seed=4)
    assert not torch.equal(ds.test_x, other.test_x)


def test_digits_bad_fraction() -> None:
    with pytest.raises(DataError, match="test_fraction"):
        load_dataset("digits", test_fraction=1.0)


@pytest.mark.skipif(
    not (FASHION_MNIST_DIR / "train-images-idx3-ubyte.gz").exists()
    and not (FASHION_MNIST_DIR / "train-images-idx3-ubyte").exists(),
    reason="Debian dataset-fashion-mnist not installed",
)
def test_fashion_mnist_from_debian_folder() -> None:
    ds = load_dataset("fashion-mnist")
    assert ds.train_x.shape == (60000, 1, 28, 28) and ds.test_x.shape == (10000, 1, 28, 28)
    assert ds.train_y.shape == (60000,) and ds.test_y.shape == (10000,)
    assert ds.input_shape == (1, 28, 28) and ds.num_classes == 10
    assert float(ds.train_x.max()) == pytest.approx(1.0)
    assert set(torch.unique(ds.train_y).tolist()) == set(range(10))


def test_fashion_mnist_missing_files(tmp_path: Path) -> None:
    with pytest.raises(DataError) as info:
        load_dataset("fashion-mnist", data_dir=tmp_path)
    msg = str(info.value)
    assert "apt-get install dataset-fashion-mnist" in msg
    assert str(tmp_path / "train-images-idx3-ubyte") + "(.gz)" in msg


def _write_mnist_like(folder: Path, n_train: int, n_test: int, gz: bool) -> None:
    rng = np.random.default_rng(0)
    files = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        "train-labels-idx1-ubyte": (np.arange(n_train) % 10).astype(np.uint8),
        "t10k-images-idx3-ubyte": np.full((n_test, 28, 28), 255, dtype=np.uint8),
        "t10k-labels-idx1-ubyte": (np.arange(n_test) % 10).astype(np.uint8),
    }
    for name, arr in files.items():
        write_idx(folder / name, arr)
        if gz:
            raw = (folder / name).read_bytes()
            (folder / name).unlink()
            (folder / f"{name}.gz").write_bytes(gzip.compress(raw))


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_from_small_idx_files(tmp_path: Path, gz: bool) -> None:
    _write_mnist_like(tmp_path, 30, 12, gz)
    ds = load_dataset("mnist", data_dir=tmp_path)
    assert ds.name == "mnist"
    assert ds.train_x.shape == (30, 1, 28, 28) and ds.test_x.shape == (12, 1, 28, 28)
    assert ds.train_y.tolist() == [i % 10 for i in range(30)]
    assert torch.all(ds.test_x == 1.0)


def test_mnist_needs_data_dir_and_consistent_files(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no data folder"):
        load_dataset("mnist")
    _write_mnist_like(tmp_path, 5, 5, gz=False)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte", np.zeros(4, dtype=np.uint8))
    with pytest.raises(DataError, match="expected 5 labels"):
        load_dataset("mnist", data_dir=tmp_path)


def _write_cifar(folder: Path, per_batch: int) -> None:
    folder.mkdir()
    rng = np.random.default_rng(1)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {
            b"data": rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8),
            b"labels": list(rng.integers(0, 10, per_batch).tolist()),
        }
        with (folder / name).open("wb") as fh:
            pickle.dump(batch, fh)


def test_cifar10_from_small_batches(tmp_path: Path) -> None:
    _write_cifar(tmp_path / "cifar-10-batches-py", per_batch=4)
    ds = load_dataset("cifar10", data_dir=tmp_path)
    assert ds.train_x.shape == (20, 3, 32, 32) and ds.test_x.shape == (4, 3, 32, 32)
    assert ds.input_shape == (3, 32, 32) and ds.train_y.dtype == torch.int64
    # channel-major layout: first 1024 bytes are the red plane
    with (tmp_path / "cifar-10-batches-py" / "test_batch").open("rb") as fh:
        raw = pickle.load(fh)[b"data"]
    assert torch.allclose(ds.test_x[0, 0].flatten(), torch.tensor(raw[0, :1024] / 255.0).float())
    same = load_dataset("cifar10", data_dir=tmp_path / "cifar-10-batches-py")
    assert torch.equal(same.train_x, ds.train_x)


def test_cifar10_missing_batch(tmp_path: Path) -> None:
    _write_cifar(tmp_path / "c", per_batch=2)
    (tmp_path / "c" / "data_batch_3").unlink()
    with pytest.raises(DataError, match="data_batch_3"):
        load_dataset("cifar10", data_dir=tmp_path / "c")


# ------------------------------------------------------------------------ partitions


def _labels(n_per_class: int = 100, num_classes: int = 10) -> np.ndarray:
    return np.random.default_rng(0).permutation(np.repeat(np.arange(num_classes), n_per_class))


def _check_disjoint(parts: list[np.ndarray], n: int, all_used: bool) -> None:
    allidx = np.concatenate(parts)
    assert len(np.unique(allidx)) == len(allidx)
    assert all(p.dtype == np.int64 and np.all(np.diff(p) > 0) for p in parts if len(p) > 1)
    if all_used:
        assert sorted(allidx.tolist()) == list(range(n))


def test_iid_partition_even_and_complete() -> None:
    y = _labels()
    parts = partition_indices(y, 7, "iid", np.random.default_rng(0))
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1
    _check_disjoint(parts, len(y), all_used=True)


def test_dirichlet_alpha_controls_skew() -> None:
    y = _labels(200)
    uniform = partition_indices(y, 5, "dirichlet", np.random.default_rng(0), alpha=1000.0)
    skewed = partition_indices(y, 5, "dirichlet", np.random.default_rng(0), alpha=0.05)
    for parts in (uniform, skewed):
        _check_disjoint(parts, len(y), all_used=True)
        assert all(len(p) >= 1 for p in parts)
    d_uni = label_distribution(y, uniform, 10)
    d_skew = label_distribution(y, skewed, 10)
    np.testing.assert_allclose(d_uni.sum(axis=1), 1.0)
    np.testing.assert_allclose(d_skew.sum(axis=1), 1.0)
    assert np.abs(d_uni - 0.1).max() < 0.03
    assert d_skew.max(axis=1).mean() > 0.5


def test_dirichlet_every_client_gets_a_sample() -> None:
    y = _labels(2, 3)  # 6 samples, 6 clients, tiny alpha: needs retries or fallback
    parts = partition_indices(y, 6, "dirichlet", np.random.default_rng(0), alpha=0.01)
    assert all(len(p) >= 1 for p in parts)
    _check_disjoint(parts, len(y), all_used=True)


def test_same_seed_same_partition() -> None:
    y = _labels()
    for kind, kw in [("iid", {}), ("dirichlet", {"alpha": 0.3}), ("classes", {"classes_per_client": 2})]:
        a = partition_indices(y, 8, kind, np.random.default_rng(42), **kw)
        b = partition_indices(y, 8, kind, np.random.default_rng(42), **kw)
        assert all(np.array_equal(p, q) for p, q in zip(a, b))


@pytest.mark.parametrize("num_clients, k", [(10, 2), (3, 3), (4, 10), (7, 1)])
def test_classes_partition_gives_k_labels(num_clients: int, k: int) -> None:
    y = _labels()
    parts = partition_indices(y, num_clients, "classes", np.random.default_rng(1), classes_per_client=k)
    _check_disjoint(parts, len(y), all_used=num_clients * k >= 10)
    for p in parts:
        assert len(np.unique(y[p])) == k
    dist = label_distribution(y, parts, 10)
    assert np.all((dist > 0).sum(axis=1) == k)


def test_partition_bad_arguments() -> None:
    y = _labels(1)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="exceeds"):
        partition_indices(y, 11, "iid", rng)
    with pytest.raises(ValueError, match="alpha"):
        partition_indices(y, 2, "dirichlet", rng)
    with pytest.raises(ValueError, match="classes_per_client"):
        partition_indices(y, 2, "classes", rng, classes_per_client=11)
    with pytest.raises(ValueError, match="kind: 'shards' is not accepted; use 'iid', 'dirichlet', 'classes'"):
        partition_indices(y, 2, "shards", rng)
