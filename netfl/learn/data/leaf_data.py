"""LEAF's layout (train/ and test/ folders of JSON, or one JSON file) read into the arrays of a data set of the
user's own: features, characters (Shakespeare) or text (Sent140) encoded, each user a client, sized against the
data budget from the sample counts before any array is built. The JSON itself is parsed by
:mod:`netfl.learn.data.leaf_json`."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from netfl.errors import DataError
from netfl.learn.data.data_budget import check_sizes
from netfl.learn.data.leaf_json import loads_leaf
from netfl.registry.choices import DataTargets, values
from netfl.registry.datasets import leaf_files

__all__ = ["LEAF_VOCABULARY", "LEAF_WORDS_PER_SAMPLE", "LeafData", "read_leaf"]

#: LEAF text (Sent140): tweets are cut to this many words, and the vocabulary to this many (by frequency).
LEAF_WORDS_PER_SAMPLE = 25
LEAF_VOCABULARY = 10_000


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
