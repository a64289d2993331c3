"""Data sets of the user's own: arrays in a ``.npz`` or ``.pt`` file, LEAF's JSON layout, or a Python loader.

Every form gives the same arrays -- ``x`` (N samples of any shape), ``y`` (one integer label per sample (N,),
or per token (N, T)), optionally ``client`` (each sample's client, for ``partition: {kind: natural}``),
``x_test``/``y_test`` (a test split of its own) and ``num_classes`` -- and becomes a
:class:`~netfl.learn.data.datasets.Dataset`:

* floating inputs become float32 and integer inputs int64 (token ids; scale images to floats yourself);
* labels must be whole numbers in ``0..num_classes-1`` (``num_classes`` defaults to the largest label + 1),
  or -100 for a position to ignore (PyTorch's ``ignore_index``);
* without ``x_test``, ``test_fraction`` of the samples are held out by a seeded draw, stratified by label
  when there is one label per sample (as for the built-in ``digits``);
* ``client`` ids (numbers or names) are numbered 0.. in ascending order (LEAF: in the order its files list
  the users), and the clients keep only the training samples.

A ``.pt`` file is read with ``torch.load(weights_only=True)``: tensors, arrays and plain values only, no code
runs. What the arrays take once loaded is checked against the data budget (:mod:`netfl.learn.data.data_budget`)
before netfl reads a ``.npz``'s arrays (from their headers), before it copies a ``.pt``'s or a loader's, and
before it builds a LEAF file's (from the sample counts).
A Python loader *is* code: netfl imports its file and calls it (errors name the file and line).
"""

from __future__ import annotations

import json
import re
import zipfile
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from netfl import user_code
from netfl.errors import DataError
from netfl.learn.data.data_budget import check_arrays, check_npz, check_sizes
from netfl.learn.data.datasets import Dataset, stratified_split
from netfl.learn.data.leaf_json import loads_leaf
from netfl.learn.models.flat_model import IGNORE_LABEL
from netfl.registry.choices import DataTargets, values
from netfl.registry.datasets import leaf_files, user_data_file, user_data_format

__all__ = ["ARRAY_KEYS", "IGNORE_LABEL", "LeafData", "dataset_from_arrays", "load_user_dataset", "read_leaf"]

#: The keys a data set of the user's own may hold (``x`` and ``y`` required).
ARRAY_KEYS = ("x", "y", "client", "x_test", "y_test", "num_classes")
#: LEAF text (Sent140): tweets are cut to this many words, and the vocabulary to this many (by frequency).
LEAF_WORDS_PER_SAMPLE = 25
LEAF_VOCABULARY = 10_000


def load_user_dataset(
    path: str | None,
    *,
    base_dir: Path | None,
    loader: Any = None,
    args: Mapping[str, Any] | None = None,
    input_shape: tuple[int, ...] | None = None,
    test_fraction: float = 0.2,
    seed: int = 0,
    targets: str = "sample",
) -> Dataset:
    """The data set a ``dataset.path`` names (relative to ``base_dir``), or that ``loader`` (a function, or a
    mapping of arrays, given from Python) holds. Raises DataError (UserCodeError for a loader's own failure)."""
    label = path or getattr(loader, "__name__", "data given in Python")
    if targets != "sample" and (loader is not None or user_data_format(path) != "leaf"):
        raise DataError(f"{label}: targets: {targets} applies to LEAF character data (Shakespeare)")
    if loader is not None:
        arrays = _call_loader(loader, args or {}, None) if callable(loader) else loader
    else:
        form = user_data_format(path)
        file = user_data_file(path, base_dir)
        if form == "npz":
            arrays = _read_npz(file)
        elif form == "torch":
            arrays = _read_torch(file)
        elif form == "leaf":
            leaf = read_leaf(file, targets=targets)
            return dataset_from_arrays(
                label,
                leaf.arrays,
                input_shape=input_shape,
                test_fraction=test_fraction,
                seed=seed,
                client_names=leaf.users,
                vocabulary=leaf.vocabulary,
            )
        elif form == "python":
            ref = user_code.parse_reference(path, base_dir)
            fn = user_code.load_attribute(
                ref, what="data loader", error=DataError, accept=callable, expected="a function"
            )
            arrays = _call_loader(fn, args or {}, ref)
        else:
            raise DataError(
                f"{path}: netfl cannot tell what kind of data this is (.npz, .pt, a LEAF folder or file.py:function)"
            )
    check_arrays(label, arrays)  # before netfl converts or copies them (a .npz is sized from its headers first)
    return dataset_from_arrays(label, arrays, input_shape=input_shape, test_fraction=test_fraction, seed=seed)


