"""LEAF's JSON files read without a Python float per number.

``json.loads`` of a LEAF file builds a Python float (32 bytes with its list slot) for each number the file
writes in a few characters: a 204 MB FEMNIST-like file peaked at 2.1 GB. :func:`loads_leaf` walks the file's
objects itself and parses one sample at a time with json's own scanner, turning each user's rows of numbers
into one float32 array as it goes, so what it holds is the text, one sample's Python objects and the arrays.

It accepts exactly what ``json.loads`` accepts, raises the same ``JSONDecodeError`` for what it refuses, and
returns the same structure, except that ``user_data[user]["x"]``, when every sample is a list of numbers (not
booleans) of one length, is the (samples, length) float32 array ``numpy.asarray(x, dtype=float32)`` would give.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["loads_leaf"]

_scan_once = json.JSONDecoder().scan_once
_ws_match = json.decoder.WHITESPACE.match
_WS = json.decoder.WHITESPACE_STR
_scanstring = json.decoder.scanstring
_NUMBER_TYPES = {int, float}

Member = Callable[[str, str, int], tuple[Any, int]]


def loads_leaf(text: str) -> Any:
    """``json.loads(text)``, with each user's rows of numbers as one float32 array (see the module)."""
    if text.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    pos = _ws_match(text, 0).end()
    if text.startswith("{", pos):
        value, end = _object(text, pos + 1, _top_member)
    else:
        value, end = _value(text, pos)
    end = _ws_match(text, end).end()
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value


def _value(text: str, pos: int) -> tuple[Any, int]:
    try:
        return _scan_once(text, pos)
    except StopIteration as err:
        raise json.JSONDecodeError("Expecting value", text, err.value) from None


def _top_member(key: str, text: str, pos: int) -> tuple[Any, int]:
    if key == "user_data" and text.startswith("{", pos):
        return _object(text, pos + 1, _user_member)
    return _value(text, pos)


def _user_member(key: str, text: str, pos: int) -> tuple[Any, int]:
    if text.startswith("{", pos):
        return _object(text, pos + 1, _record_member)
    return _value(text, pos)


def _record_member(key: str, text: str, pos: int) -> tuple[Any, int]:
    if key == "x" and text.startswith("[", pos):
        rows, end = _array(text, pos + 1)
        return _block(rows), end
    return _value(text, pos)


def _block(rows: list[Any]) -> Any:
    """One user's samples as a float32 array when each is a 1-D float32 row of one length, else the list."""
    if not rows or not all(isinstance(r, np.ndarray) for r in rows) or len({len(r) for r in rows}) != 1:
        return rows
    return np.stack(rows)


def _row(value: Any) -> Any:
    """A sample that is a list of numbers as a float32 row (the value json gave, cast as numpy casts it)."""
    if type(value) is not list or not set(map(type, value)) <= _NUMBER_TYPES:
        return value
    try:
        return np.array(value, dtype=np.float32)
    except (OverflowError, ValueError, TypeError):  # an integer beyond float range: left as json gave it
        return value


def _object(text: str, end: int, member: Member) -> tuple[dict[str, Any], int]:
    """The object whose ``{`` is just before ``end``, each value parsed by ``member`` (as json's JSONObject)."""
    pairs: list[tuple[str, Any]] = []
    nextchar = text[end : end + 1]
    if nextchar != '"':
        if nextchar in _WS:
            end = _ws_match(text, end).end()
            nextchar = text[end : end + 1]
        if nextchar == "}":
            return {}, end + 1
        if nextchar != '"':
            raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, end)
    end += 1
    while True:
        key, end = _scanstring(text, end, True)
        if text[end : end + 1] != ":":
            end = _ws_match(text, end).end()
            if text[end : end + 1] != ":":
                raise json.JSONDecodeError("Expecting ':' delimiter", text, end)
        end = _ws_match(text, end + 1).end()
        value, end = member(key, text, end)
        pairs.append((key, value))
        end = _ws_match(text, end).end()
        nextchar = text[end : end + 1]
        end += 1
        if nextchar == "}":
            return dict(pairs), end
        if nextchar != ",":
            raise json.JSONDecodeError("Expecting ',' delimiter", text, end - 1)
        end = _ws_match(text, end).end()
        nextchar = text[end : end + 1]
        end += 1
        if nextchar != '"':
            raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, end - 1)


def _array(text: str, end: int) -> tuple[list[Any], int]:
    """The array whose ``[`` is just before ``end``, each element made a row by :func:`_row` as it is parsed."""
    values: list[Any] = []
    end = _ws_match(text, end).end()
    if text[end : end + 1] == "]":
        return values, end + 1
    while True:
        value, end = _value(text, end)
        values.append(_row(value))
        end = _ws_match(text, end).end()
        nextchar = text[end : end + 1]
        end += 1
        if nextchar == "]":
            return values, end
        if nextchar != ",":
            raise json.JSONDecodeError("Expecting ',' delimiter", text, end - 1)
        end = _ws_match(text, end).end()
