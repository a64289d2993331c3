"""A data set of the user's own from its arrays, however they came (a file, a LEAF folder, a loader): the
arrays checked and converted into a :class:`~netfl.learn.data.datasets.Dataset` (the rules are
:mod:`netfl.learn.data.user_data`'s docstring's).

Without a whole copy on the way: arrays already in the dtype netfl holds become tensors sharing their memory,
checks run over blocks of rows, and arrays that netfl itself read (``own=True``) are split into training and
test samples in place -- the test rows set aside, the training rows moved up, the test rows written after
them -- so loading peaks at the data's size plus its test share (what the data budget counts)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from netfl.errors import DataError
from netfl.learn.data.data_budget import held_dtype
from netfl.learn.data.datasets import Dataset, stratified_split
from netfl.learn.data.vocabulary import Vocabulary
from netfl.learn.models.flat_model import IGNORE_LABEL

__all__ = ["ARRAY_KEYS", "IGNORE_LABEL", "dataset_from_arrays"]

#: The keys a data set of the user's own may hold (``x`` and ``y`` required).
ARRAY_KEYS = ("x", "y", "client", "x_test", "y_test", "num_classes")
#: The bytes of rows a check or a move handles at once: small next to a data set, large enough for numpy's speed.
BLOCK_BYTES = 16 * 2**20


def dataset_from_arrays(
    name: str,
    arrays: Any,
    *,
    input_shape: tuple[int, ...] | None = None,
    test_fraction: float = 0.2,
    seed: int = 0,
    client_names: tuple[str, ...] | None = None,
    vocabulary: Vocabulary | None = None,
    own: bool = False,
) -> Dataset:
    """Check the user's arrays (see the module's docstring for the rules) and make a Dataset of them;
    ``client_names``: what client id i is called (LEAF's users), when the ids are 0, 1, ...; ``own``: no one
    else holds the arrays (netfl read them), so they may be split in place rather than copied."""
    if not isinstance(arrays, Mapping):
        raise DataError(
            f"{name}: expected a mapping of arrays with keys {', '.join(ARRAY_KEYS)} (x and y required), got "
            f"{type(arrays).__name__}"
        )
    unknown = sorted(set(map(str, arrays)) - set(ARRAY_KEYS))
    if unknown:
        raise DataError(f"{name}: unknown key(s) {', '.join(unknown)}; accepted: {', '.join(ARRAY_KEYS)}")
    for key in ("x", "y"):
        if key not in arrays:
            raise DataError(f"{name}: no {key!r}; a data set needs x (the samples) and y (their labels)")
    if ("x_test" in arrays) != ("y_test" in arrays):
        raise DataError(f"{name}: give both x_test and y_test, or neither (then test_fraction is held out)")
    x = _inputs(name, "x", arrays["x"], input_shape)
    y = _labels(name, "y", arrays["y"], len(x))
    client = None if arrays.get("client") is None else _clients(name, arrays["client"], len(x))
    if "x_test" in arrays:
        test_x = _inputs(name, "x_test", arrays["x_test"], input_shape)
        test_y = _labels(name, "y_test", arrays["y_test"], len(test_x))
        if test_x.shape[1:] != x.shape[1:] or test_x.dtype != x.dtype:
            raise DataError(
                f"{name}: x_test's samples are {test_x.dtype} {tuple(test_x.shape[1:])}, "
                f"x's {x.dtype} {tuple(x.shape[1:])}"
            )
        if test_y.shape[1:] != y.shape[1:]:
            raise DataError(f"{name}: y_test has shape {tuple(test_y.shape)} but y {tuple(y.shape)}")
        if arrays.get("num_classes") is None:
            _test_labels_within_training(name, y, test_y)
    else:
        if len(x) < 2:
            raise DataError(f"{name}: {len(x)} sample(s): too few to hold out a test set; give x_test and y_test")
        train_idx, test_idx = _split(y, test_fraction, seed)
        in_place = own and not np.may_share_memory(x, y)
        x, test_x = _rows(x, train_idx, test_idx, in_place)
        y, test_y = _rows(y, train_idx, test_idx, in_place)
        client = None if client is None else (client[0][train_idx], client[1])
    if len(x) == 0 or len(test_x) == 0:
        raise DataError(f"{name}: {len(x)} training and {len(test_x)} test samples; both must be at least one")
    num_classes = _num_classes(name, arrays.get("num_classes"), y, test_y)
    ids, names = (None, None) if client is None else _number_clients(*client, client_names)
    return Dataset(
        name=name,
        train_x=torch.from_numpy(np.ascontiguousarray(x)),
        train_y=torch.from_numpy(np.ascontiguousarray(y)),
        test_x=torch.from_numpy(np.ascontiguousarray(test_x)),
        test_y=torch.from_numpy(np.ascontiguousarray(test_y)),
        num_classes=num_classes,
        input_shape=tuple(int(v) for v in x.shape[1:]),
        train_client=ids,
        client_names=names,
        vocabulary=vocabulary,
    )


def _rows(a: np.ndarray, train: np.ndarray, test: np.ndarray, in_place: bool) -> tuple[np.ndarray, np.ndarray]:
    """``a``'s training and test rows (``train`` and ``test``: ascending indices that together cover every row
    once): new arrays, or, ``in_place``, two views of ``a`` reordered, holding only the test rows twice at once."""
    if not (in_place and a.flags.writeable and a.flags.c_contiguous):
        return a[train], a[test]
    aside = a[test]
    step = max(1, BLOCK_BYTES // max(1, a[:1].nbytes))
    start = int(np.argmax(train != np.arange(len(train)))) if len(train) else 0  # rows already in place: kept
    if len(train) and train[-1] == len(train) - 1:
        start = len(train)
    for begin in range(start, len(train), step):
        rows = train[begin : begin + step]
        a[begin : begin + len(rows)] = a[rows]  # each source row lies at or after its place: none overwritten yet
    a[len(train) :] = aside
    return a[: len(train)], a[len(train) :]


def _all_finite(a: np.ndarray) -> bool:
    """No NaN or infinity in ``a``, checked a block of rows at a time (no mask the size of the data)."""
    step = max(1, BLOCK_BYTES // max(1, a[:1].nbytes))
    return all(bool(np.isfinite(a[i : i + step]).all()) for i in range(0, len(a), step))


def _array(name: str, key: str, value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    try:
        a = np.asarray(value)
    except (ValueError, TypeError) as exc:
        ragged = "inhomogeneous" in str(exc)
        hint = "; its samples have different lengths (ragged): pad them to one length" if ragged else ""
        raise DataError(f"{name}: {key} is not an array ({exc}){hint}") from None
    if a.dtype == object:
        raise DataError(
            f"{name}: {key} holds Python objects, not numbers; ragged sequences (samples of different lengths) "
            "are such: pad them to one length"
        )
    return a


def _inputs(name: str, key: str, value: Any, shape: tuple[int, ...] | None) -> np.ndarray:
    a = _array(name, key, value)
    if a.ndim < 1:
        raise DataError(f"{name}: {key} must hold one sample per row, got shape {a.shape}")
    if a.dtype.kind in "fiub":  # float32 inputs, int64 token ids: no copy when they already are
        a = a.astype(held_dtype(key, a.dtype), copy=False)
    else:
        raise DataError(f"{name}: {key} holds {a.dtype} values; netfl trains on numbers (floats, or integer token ids)")
    if a.ndim == 1:
        a = a[:, None]  # one number per sample: a feature vector of length 1
    if shape is not None:
        per_sample = int(np.prod(a.shape[1:]))
        if int(np.prod(shape)) != per_sample:
            raise DataError(
                f"{name}: {key}'s samples have {per_sample} values {tuple(a.shape[1:])}; input_shape "
                f"{list(shape)} holds {int(np.prod(shape))}"
            )
        a = a.reshape(len(a), *shape)
    if a.dtype == np.float32 and not _all_finite(a):
        raise DataError(f"{name}: {key} holds NaN or infinite values")
    return a


def _labels(name: str, key: str, value: Any, n: int) -> np.ndarray:
    a = _array(name, key, value)
    if a.dtype.kind == "f":
        if not np.all(np.isfinite(a)) or not np.all(a == np.round(a)):
            raise DataError(f"{name}: {key} must hold whole-number class labels; found {a[a != np.round(a)][:3]}")
    elif a.dtype.kind not in "iub":
        raise DataError(f"{name}: {key} holds {a.dtype} values; labels are class numbers 0, 1, ... (map names to them)")
    a = a.astype(np.int64, copy=False)
    if a.ndim not in (1, 2) or len(a) != n:
        raise DataError(
            f"{name}: {key} has shape {a.shape}; expected ({n},) or ({n}, T): a label per sample or per token"
        )
    if a.ndim == 1 and (a == IGNORE_LABEL).any():
        raise DataError(
            f"{name}: {key} holds -100, which marks an ignored position in per-token labels (N, T); "
            "every sample needs a label"
        )
    bad = a[(a < 0) & (a != IGNORE_LABEL)]
    if bad.size:
        raise DataError(f"{name}: {key} holds label {int(bad[0])}; labels are 0, 1, ... (or -100 to ignore a position)")
    return a


def _clients(name: str, value: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Each sample's client as an index into the sorted unique ids, and those ids."""
    a = _array(name, "client", value)
    if a.ndim != 1 or len(a) != n:
        raise DataError(f"{name}: client has shape {a.shape}; expected ({n},): each sample's client")
    if a.dtype.kind == "f":
        if not np.all(a == np.round(a)):
            raise DataError(f"{name}: client ids must be whole numbers or names")
        a = a.astype(np.int64)
    if a.dtype.kind not in "iuUS":
        raise DataError(f"{name}: client holds {a.dtype} values; expected numbers or names")
    ids, index = np.unique(a, return_inverse=True)
    return index.astype(np.int64), ids