def _call_loader(fn: Callable[..., Any], args: Mapping[str, Any], ref: user_code.UserReference | None) -> Any:
    what = f"{getattr(fn, '__name__', 'loader')}({', '.join(f'{k}={v!r}' for k, v in args.items())})"
    if ref is None:
        return fn(**args)  # a function handed over in Python: its traceback is the user's own
    return user_code.call(fn, path=ref.path, what=what, error=DataError, **args)


def _read_npz(file: Path) -> dict[str, Any]:
    if not zipfile.is_zipfile(file):
        raise DataError(f"{file}: not a readable .npz file (a .npz is a zip archive of arrays, as numpy.savez writes)")
    try:
        check_npz(file)  # the arrays' headers, before any is read: a small file may declare a huge array
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise DataError(f"{file}: not a readable .npz file ({exc})") from None
    try:
        with np.load(file, allow_pickle=False) as archive:
            return {key: archive[key] for key in archive.files}
    except ValueError as exc:  # object arrays need pickle, which is refused: a .npz must hold plain arrays
        raise DataError(f"{file}: cannot read it without unpickling ({exc}); store plain numeric arrays") from None
    except (OSError, EOFError, KeyError) as exc:
        raise DataError(f"{file}: not a readable .npz file ({exc})") from None


#: What netfl reads from a .pt file, and the ways to give anything else (for the message refusing one).
TORCH_ACCEPTED = (
    "netfl reads a .pt file with torch.load(weights_only=True) and no other way: a dict of tensors, numpy "
    "arrays, numbers, strings, lists and dicts (torch.save({'x': x, 'y': y}, path)); store other objects as "
    "those, or save the arrays with numpy.savez, or give a loader (dataset.path: my_data.py:load), which netfl "
    "runs as code"
)


