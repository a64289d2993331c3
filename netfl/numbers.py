"""Booleans are not numbers: ``count: true`` is a mistake to report, not one device.

Python (and so pydantic's lax mode) treats ``True`` as 1 and ``False`` as 0,
so a YAML ``yes``/``true``/``on`` in a numeric field would silently become a
number. Every netfl schema model derives from :class:`NoBooleanNumbers`,
which refuses a boolean wherever the field takes numbers and not booleans.

Nor is any integer a count: ``levels: 2**70`` passes ``gt=0`` and overflows the first C integer it meets.
Every integer field is bounded by :data:`MAX_INTEGER` (2^53, the largest integer a float64 holds exactly), but
a field marked :data:`ANY_SIZE` (a seed: hashed, never counted with); and the floats that training computes
with in float32 (learning rates, weight decay, proximal terms) are :data:`Float32`: at most 3.4e38 in
magnitude, where a larger value would fail to convert in the first tensor operation.
"""

from __future__ import annotations

import types
import typing
from functools import cache
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, model_validator
from pydantic_core import PydanticCustomError

#: The largest integer any integer field takes (but those marked ANY_SIZE): 2^53, exact in a float64.
MAX_INTEGER = 2**53
#: ``Field(json_schema_extra=ANY_SIZE)``: an integer of any size (a seed, which is hashed).
ANY_SIZE = {"any_size": True}
#: The largest float32.
FLOAT32_MAX = 3.4028234663852886e38


def _float32(value: float) -> float:
    if not abs(value) <= FLOAT32_MAX:
        raise ValueError(f"{value:g} is beyond float32's range (at most {FLOAT32_MAX:.3g}), in which training computes")
    return value


#: A float that training uses in float32 arithmetic: finite and at most 3.4e38 in magnitude.
Float32 = Annotated[float, AfterValidator(_float32)]


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
            for key in _integer_keys(cls) & data.keys():
                values = data[key] if isinstance(data[key], (list, tuple)) else [data[key]]
                for value in values:
                    if is_number(value) and not abs(value) <= MAX_INTEGER:
                        raise PydanticCustomError(
                            "integer_too_large",
                            "{key}: {value} is larger than netfl takes: integers are at most 2**53 "
                            "({limit}); a count or size beyond that could not be held or computed with",
                            {"key": key, "value": str(value), "limit": f"{MAX_INTEGER:,}"},
                        )
        return data


class Strict(NoBooleanNumbers):
    """The base of the scenario's models: unknown keys are errors (a typo must never fall back to a default), the
    values are frozen, and no boolean passes for a number."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)


@cache
def _numeric_keys(model: type[BaseModel]) -> frozenset[str]:
    """The keys (names and aliases) of ``model``'s fields that take numbers but not booleans."""
    keys = set()
    for name, info in model.model_fields.items():
        leaves = _leaf_types(info.annotation)
        if leaves & {int, float} and bool not in leaves:
            keys.update(k for k in (name, info.alias) if k)
    return frozenset(keys)


@cache
def _integer_keys(model: type[BaseModel]) -> frozenset[str]:
    """The keys of ``model``'s fields that take integers (or lists of them) and not floats, but those marked
    :data:`ANY_SIZE`."""
    keys = set()
    for name, info in model.model_fields.items():
        if isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get("any_size"):
            continue
        leaves = _leaf_types(info.annotation) | _item_types(info.annotation)
        if int in leaves and float not in leaves and bool not in leaves:
            keys.update(k for k in (name, info.alias) if k)
    return frozenset(keys)


def _item_types(annotation: Any) -> set[Any]:
    """The plain types of a list field's items (through Optional and Annotated)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _item_types(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return set().union(*(_item_types(a) for a in typing.get_args(annotation)))
    if origin in (list, tuple):
        return set().union(*(_leaf_types(a) for a in typing.get_args(annotation) if a is not Ellipsis))
    return set()


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
