"""Data sets as in-memory torch tensors, loaded without any network access.

Every loader returns the same :class:`Dataset` shape (images N×C×H×W float32
in [0, 1], int64 labels) so models, partitioning and training never care
where the data came from. Nothing here downloads: a missing file is a
:class:`DataError` that tells the user how to get it.
"""

from __future__ import annotations

import functools
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from netfl.errors import DataError
from netfl.learn.data.idx import read_idx
from netfl.learn.data.vocabulary import Vocabulary
from netfl.registry.datasets import (
    CIFAR10_FILES,
    DATASET_NAMES,
    DATASETS,
    FASHION_MNIST_DIR,
    IDX_FILES,
    NUM_CLASSES,
    data_folder,
    missing_files,
)

__all__ = ["DATASET_NAMES", "NUM_CLASSES", "Dataset", "load_dataset", "FASHION_MNIST_DIR"]

_IDX_FILES = dict(zip(("train_x", "train_y", "test_x", "test_y"), IDX_FILES))


@dataclass(frozen=True)
class Dataset:
    """A train/test split held in memory.

    ``train_x``/``test_x`` hold N samples of shape ``input_shape``: float32 (the built-in image sets: N×C×H×W
    in [0, 1]) or int64 (token ids). ``train_y``/``test_y`` are int64 class indices in ``range(num_classes)``,
    one per sample (N,) or one per token (N, T); a label of -100 is ignored (PyTorch's ``ignore_index``).
    ``train_client``: each training sample's client id (0..clients-1, for a natural partition) and
    ``client_names`` what the data called them (LEAF user names), or None when the data set has no clients.
    """

    name: str
    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    num_classes: int
    input_shape: tuple[int, ...]
    train_client: np.ndarray | None = None
    client_names: tuple[str, ...] | None = None
    vocabulary: Vocabulary | None = None  # what the token ids (and characters' classes) stand for, if known

    @property
    def per_token(self) -> bool:
        """One label per token (N, T) rather than per sample."""
        return self.train_y.dim() == 2

    @property
    def class_names(self) -> tuple[str, ...] | None:
        """What each class is, where the data says (LEAF's characters), for metrics.csv's columns."""
        return self.vocabulary.classes if self.vocabulary is not None else None

    @property
    def num_clients(self) -> int | None:
        return None if self.client_names is None else len(self.client_names)


def load_dataset(
    name: str,
    *,
    data_dir: Path | None = None,
    test_fraction: float = 0.2,
    seed: int = 0,
) -> Dataset:
    """Load data set ``name`` (one of :data:`DATASET_NAMES`).

    - ``"digits"``: scikit-learn's bundled 8×8 digits (no files needed); split
      into train/test by a stratified draw of ``test_fraction`` seeded by ``seed``.
    - ``"fashion-mnist"``: the four IDX files (plain or ``.gz``) from ``data_dir``,
      default :data:`FASHION_MNIST_DIR`; uses the official train/test split.
    - ``"mnist"``: the same four IDX file names, from ``data_dir`` (required).
    - ``"cifar10"``: the CIFAR-10 python batches from ``data_dir`` (the
      ``cifar-10-batches-py`` folder or its parent). These are pickles, and
      unpickling can execute arbitrary code: only load files you trust.

    - ``"blobs3"``: Fed-CVaR-Avg's 2-D toy, generated: scikit-learn
      ``make_blobs`` with 1000 points per class around (1, 1), (2, 3) and
      (2.3, 1.5), std 0.1, ``random_state=11``; inputs are the raw coordinates
      shaped N×1×1×2 (use ``logistic`` or ``mlp``), stratified test split like digits.

    - ``"shakespeare"`` and ``"sent140"``, LEAF's JSON in ``data_dir``, are read by
      :func:`netfl.learn.data.leaf_tasks.load_leaf_task`.

    ``test_fraction`` and ``seed`` only affect ``"digits"`` and ``"blobs3"``.
    Raises :class:`DataError` for unknown names and missing or malformed files.
    """
    loader = _LOADERS.get(name)
    if loader is None and name in DATASETS:  # LEAF's, read with the checks of a user's data (which import this)
        raise DataError(f"{name}: LEAF's task is read by netfl.learn.data.leaf_tasks.load_leaf_task")
    if loader is None:
        raise DataError(f"unknown dataset {name!r} (accepted: {', '.join(DATASET_NAMES)})")
    problem = missing_files(name, data_dir)  # every missing file at once, before reading any
    if problem is not None:
        raise DataError(problem)
    return loader(data_folder(name, data_dir), test_fraction, seed)