def _read_torch(file: Path) -> Any:
    try:
        try:  # mapped, not read: the tensors are sized against the data budget before netfl copies them
            return torch.load(file, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError as exc:
            if "mmap" not in str(exc):  # a file of torch's legacy format cannot be mapped: read it
                raise
            return torch.load(file, map_location="cpu", weights_only=True)
    except Exception as exc:  # weights_only refuses anything but tensors and plain values; all mean "bad file"
        raise DataError(f"{file}: cannot read it: {_torch_refusal(exc)}; {TORCH_ACCEPTED}") from None


def _torch_refusal(exc: Exception) -> str:
    """What torch.load found, without its advice to load with ``weights_only=False`` (which runs the file's code,
    and which netfl never does)."""
    text = str(exc)
    found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", text)
    if found:
        return f"it refers to {found.group(1)}, which only running code could rebuild"
    if "WeightsUnpickler error:" in text:  # torch's own finding, after its advice
        detail = text.split("WeightsUnpickler error:", 1)[1].strip().split("\n\n")[0].strip()
        return f"not a file torch.save wrote of plain values ({detail.split('. ')[0]})"
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


# ---------------------------------------------------------------------------------------------------- arrays


def dataset_from_arrays(
    name: str,
    arrays: Any,
    *,
    input_shape: tuple[int, ...] | None = None,
    test_fraction: float = 0.2,
    seed: int = 0,
    client_names: tuple[str, ...] | None = None,
    vocabulary: str | None = None,
) -> Dataset:
    """Check the user's arrays (see the module's docstring for the rules) and make a Dataset of them;
    ``client_names``: what client id i is called (LEAF's users), when the ids are 0, 1, ..."""
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
        x, test_x, y, test_y = x[train_idx], x[test_idx], y[train_idx], y[test_idx]
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


def _array(name: str, key: str, value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    try:
        return np.asarray(value)
    except (ValueError, TypeError) as exc:
        raise DataError(f"{name}: {key} is not an array ({exc})") from None


def _inputs(name: str, key: str, value: Any, shape: tuple[int, ...] | None) -> np.ndarray:
    a = _array(name, key, value)
    if a.ndim < 1:
        raise DataError(f"{name}: {key} must hold one sample per row, got shape {a.shape}")
    if a.dtype.kind == "f":
        a = a.astype(np.float32, copy=False)
    elif a.dtype.kind in "iu":
        a = a.astype(np.int64, copy=False)
    elif a.dtype.kind == "b":
        a = a.astype(np.float32)
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
    if a.dtype == np.float32 and not np.isfinite(a).all():
        raise DataError(f"{name}: {key} holds NaN or infinite values")
    return a


def _labels(name: str, key: str, value: Any, n: int) -> np.ndarray:
    a = _array(name, key, value)
    if a.dtype.kind == "f":
        if not np.all(np.isfinite(a)) or not np.all(a == np.round(a)):
            raise DataError(f"{name}: {key} must hold whole-number class labels; found {a[a != np.round(a)][:3]}")
    elif a.dtype.kind not in "iub":
        raise DataError(f"{name}: {key} holds {a.dtype} values; labels are class numbers 0, 1, ... (map names to them)")
    a = a.astype(np.int64)
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


# ---------------------------------------------------------------------------------------------------- LEAF


@dataclass(frozen=True)
class LeafData:
    """What a LEAF folder holds: the arrays (client ids 0.. in the order the files list the users), the users'
    names, and the characters or words its token ids stand for (None for numeric features)."""

    arrays: dict[str, np.ndarray]
    users: tuple[str, ...]
    vocabulary: str | None


def read_leaf(location: Path, *, targets: str = "sample") -> LeafData:
    """LEAF's JSON layout (FEMNIST, Shakespeare, Sent140, ...) as arrays: a folder holding ``train/*.json`` and
    ``test/*.json`` (or a folder of, or one, JSON file: training data only), each file
    ``{"users": [...], "num_samples": [...], "user_data": {user: {"x": [...], "y": [...]}}}``.

    Each user is a client (numbered in the order the files, sorted by name, list them). Samples become:

    * a list of numbers (FEMNIST's 784 pixels) -> float32 features (``input_shape`` reshapes them);
    * a string (Shakespeare's 80 characters) -> int64 character ids, labels the id of the character ``y``;
      ``targets="every_token"`` labels every position with the character after it instead (x shifted by one,
      then y: per-token labels (N, 80) for a model whose outputs are per token);
    * a list ending in a string (Sent140's ``[id, date, query, user, text]``) -> the text's first
      :data:`LEAF_WORDS_PER_SAMPLE` lower-case words as ids into the :data:`LEAF_VOCABULARY` most frequent
      training words (0: padding, 1: a word outside the vocabulary).

    Characters are numbered in sorted order of all the characters the files use. Each file is parsed one sample
    at a time (:mod:`netfl.learn.data.leaf_json`), and the arrays are sized against the data budget from the sample
    counts before they are built.
    """
    if location.is_dir():
        train_files, test_files = leaf_files(location)
    else:
        train_files, test_files = [location], []
    if not train_files:
        raise DataError(f"{location}: no LEAF JSON files (expected train/*.json and test/*.json)")
    train = [s for f in train_files for s in _leaf_users(f)]
    test = [s for f in test_files for s in _leaf_users(f)]
    first = next((xs[0] for _, xs, _, _ in train + test if len(xs)), None)
    if first is None:
        raise DataError(f"{location}: the LEAF files hold no samples")
    kind = _leaf_kind(first, train_files[0])
    if targets not in values(DataTargets):
        raise DataError(f"{location}: targets must be sample or every_token, got {targets!r}")
    if targets == "every_token" and kind != "characters":
        raise DataError(f"{location}: targets: every_token needs character samples (Shakespeare), these are {kind}")
    _check_leaf_budget(location, kind, len(first), targets, train, test)
    if kind == "features":  # each user's samples are already a float32 array, or the list json gave
        encode_x, encode_y, vocabulary = _features, _int_labels, None
    else:
        samples = [x for _, xs, _, _ in train + test for x in xs]
        labels = [y for _, _, ys, _ in train + test for y in ys]
        encode_x, encode_y, vocabulary = _leaf_encoders(kind, samples, labels)
    arrays: dict[str, np.ndarray] = {}
    for split, users in (("", train), ("_test", test)):
        if not users:
            continue
        ys = [y for _, _, user_y, _ in users for y in user_y]
        x, y = encode_x([user_x for _, user_x, _, _ in users], users[0][3]), encode_y(ys, users[0][3])
        if targets == "every_token":
            y = np.concatenate([x[:, 1:], y[:, None]], axis=1)
        arrays[f"x{split}"], arrays[f"y{split}"] = x, y
    arrays["client"] = np.concatenate([np.full(len(xs), u, dtype=np.int64) for u, (_, xs, _, _) in enumerate(train)])
    if kind == "characters":  # every character may follow, whether or not some label is it
        arrays["num_classes"] = np.asarray(len(vocabulary))
    return LeafData(arrays, tuple(name for name, _, _, _ in train), vocabulary)


def _leaf_users(file: Path) -> list[tuple[str, Any, list[Any], str]]:
    """(user, xs, ys, file) for each user of one LEAF JSON file, checked against its ``num_samples``; xs is a
    float32 array when the user's samples are rows of numbers of one length (see :func:`loads_leaf`)."""
    try:
        data = loads_leaf(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{file}: not a readable JSON file ({exc})") from None
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("users"), list)
        or not isinstance(data.get("user_data"), dict)
    ):
        raise DataError(f"{file}: not LEAF's layout (a mapping with users, num_samples and user_data)")
    counts = data.get("num_samples")
    if counts is not None and (not isinstance(counts, list) or len(counts) != len(data["users"])):
        raise DataError(f"{file}: num_samples must list one count per user ({len(data['users'])} users)")
    out = []
    for i, user in enumerate(data["users"]):
        record = data["user_data"].get(user)
        if (
            not isinstance(record, dict)
            or not isinstance(record.get("x"), (list, np.ndarray))
            or not isinstance(record.get("y"), list)
        ):
            raise DataError(f"{file}: user_data[{user!r}] must hold lists x and y")
        xs, ys = record["x"], record["y"]
        if len(xs) != len(ys):
            raise DataError(f"{file}: user {user!r} has {len(xs)} samples x but {len(ys)} labels y")
        if counts is not None and counts[i] != len(xs):
            raise DataError(
                f"{file}: num_samples says user {user!r} has {counts[i]} samples, user_data holds {len(xs)}"
            )
        out.append((str(user), xs, ys, str(file)))
    return out


def _leaf_kind(sample: Any, file: Path) -> str:
    if isinstance(sample, np.ndarray):  # a row of numbers, made float32 as the file was parsed
        return "features"
    if isinstance(sample, str):
        return "characters"
    if isinstance(sample, list) and sample and isinstance(sample[-1], str):
        return "words"
    if isinstance(sample, list) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in sample):
        return "features"
    raise DataError(
        f"{file}: a LEAF sample netfl cannot read: {str(sample)[:80]} (numbers, a string, or a list ending in text)"
    )


