"""Booleans are not numbers: ``count: true`` is a mistake to report, not one device.

Python (and so pydantic's lax mode) treats ``True`` as 1 and ``False`` as 0,
so a YAML ``yes``/``true``/``on`` in a numeric field would silently become a
number. Every netfl schema model derives from :class:`NoBooleanNumbers`,
which refuses a boolean wherever the field takes numbers and not booleans.
"""

from __future__ import annotations

import types
import typing
from functools import cache
from typing import Any

from pydantic import BaseModel, model_validator
from pydantic_core import PydanticCustomError


def is_number(value: Any) -> bool:
    """An int or float read back from a file (JSON, a pickle), not a boolean."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class NoBooleanNumbers(BaseModel):
    @model_validator(mode="before")
    @classmethod
    def _no_booleans_for_numbers(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in _numeric_keys(cls) & data.keys():
                if isinstance(data[key], bool):
                    value = str(data[key]).lower()
                    raise PydanticCustomError(
                        "boolean_number", "{key}: {value} is a boolean; give a number", {"key": key, "value": value}
                    )
        return data


@cache
def _numeric_keys(model: type[BaseModel]) -> frozenset[str]:
    """The keys (names and aliases) of ``model``'s fields that take numbers but not booleans."""
    keys = set()
    for name, info in model.model_fields.items():
        leaves = _leaf_types(info.annotation)
        if leaves & {int, float} and bool not in leaves:
            keys.update(k for k in (name, info.alias) if k)
    return frozenset(keys)


def _leaf_types(annotation: Any) -> set[Any]:
    """The plain types inside ``annotation`` (through Optional, unions, Annotated, Literal values' types)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _leaf_types(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return set().union(*(_leaf_types(a) for a in typing.get_args(annotation)))
    if origin is typing.Literal:
        return {type(v) for v in typing.get_args(annotation)}
    if origin is not None:  # list[int], dict[...]: the field itself is a container
        return {origin}
    return {annotation}
