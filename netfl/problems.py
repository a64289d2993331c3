"""Pydantic validation errors as (YAML path, message) pairs a user can act on.

The scenario schema and the registries' parameter checks (algorithms,
policies) both report problems this way; this module sits below all of
them, so a registry can describe a bad parameter without importing the
scenario that imports it.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, Union

from pydantic import BaseModel, ValidationError

KeysOf = Callable[[type[BaseModel]], list[str]]


def field_keys(model: type[BaseModel]) -> list[str]:
    """The keys a user may write for ``model``: its fields, except those excluded from the file."""
    return [n for n, f in model.model_fields.items() if not f.exclude]


def format_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def describe_validation_error(
    err: dict[str, Any], model: type[BaseModel], *, keys_of: KeysOf = field_keys
) -> tuple[str, str]:
    """One pydantic error as (yaml path, message a user can act on).

    ``keys_of`` names the accepted keys of a (nested) model, for a schema whose
    keys differ from its field names.
    """
    loc = tuple(p for p in err["loc"] if not _is_union_tag(p))
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        accepted = _fields_at(model, loc[:-1], keys_of)
        msg = "unknown key" + (f"; accepted: {', '.join(accepted)}" if accepted else "")
    elif err["type"] == "missing":
        msg = "required key is missing"
    elif err["type"] == "model_type":  # pydantic would name our internal class (e.g. TaskSpec)
        accepted = _fields_at(model, loc, keys_of)
        got = "null" if err["input"] is None else type(err["input"]).__name__
        msg = f"expected a mapping, got {got}" + (f"; accepted keys: {', '.join(accepted)}" if accepted else "")
    elif err["type"] == "literal_error":
        msg = f"{err['input']!r} is not accepted; " + msg.replace("Input should be", "use")
    elif err["type"] == "boolean_number":  # netfl.numbers: the error is raised for the model; name the key
        loc += (err["ctx"]["key"],)
        msg = f"{err['ctx']['value']} is a boolean; give a number"
    elif err["type"] in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        op = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}[err["type"]]
        limit = next(iter(err["ctx"].values()))
        msg = f"must be {op} {limit} (got {err['input']!r})"
    return format_loc(loc), msg


def params_problems(model: type[BaseModel], values: Any) -> list[tuple[str, str]]:
    """Problems with a component's parameters as (sub-path, message) pairs, e.g. ``(".K", "must be >= 1 ...")``."""
    try:
        model.model_validate(values)
    except ValidationError as exc:
        described = (describe_validation_error(err, model) for err in exc.errors())
        return [("." + path if path else "", msg) for path, msg in described]
    return []


def one_of(names: typing.Sequence[str]) -> str:
    """``'a', 'b' or 'c'``: the accepted values, worded as pydantic words a Literal's."""
    quoted = [repr(n) for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def _is_union_tag(part: Any) -> bool:
    return isinstance(part, str) and ("[" in part or part in ("function-after", "function-before"))


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...], keys_of: KeysOf) -> list[str]:
    current: Any = model
    for part in loc:
        if isinstance(part, int):  # list index
            args = typing.get_args(current)
            current = args[0] if args else None
            continue
        found = _model_in(current)
        field = found.model_fields.get(part) if found is not None else None
        if field is None:
            return []
        current = field.annotation
    current = _model_in(current)
    return [] if current is None else keys_of(current)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside an annotation (Optional[...], list[...], Annotated[...])."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType, Annotated):
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None
