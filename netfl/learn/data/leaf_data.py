"""LEAF's layout (train/ and test/ folders of JSON, or one JSON file) read into the arrays of a data set: features,
characters (Shakespeare) or text (Sent140) encoded as :mod:`netfl.learn.data.vocabulary` says, each user a client,
sized against the data budget from the sample counts before any array is built. The JSON itself is parsed by
:mod:`netfl.learn.data.leaf_json`."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from netfl.errors import DataError
from netfl.learn.data.data_budget import check_sizes
from netfl.learn.data.leaf_json import loads_leaf
from netfl.learn.data.vocabulary import (
    LEAF_CHARACTERS,
    LEAF_WORDS_PER_SAMPLE,
    Vocabulary,
    built_words,
    leaf_tokens,
    read_vocabulary,
)
from netfl.registry.choices import DataTargets, values
from netfl.registry.datasets import leaf_files

__all__ = ["LEAF_WORDS_PER_SAMPLE", "LeafData", "read_leaf"]

#: The sample kinds a LEAF file may hold, as :func:`read_leaf`'s ``kind`` names them.
KINDS = ("features", "characters", "words")
User = tuple[str, Any, list[Any], str]  # (user, xs, ys, file)


@dataclass(frozen=True)
class LeafData:
    """What a LEAF folder holds: the arrays (client ids 0.. in the order the files list the users), the users'
    names, and what its token ids stand for (None for numeric features)."""

    arrays: dict[str, np.ndarray]
    users: tuple[str, ...]
    vocabulary: Vocabulary | None


def read_leaf(
    location: Path,
    *,
    targets: str = "sample",
    vocabulary: str | Path | None = None,
    kind: str | None = None,
    field: str = "dataset.vocabulary",
) -> LeafData:
    """LEAF's JSON layout (FEMNIST, Shakespeare, Sent140, ...) as arrays: a folder holding ``train/*.json`` and
    ``test/*.json`` (or a folder of, or one, JSON file: training data only), each file
    ``{"users": [...], "num_samples": [...], "user_data": {user: {"x": [...], "y": [...]}}}``.

    Each user is a client (numbered in the order the files, sorted by name, list them). Samples become:

    * a list of numbers (FEMNIST's 784 pixels) -> float32 features (``input_shape`` reshapes them);
    * a string (Shakespeare's 80 characters) -> int64 character ids, labels the id of the character ``y``;
      ``targets="every_token"`` labels every position with the character after it instead (x shifted by one,
      then y: per-token labels (N, 80) for a model whose outputs are per token). ``vocabulary``: ``"leaf"``
      (the default: LEAF's 80 characters, in its order), ``"used"`` (the characters the files use, sorted)
      or a vocabulary file; a character outside it is refused;
    * a list ending in a string (Sent140's ``[id, date, query, user, text]``) -> the ids of the text's first
      :data:`LEAF_WORDS_PER_SAMPLE` tokens as LEAF splits and numbers them: a vocabulary file's words, or
      (the default) the most frequent words of the training files; a word outside it, and padding, get the id
      after the last word.

    ``kind``: the kind of sample a built-in task expects (refused otherwise); ``field``: the setting that gives
    ``vocabulary``, for messages. Each file is parsed one sample at a time (:mod:`netfl.learn.data.leaf_json`),
    and the arrays are sized against the data budget from the sample counts before they are built.
    """
    if location.is_dir():
        train_files, test_files = leaf_files(location)
    else:
        train_files, test_files = [location], []
    if not train_files:
        raise DataError(f"{location}: no LEAF JSON files (expected train/*.json and test/*.json)")
    train = [s for f in train_files for s in _leaf_users(f)]
    test = [s for f in test_files for s in _leaf_users(f)]
    first = next(((xs[0], f) for _, xs, _, f in train + test if len(xs)), None)
    if first is None:
        raise DataError(f"{location}: the LEAF files hold no samples")
    found = _leaf_kind(first[0], first[1])
    if kind is not None and found != kind:
        what = {"characters": "strings of characters", "words": "lists ending in the text", "features": "numbers"}
        raise DataError(f"{first[1]}: its samples x are {what[found]}; this task reads {what[kind]} ({kind})")
    kind = found
    if targets not in values(DataTargets):
        raise DataError(f"{location}: targets must be sample or every_token, got {targets!r}")
    if targets == "every_token" and kind != "characters":
        raise DataError(f"{location}: targets: every_token needs character samples (Shakespeare), these are {kind}")
    if vocabulary is not None and kind == "features":
        raise DataError(f"{location}: {field} applies to text (characters or words); these samples are numbers")
    if vocabulary in ("leaf", "used") and kind == "words":
        raise DataError(
            f"{location}: {field}: {vocabulary} names a character vocabulary; give a vocabulary file for words "
            "(or none: netfl builds one from the training files)"
        )
    length = len(first[0]) if kind != "words" else LEAF_WORDS_PER_SAMPLE
    _check_leaf_budget(location, kind, length, targets, train, test)
    encode_x: Callable[[User], np.ndarray]
    encode_y: Callable[[User], np.ndarray]
    if kind == "features":
        encode_x, encode_y, vocab = _features, _int_labels, None
    elif kind == "characters":
        vocab = _characters(vocabulary, train + test, field)
        encode_x, encode_y = _character_encoders(vocab, length)
    else:
        vocab = _words_vocabulary(vocabulary, train, field)
        encode_x, encode_y = _word_encoder(vocab), _int_labels
    arrays: dict[str, np.ndarray] = {}
    if not any(len(xs) for _, xs, _, _ in train):
        raise DataError(f"{train_files[0]}: the training files hold no samples")
    for split, users in (("", train), ("_test", test)):
        if not any(len(xs) for _, xs, _, _ in users):  # no test samples: test_fraction is held out
            continue
        x = _joined([(user, encode_x(user)) for user in users], arrays.get("x"))
        y = np.concatenate([encode_y(user) for user in users])
        if targets == "every_token":
            y = np.concatenate([x[:, 1:], y[:, None]], axis=1)
        arrays[f"x{split}"], arrays[f"y{split}"] = x, y
    arrays["client"] = np.concatenate([np.full(len(xs), u, dtype=np.int64) for u, (_, xs, _, _) in enumerate(train)])
    if kind == "characters":  # every character may follow, whether or not some label is it
        arrays["num_classes"] = np.asarray(len(vocab.tokens))
    return LeafData(arrays, tuple(name for name, _, _, _ in train), vocab)


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


def _characters(vocabulary: str | Path | None, users: list[User], field: str) -> Vocabulary:
    """The character vocabulary ``vocabulary`` names (None: LEAF's)."""
    if vocabulary is None or vocabulary == "leaf":
        tokens, source = tuple(LEAF_CHARACTERS), "leaf"
    elif vocabulary == "used":
        used = set().union(*(set("".join(xs)) | {y for y in ys if isinstance(y, str)} for _, xs, ys, _ in users))
        tokens, source = tuple(sorted(used)), "used"
    else:
        tokens, source = read_vocabulary(Path(vocabulary), field), str(vocabulary)
        long = next((t for t in tokens if len(t) != 1), None)
        if long is not None:
            raise DataError(
                f"{vocabulary}: {long!r} is not one character; a character vocabulary ({field}) lists characters"
            )
    return Vocabulary("characters", tokens, source, classes=tokens)


def _character_encoders(
    vocab: Vocabulary, length: int
) -> tuple[Callable[[User], np.ndarray], Callable[[User], np.ndarray]]:
    """Each user's strings x (all ``length`` characters) and next characters y as ids (DataError naming the file,
    the user, the sample and the character that is not in the vocabulary)."""
    table = np.full(max(map(ord, vocab.tokens)) + 1, -1, dtype=np.int64)
    table[[ord(c) for c in vocab.tokens]] = np.arange(len(vocab.tokens))
    where = "LEAF's 80 characters" if vocab.source == "leaf" else f"the vocabulary ({vocab.source})"
    hint = (
        "; give dataset.vocabulary: used (the characters the files use) or a vocabulary file"
        if vocab.source == "leaf"
        else ""
    )

    def ids(text: str) -> np.ndarray:
        codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).astype(np.int64)
        out = np.full(len(codes), -1, dtype=np.int64)
        inside = codes < len(table)
        out[inside] = table[codes[inside]]
        return out

    def x(user: User) -> np.ndarray:
        name, xs, _, file = user
        for i, sample in enumerate(xs):
            if not isinstance(sample, str):
                raise DataError(
                    f"{file}: user_data[{name!r}].x[{i}] is {type(sample).__name__}, not a string of characters"
                )
            if len(sample) != length:
                raise DataError(
                    f"{file}: user_data[{name!r}].x[{i}] has {len(sample)} characters, the first sample {length}; "
                    "LEAF's character samples all have one length (ragged samples are refused)"
                )
        out = ids("".join(xs)).reshape(len(xs), length)
        bad = np.flatnonzero(out.reshape(-1) < 0)
        if bad.size:
            i, j = divmod(int(bad[0]), length)
            raise DataError(
                f"{file}: user_data[{name!r}].x[{i}] holds {xs[i][j]!r} (position {j}), which is not in {where}{hint}"
            )
        return out

    def y(user: User) -> np.ndarray:
        name, _, ys, file = user
        for i, c in enumerate(ys):
            if not isinstance(c, str) or len(c) != 1:
                raise DataError(
                    f"{file}: user_data[{name!r}].y[{i}] is {c!r}; a character sample's label is one character"
                )
        out = ids("".join(ys))
        bad = np.flatnonzero(out < 0)
        if bad.size:
            raise DataError(
                f"{file}: user_data[{name!r}].y[{int(bad[0])}] is {ys[int(bad[0])]!r}, which is not in {where}{hint}"
            )
        return out

    return x, y


def _words_vocabulary(vocabulary: str | Path | None, train: list[User], field: str) -> Vocabulary:
    """A vocabulary file's words, or the most frequent words of the training texts; id ``len(words)`` is LEAF's
    unknown word and padding."""
    if vocabulary is None:
        tokens, source = (
            built_words(leaf_tokens(_text(x, file, name, i)) for name, xs, _, file in train for i, x in enumerate(xs)),
            "built",
        )
        if not tokens:
            raise DataError(f"{train[0][3]}: the training texts hold no words to build a vocabulary from")
    else:
        tokens, source = read_vocabulary(Path(vocabulary), field), str(vocabulary)
    return Vocabulary("words", tokens, source, unknown=len(tokens))


def _text(sample: Any, file: str, user: str, i: int) -> str:
    if not isinstance(sample, list) or not sample or not isinstance(sample[-1], str):
        raise DataError(f"{file}: user_data[{user!r}].x[{i}] is not a list ending in its text (Sent140's samples are)")
    return sample[-1]


def _word_encoder(vocab: Vocabulary) -> Callable[[User], np.ndarray]:
    index = {w: i for i, w in enumerate(vocab.tokens)}
    unknown = vocab.unknown

    def x(user: User) -> np.ndarray:
        name, xs, _, file = user
        out = np.full((len(xs), LEAF_WORDS_PER_SAMPLE), unknown, dtype=np.int64)
        for row, sample in enumerate(xs):
            ids = [index.get(w, unknown) for w in leaf_tokens(_text(sample, file, name, row))[:LEAF_WORDS_PER_SAMPLE]]
            out[row, : len(ids)] = ids
        return out

    return x


def _features(user: User) -> np.ndarray:
    """A user's numeric samples (a float32 array, or the list json gave) as one float32 array (N, length)."""
    name, xs, _, file = user
    if isinstance(xs, np.ndarray):
        return xs
    if not xs:
        return np.zeros((0, 0), dtype=np.float32)
    lengths = [len(x) if isinstance(x, (list, np.ndarray)) else -1 for x in xs]
    for i, n in enumerate(lengths):
        if n < 0:
            raise DataError(f"{file}: user_data[{name!r}].x[{i}] is not a list of numbers, as x[0] is")
        if n != lengths[0]:
            raise DataError(
                f"{file}: user_data[{name!r}].x[{i}] has {n} values, x[0] {lengths[0]}; a LEAF feature sample is "
                "a fixed-size list of numbers (ragged samples are refused)"
            )
    try:
        return np.asarray(xs, dtype=np.float32).reshape(len(xs), -1)
    except (TypeError, ValueError):
        raise DataError(f"{file}: user_data[{name!r}].x holds something other than numbers") from None


def _joined(blocks: list[tuple[User, np.ndarray]], before: np.ndarray | None) -> np.ndarray:
    """The users' sample arrays as one, each as long as the first (DataError naming the user that is not)."""
    blocks = [(user, block) for user, block in blocks if len(block)]
    width = before.shape[1:] if before is not None else blocks[0][1].shape[1:]
    for (name, _, _, file), block in blocks:
        if block.shape[1:] != width:
            raise DataError(
                f"{file}: user_data[{name!r}].x's samples have {block.shape[1]} values, the first user's "
                f"{width[0]}; a LEAF data set's samples all have one length (ragged samples are refused)"
            )
    return np.concatenate([block for _, block in blocks])


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


def _int_labels(user: User) -> np.ndarray:
    name, _, ys, file = user
    try:
        return np.asarray(ys, dtype=np.int64).reshape(len(ys))
    except (TypeError, ValueError):
        raise DataError(f"{file}: user_data[{name!r}].y must hold integers (class numbers)") from None
