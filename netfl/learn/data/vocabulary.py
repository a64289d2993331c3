"""What token ids stand for: LEAF's 80 characters, the characters a data set uses, or the words of a vocabulary
file or of the training files -- one rule, named in the run folder (``vocabulary.json``) so that a class column
of metrics.csv carries its character and a model trained here can be read elsewhere.

LEAF numbers Shakespeare's characters by their place in ``ALL_LETTERS`` (TalwalkarLab/leaf,
``models/utils/language_utils.py``); a character outside it gets ``str.find``'s -1 there, which its one-hot label
makes the last character and its embedding lookup refuses (on a CPU). netfl refuses such a character, naming
the file, the user, the field and the character. LEAF's Sent140 numbers the words of its GloVe vocabulary by
their place in it, and a word outside it -- padding too -- gets the id after the last word
(``line_to_indices``); netfl does the same with the user's vocabulary file, or with the
:data:`BUILT_WORDS` most frequent words of the training files when none is given.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netfl.errors import DataError

__all__ = [
    "BUILT_WORDS",
    "LEAF_CHARACTERS",
    "LEAF_WORDS_PER_SAMPLE",
    "Vocabulary",
    "built_words",
    "leaf_tokens",
    "read_vocabulary",
]

#: LEAF's Shakespeare alphabet (``ALL_LETTERS``): character i of this string is token id i and class i.
LEAF_CHARACTERS = "\n !\"&'(),-.0123456789:;>?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]abcdefghijklmnopqrstuvwxyz}"
#: LEAF's Sent140: a tweet becomes the ids of its first this many tokens (``line_to_indices``'s ``max_words``).
LEAF_WORDS_PER_SAMPLE = 25
#: A vocabulary built from the training files keeps this many of their most frequent tokens.
BUILT_WORDS = 10_000

_LEAF_TOKEN = re.compile(r"[\w']+|[.,!?;]")  # LEAF's split_line


@dataclass(frozen=True)
class Vocabulary:
    """Token id ``i`` stands for ``tokens[i]``; ``unknown`` is the id of a word outside them and of padding
    (LEAF's Sent140: ``len(tokens)``), None where such a token is refused (characters). ``classes``: what each
    output class is (characters: the tokens themselves), None when the labels are the data's own numbers."""

    kind: str  # "characters" or "words"
    tokens: tuple[str, ...]
    source: str  # "leaf", "used", "built" (from the training files) or the vocabulary file
    unknown: int | None = None
    classes: tuple[str, ...] | None = None

    @property
    def ids(self) -> int:
        """How many token ids there are (an embedding's rows)."""
        return len(self.tokens) + (self.unknown is not None)

    def document(self) -> dict[str, Any]:
        """vocabulary.json: what the ids stand for. Its ``tokens`` list is a vocabulary file netfl reads back."""
        rule = {
            "leaf": "LEAF's 80 characters (ALL_LETTERS of TalwalkarLab/leaf)",
            "used": "the characters the files use, in sorted order",
            "built": f"the {BUILT_WORDS} most frequent tokens of the training files (ties alphabetically)",
        }.get(self.source, f"the vocabulary file {self.source}")
        out: dict[str, Any] = {"kind": self.kind, "rule": rule, "tokens": list(self.tokens)}
        if self.unknown is not None:
            out["unknown_id"] = self.unknown
            out["padding_id"] = self.unknown
        if self.classes is not None:
            out["classes"] = list(self.classes)
        return out


def leaf_tokens(text: str) -> list[str]:
    """A tweet's tokens as LEAF splits them: runs of word characters and apostrophes, and . , ! ? ; alone."""
    return _LEAF_TOKEN.findall(text)


def built_words(texts: Iterable[list[str]]) -> tuple[str, ...]:
    """The :data:`BUILT_WORDS` most frequent tokens of ``texts`` (ties in alphabetical order)."""
    counts = Counter(w for words in texts for w in words)
    return tuple(w for w, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:BUILT_WORDS])


def read_vocabulary(file: Path, field: str) -> tuple[str, ...]:
    """The tokens of a vocabulary file: a JSON list of strings, a JSON object whose ``tokens`` is one (as netfl
    writes vocabulary.json), or a text file of one token per line. ``field``: the setting that named it."""
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{file}: cannot read the vocabulary file ({field}): {exc}") from None
    if file.suffix.lower() == ".json":
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(f"{file}: not a readable JSON file ({field}): {exc}") from None
        if isinstance(value, dict):
            value = value.get("tokens")
        if not isinstance(value, list) or not all(isinstance(t, str) and t for t in value):
            raise DataError(
                f"{file}: a JSON vocabulary ({field}) is a list of non-empty strings, or an object whose tokens is one"
            )
        tokens = tuple(value)
    else:
        tokens = tuple(line for line in text.splitlines() if line)
    if not tokens:
        raise DataError(f"{file}: the vocabulary file ({field}) holds no tokens")
    seen: set[str] = set()
    for i, token in enumerate(tokens):
        if token in seen:
            raise DataError(f"{file}: token {token!r} is listed twice (entry {i}); each token has one id ({field})")
        seen.add(token)
    return tokens