def _number_clients(
    index: np.ndarray, ids: np.ndarray, names: tuple[str, ...] | None
) -> tuple[np.ndarray, tuple[str, ...]]:
    """Clients renumbered 0.. over those that kept training samples (ascending id order), with their names."""
    kept = np.unique(index)
    renumber = np.full(len(ids), -1, dtype=np.int64)
    renumber[kept] = np.arange(len(kept))
    return renumber[index], tuple(names[int(v)] if names is not None else str(v) for v in ids[kept])


def _split(y: np.ndarray, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    if y.ndim == 1:
        return stratified_split(y, test_fraction, rng)
    n = len(y)
    test = np.sort(rng.permutation(n)[: max(1, round(n * test_fraction))])
    mask = np.ones(n, dtype=bool)
    mask[test] = False
    return np.flatnonzero(mask), test


def _test_labels_within_training(name: str, y: np.ndarray, test_y: np.ndarray) -> None:
    """Refuse test labels above every training label (DataError naming both label sets): without
    ``num_classes`` they would add classes -- model outputs and per-class columns -- that no device trains on."""
    top = int(y.max(initial=-1))
    beyond = np.unique(test_y[test_y > top])
    if beyond.size:
        count = int(beyond[-1]) + 1
        raise DataError(
            f"{name}: y_test holds label(s) {_label_set(beyond)}, outside the training labels y "
            f"({_label_set(np.unique(y[y != IGNORE_LABEL]))}); netfl would build a {count}-class model whose "
            f"classes {top + 1}..{count - 1} no device trains on. Fix y_test, or give num_classes: {count} if the "
            "data set has those classes"
        )


def _label_set(labels: np.ndarray) -> str:
    """Sorted unique labels in a few words: ``0-7``, ``12``, ``3, 9, 12`` or ``0, 2, 5, ... (40 labels)``."""
    values = [int(v) for v in labels]
    if len(values) > 2 and values == list(range(values[0], values[-1] + 1)):
        return f"{values[0]}-{values[-1]}"
    if len(values) > 6:
        return f"{', '.join(map(str, values[:4]))}, ... {values[-1]} ({len(values)} labels)"
    return ", ".join(map(str, values))


def _num_classes(name: str, given: Any, y: np.ndarray, test_y: np.ndarray) -> int:
    seen = max(int(y.max(initial=-1)), int(test_y.max(initial=-1))) + 1
    if given is None:
        if seen < 1:
            raise DataError(f"{name}: no label other than -100 (ignored); nothing to learn")
        return seen
    count = int(np.asarray(given))
    if count < max(seen, 1):
        raise DataError(f"{name}: num_classes is {count}, but a label reaches {seen - 1}")
    return count