def _leaf_encoders(
    kind: str, samples: list[Any], labels: list[Any]
) -> tuple[Callable[[list, str], np.ndarray], Callable[[list, str], np.ndarray], str | None]:
    if kind == "characters":
        chars = sorted(set("".join(samples)) | {c for c in labels if isinstance(c, str)})
        index = {c: i for i, c in enumerate(chars)}

        def characters(blocks: list, file: str) -> np.ndarray:
            xs = [x for block in blocks for x in block]
            lengths = {len(x) for x in xs}
            if len(lengths) != 1:
                raise DataError(
                    f"{file}: strings of lengths {sorted(lengths)[:4]}; LEAF's character samples all have one length"
                )
            return np.asarray([[index[c] for c in x] for x in xs], dtype=np.int64).reshape(len(xs), -1)

        def next_characters(ys: list, file: str) -> np.ndarray:
            if not all(isinstance(c, str) and len(c) == 1 for c in ys):
                raise DataError(f"{file}: the labels of character samples must be single characters")
            return np.asarray([index[c] for c in ys], dtype=np.int64)

        return characters, next_characters, "".join(chars)
    texts = [_words(x[-1]) for x in samples]
    counts = Counter(w for words in texts for w in words)
    vocabulary = [w for w, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:LEAF_VOCABULARY]]
    index = {w: i + 2 for i, w in enumerate(vocabulary)}

    def words(blocks: list, file: str) -> np.ndarray:
        xs = [x for block in blocks for x in block]
        out = np.zeros((len(xs), LEAF_WORDS_PER_SAMPLE), dtype=np.int64)
        for row, x in enumerate(xs):
            ids = [index.get(w, 1) for w in _words(x[-1])][:LEAF_WORDS_PER_SAMPLE]
            out[row, : len(ids)] = ids
        return out

    return words, _int_labels, " ".join(vocabulary)