# --------------------------------------------------------------------------- digits


def _load_digits(_data_dir: Path | None, test_fraction: float, seed: int) -> Dataset:
    if not 0.0 < test_fraction < 1.0:
        raise DataError(f"digits: test_fraction must be in (0, 1), got {test_fraction}")
    from sklearn.datasets import load_digits  # deferred: sklearn import is slow

    bunch = load_digits()
    x = np.asarray(bunch.data, dtype=np.float32).reshape(-1, 1, 8, 8) / 16.0
    y = np.asarray(bunch.target, dtype=np.int64)
    train_idx, test_idx = stratified_split(y, test_fraction, np.random.default_rng(seed))
    return _make("digits", x[train_idx], y[train_idx], x[test_idx], y[test_idx])


def stratified_split(y: np.ndarray, test_fraction: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per class, send round(n_c * test_fraction) random samples to test.

    Stratifying keeps both halves' label mix equal to the full set's, which
    matters on a set as small as digits (~180 per class).
    """
    test_parts = []
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        n_test = int(round(len(idx) * test_fraction))
        test_parts.append(rng.permutation(idx)[:n_test])
    test_idx = np.sort(np.concatenate(test_parts))
    train_mask = np.ones(len(y), dtype=bool)
    train_mask[test_idx] = False
    return np.flatnonzero(train_mask), test_idx


# --------------------------------------------------------------------------- blobs3

BLOBS3_CENTERS = ((1.0, 1.0), (2.0, 3.0), (2.3, 1.5))


def _load_blobs3(_data_dir: Path | None, test_fraction: float, seed: int) -> Dataset:
    if not 0.0 < test_fraction < 1.0:
        raise DataError(f"blobs3: test_fraction must be in (0, 1), got {test_fraction}")
    from sklearn.datasets import make_blobs  # deferred: sklearn import is slow

    x, y = make_blobs(
        n_samples=[1000] * len(BLOBS3_CENTERS),
        centers=[list(c) for c in BLOBS3_CENTERS],
        cluster_std=0.1,
        random_state=11,
    )
    x = np.asarray(x, dtype=np.float32).reshape(-1, 1, 1, 2)
    y = np.asarray(y, dtype=np.int64)
    train_idx, test_idx = stratified_split(y, test_fraction, np.random.default_rng(seed))
    return _make("blobs3", x[train_idx], y[train_idx], x[test_idx], y[test_idx])


# ------------------------------------------------------------------- IDX (MNIST-like)


def _find_idx_file(folder: Path, stem: str) -> Path:
    plain = folder / stem
    return plain if plain.is_file() else folder / f"{stem}.gz"  # load_dataset checked that one is there


@functools.lru_cache(maxsize=4)
def _read_idx_set(name: str, folder: str) -> tuple[np.ndarray, ...]:
    """Read and check the four IDX files once per process (they are read often).

    Returns read-only uint8 arrays (train_x, train_y, test_x, test_y) so the
    cached copy cannot be altered by a caller.
    """
    root = Path(folder)
    arrays = {key: read_idx(_find_idx_file(root, stem)) for key, stem in _IDX_FILES.items()}
    for split in ("train", "test"):
        xs, ys = arrays[f"{split}_x"], arrays[f"{split}_y"]
        x_path = root / _IDX_FILES[f"{split}_x"]
        if xs.ndim != 3:
            raise DataError(f"{x_path}: expected N×H×W images, got shape {xs.shape}")
        if ys.ndim != 1 or len(ys) != len(xs):
            raise DataError(
                f"{root / _IDX_FILES[f'{split}_y']}: expected {len(xs)} labels to match {x_path}, got shape {ys.shape}"
            )
        if len(ys) and (ys.min() < 0 or ys.max() > 9):
            raise DataError(f"{root / _IDX_FILES[f'{split}_y']}: labels must be in 0..9")
    if arrays["train_x"].shape[1:] != arrays["test_x"].shape[1:]:
        raise DataError(f"{root}: train and test images differ in size")
    out = tuple(arrays[k] for k in ("train_x", "train_y", "test_x", "test_y"))
    for a in out:
        a.setflags(write=False)
    return out


def _load_idx_dataset(name: str, folder: Path) -> Dataset:
    train_x, train_y, test_x, test_y = _read_idx_set(name, str(folder))
    return _make(
        name, _scaled(train_x[:, None]), train_y.astype(np.int64),
        _scaled(test_x[:, None]), test_y.astype(np.int64),
    )  # fmt: skip


def _load_fashion_mnist(folder: Path, _tf: float, _seed: int) -> Dataset:
    return _load_idx_dataset("fashion-mnist", folder)


def _load_mnist(folder: Path, _tf: float, _seed: int) -> Dataset:
    return _load_idx_dataset("mnist", folder)


# --------------------------------------------------------------------------- CIFAR-10


def _load_cifar10(folder: Path, _tf: float, _seed: int) -> Dataset:
    batches = [_read_cifar_batch(folder / name) for name in CIFAR10_FILES]
    train, (test_x, test_y) = batches[:-1], batches[-1]
    train_y = np.concatenate([y for _, y in train])
    train_x = [x for x, _ in train]
    del batches, train  # the uint8 batches are let go one by one as _scaled_rows converts them
    return _make("cifar10", _scaled_rows(train_x), train_y, _scaled(test_x), test_y)


def _read_cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Unpickle one CIFAR-10 batch (trusted files only) into N×3×32×32 uint8 and labels."""
    try:
        with path.open("rb") as fh:
            batch = pickle.load(fh, encoding="bytes")
    except Exception as exc:  # unpickling can fail in many ways; all mean "bad file"
        raise DataError(f"{path}: cannot unpickle CIFAR-10 batch ({exc})") from None
    if not isinstance(batch, dict) or b"data" not in batch or b"labels" not in batch:
        raise DataError(f"{path}: not a CIFAR-10 batch (need a dict with b'data' and b'labels')")
    data = np.asarray(batch[b"data"])
    labels = np.asarray(batch[b"labels"], dtype=np.int64)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
        raise DataError(f"{path}: b'data' must be uint8 N×3072, got {data.dtype} {data.shape}")
    if labels.shape != (len(data),):
        raise DataError(f"{path}: expected {len(data)} labels, got shape {labels.shape}")
    if len(labels) and (labels.min() < 0 or labels.max() > 9):
        raise DataError(f"{path}: labels must be in 0..9")
    return data.reshape(-1, 3, 32, 32), labels


# ---------------------------------------------------------------------------- helpers


def _scaled(pixels: np.ndarray) -> np.ndarray:
    """uint8 pixels -> new float32 array in [0, 1] (one allocation; it is called per load)."""
    out = pixels.astype(np.float32)
    out *= np.float32(1.0 / 255.0)
    return out


def _scaled_rows(parts: list[np.ndarray]) -> np.ndarray:
    """uint8 pixel blocks -> one float32 array in [0, 1] of their rows, each block scaled into its place and let
    go (emptying ``parts``): never the uint8 rows joined into a copy of their own first."""
    out = np.empty((sum(len(p) for p in parts), *parts[0].shape[1:]), dtype=np.float32)
    at = 0
    while parts:
        part = parts.pop(0)
        np.multiply(part, np.float32(1.0 / 255.0), out=out[at : at + len(part)], dtype=np.float32)
        at += len(part)
    return out


def _make(
    name: str,
    train_x: np.ndarray,
    train_y: np.ndarray,
    test_x: np.ndarray,
    test_y: np.ndarray,
) -> Dataset:
    """The Dataset of ``name``'s arrays; its label count is the registry's (netfl.registry.datasets)."""
    c, h, w = train_x.shape[1:]
    return Dataset(
        name=name,
        train_x=torch.from_numpy(np.ascontiguousarray(train_x, dtype=np.float32)),
        train_y=torch.from_numpy(np.ascontiguousarray(train_y, dtype=np.int64)),
        test_x=torch.from_numpy(np.ascontiguousarray(test_x, dtype=np.float32)),
        test_y=torch.from_numpy(np.ascontiguousarray(test_y, dtype=np.int64)),
        num_classes=NUM_CLASSES[name],
        input_shape=(int(c), int(h), int(w)),
    )


_LOADERS: dict[str, Callable[[Path | None, float, int], Dataset]] = {
    "digits": _load_digits,
    "fashion-mnist": _load_fashion_mnist,
    "mnist": _load_mnist,
    "cifar10": _load_cifar10,
    "blobs3": _load_blobs3,
}  # and LEAF's tasks, read by _load_leaf_task
