"""``--set path=value``: change one value of a topology before it is validated.

Paths are the YAML paths error messages use (``server.algorithm.name``,
``devices[0].availability.p``); values are read as YAML (``0.3`` is a
number, ``5min`` a string, ``{world: 1, training: 2}`` a mapping), so an
override says exactly what the same line in the file would. Missing
mappings on the way are created; list entries must exist. The result is
validated like the file, so a bad value is reported with its path.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

import yaml

__all__ = ["OverrideError", "apply_overrides", "apply_settings", "parse_override", "parse_path"]

_SEGMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*)|\[(\d+)\]")


class OverrideError(ValueError):
    """One bad override: ``path`` (as given) and what is wrong with it."""

    def __init__(self, path: str, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path, self.problem = path, problem


def parse_override(text: str) -> tuple[str, list[str | int], Any]:
    """``'a.b[0].c=value'`` -> (path as written, [a, b, 0, c], the value read as YAML)."""
    path, sep, raw = text.partition("=")
    path = path.strip()
    if not sep or not path:
        raise OverrideError(text, "write path=value, e.g. server.algorithm.name=fedau or devices[0].count=20")
    keys = parse_path(path)
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as exc:
        raise OverrideError(path, f"the value {raw!r} is not valid YAML ({getattr(exc, 'problem', exc)})") from None
    return path, keys, value


def parse_path(path: str) -> list[str | int]:
    """``'devices[0].availability.p'`` -> ``['devices', 0, 'availability', 'p']``."""
    if not isinstance(path, str) or not path.strip():
        raise OverrideError(str(path), "a path is keys joined by dots, e.g. server.algorithm.name")
    path = path.strip()
    keys: list[str | int] = []
    position = 0
    while position < len(path):
        if keys and path[position] == ".":
            position += 1
        match = _SEGMENT.match(path, position)
        if match is None or (match.group(1) is not None and keys and path[position - 1] != "."):
            raise OverrideError(
                path,
                f"cannot read the path at {path[position:]!r}: use keys joined by dots and "
                "list positions in brackets, e.g. devices[0].availability.p",
            )
        keys.append(match.group(1) if match.group(1) is not None else int(match.group(2)))
        position = match.end()
    if isinstance(keys[0], int):
        raise OverrideError(path, "a path starts with a key of the topology (name, seed, devices, server, ...)")
    return keys


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """A copy of ``data`` with every ``path=value`` of ``overrides`` applied in order."""
    data = copy.deepcopy(data)
    for text in overrides:
        path, keys, value = parse_override(text)
        _set(data, path, keys, value)
    return data


def apply_settings(data: dict[str, Any], settings: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``data`` with every ``path: value`` of ``settings`` (values already read, as from a study
    file) set in order, by the same rules as ``--set``."""
    data = copy.deepcopy(data)
    for path, value in settings.items():
        _set(data, path, parse_path(path), copy.deepcopy(value))
    return data


def _set(data: dict[str, Any], path: str, keys: list[str | int], value: Any) -> None:
    node: Any = data
    for depth in range(len(keys) - 1):
        node = _child(node, keys[: depth + 1], keys[depth + 1], path)
    _check_position(node, keys, path)
    if not isinstance(keys[-1], int) and not isinstance(node, dict):
        raise OverrideError(path, f"{_written(keys[:-1])} is {_kind(node)}, not a mapping with keys")
    node[keys[-1]] = value


def _child(node: Any, keys: list[str | int], next_key: str | int, path: str) -> Any:
    """The value at ``keys[-1]`` of ``node``; a missing mapping is created when a key (not a position) follows."""
    key = keys[-1]
    _check_position(node, keys, path)
    if isinstance(key, int):
        return node[key]
    if not isinstance(node, dict):
        raise OverrideError(path, f"{_written(keys[:-1])} is {_kind(node)}, not a mapping with keys")
    if node.get(key) is None:
        if isinstance(next_key, int):
            raise OverrideError(path, f"{_written(keys)} does not exist, so it has no position {next_key}")
        node[key] = {}
    return node[key]


def _check_position(node: Any, keys: list[str | int], path: str) -> None:
    """``keys[-1]``, when a list position, names an existing entry of ``node``."""
    key = keys[-1]
    if not isinstance(key, int):
        return
    if not isinstance(node, list):
        raise OverrideError(path, f"{_written(keys[:-1])} is {_kind(node)}, not a list")
    if key >= len(node):
        raise OverrideError(
            path,
            f"{_written(keys[:-1])} has {len(node)} entr{'y' if len(node) == 1 else 'ies'}"
            + (f" (positions 0..{len(node) - 1})" if node else ""),
        )


def _written(keys: list[str | int]) -> str:
    """Keys as a YAML path: ``devices[0].link``."""
    return "".join(f"[{k}]" if isinstance(k, int) else (f".{k}" if i else k) for i, k in enumerate(keys))


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return "a mapping"
    return repr(value)