def _features(blocks: list, file: str) -> np.ndarray:
    """Numeric samples, one block per user (a float32 array, or the list json gave), as one float32 array."""
    lengths: set[int] = set()
    for block in blocks:
        lengths.update([block.shape[1]] if isinstance(block, np.ndarray) else (len(x) for x in block))
    if len(lengths) != 1:
        raise DataError(
            f"{file}: samples of {len(lengths)} different lengths; a LEAF feature sample is a fixed-size list"
        )
    blocks = [block for block in blocks if len(block)]
    if all(isinstance(block, np.ndarray) for block in blocks):
        return np.concatenate(blocks)
    return np.asarray([x for block in blocks for x in block], dtype=np.float32)


def _check_leaf_budget(
    location: Path, kind: str, length: int, targets: str, train: list[tuple], test: list[tuple]
) -> None:
    """DataError when the arrays the samples will become exceed the data budget, from their counts alone."""
    row = {"features": (length, "float32", 4), "characters": (length, "int64", 8)}.get(
        kind, (LEAF_WORDS_PER_SAMPLE, "int64", 8)
    )
    sizes: dict[str, tuple[tuple[int, ...], str, int]] = {}
    for split, users in (("", train), ("_test", test)):
        if not users:
            continue
        n = sum(len(xs) for _, xs, _, _ in users)
        sizes[f"x{split}"] = ((n, row[0]), row[1], n * row[0] * row[2])
        y_shape = (n, length) if targets == "every_token" else (n,)
        sizes[f"y{split}"] = (y_shape, "int64", int(np.prod(y_shape)) * 8)
        if not split:
            sizes["client"] = ((n,), "int64", n * 8)
    check_sizes(str(location), sizes)


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def _int_labels(ys: list, file: str) -> np.ndarray:
    try:
        return np.asarray(ys, dtype=np.int64)
    except (TypeError, ValueError):
        raise DataError(f"{file}: labels y must be integers (class numbers)") from None
