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

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from netfl.numbers import is_number

KeysOf = Callable[[type[BaseModel]], list[str]]


def field_keys(model: type[BaseModel]) -> list[str]:
    """The keys a user may write for ``model``, as the file spells them (a field's alias: ``async``, not the
    field ``async_``), except the fields excluded from the file."""
    return [f.alias or n for n, f in model.model_fields.items() if not f.exclude]


def format_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def describe_validation_error(
    err: dict[str, Any], model: type[BaseModel], *, keys_of: KeysOf = field_keys, data: Any = None
) -> tuple[str, str]:
    """One pydantic error as (yaml path, message a user can act on).

    ``keys_of`` names the accepted keys of a (nested) model, for a schema whose
    keys differ from its field names; ``data``: what was validated, where the
    error's input is a parsed value (``2000%`` reported as 20.0) and the value
    as written decides the message.
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
        written = _written_at(data, err["loc"], err["input"])
        msg = f"must be {op} {limit} (got {err['input']!r})" + _percent_hint(err, model, loc, limit, written)
    return format_loc(loc), msg


def _percent_hint(err: dict[str, Any], model: type[BaseModel], loc: tuple[Any, ...], limit: Any, written: Any) -> str:
    """For a fraction at most 1 given as a percentage number (``min_level: 20``, not ``2000%``): how to write
    what was meant, ``20%`` where the field reads a percentage, else ``0.2`` -- each suggested only if the field
    accepts it."""
    value = err.get("input")
    if err["type"] not in ("less_than", "less_than_equal") or limit != 1 or not is_number(value):
        return ""
    if not is_number(written):  # a string: 2000% or "20" -- what it says is what was meant
        return ""
    if not 1 < value <= 100:
        return ""
    field = _field_at(model, loc)
    if field is not None and _accepts(field, f"{value:g}%"):
        return f"; a fraction: for {value:g} % write {value:g}%"
    if field is not None and _accepts(field, value / 100):
        return f"; a fraction between 0 and 1: for {value:g} % write {value / 100:g}"
    return ""


def _written_at(data: Any, loc: tuple[Any, ...], default: Any) -> Any:
    """The value at ``loc`` in ``data`` as the file wrote it (``default`` where ``data`` is not given or holds no
    such path)."""
    if data is None:
        return default
    current = data
    for part in loc:
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current):
            current = current[part]
        elif not (isinstance(part, str) and _is_union_tag(part)):
            return default
    return current


def _accepts(field: FieldInfo, value: Any) -> bool:
    """Whether ``field`` (its type and constraints) takes ``value``."""
    try:
        annotation = Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation
        TypeAdapter(annotation).validate_python(value)
    except Exception:  # noqa: BLE001 -- refused, or a type no adapter builds: either way, no suggestion
        return False
    return True


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
    current = _annotation_at(model, loc)
    current = _model_in(current) if current is not None else None
    return [] if current is None else keys_of(current)


def _field_at(model: type[BaseModel], loc: tuple[Any, ...]) -> FieldInfo | None:
    """The field at the end of ``loc`` (a YAML path as pydantic reports it), or None."""
    if not loc or isinstance(loc[-1], int):
        return None
    parent = _annotation_at(model, loc[:-1])
    found = _model_in(parent) if parent is not None else None
    return _by_key(found).get(loc[-1]) if found is not None else None


def _annotation_at(model: type[BaseModel], loc: tuple[Any, ...]) -> Any:
    """The annotation of what ``loc`` points at (``model`` itself for an empty path), or None if it leaves the
    schema (a component's free parameters)."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):  # list index
            args = typing.get_args(current)
            current = args[0] if args else None
            continue
        found = _model_in(current)
        field = _by_key(found).get(part) if found is not None else None
        if field is None:
            return None
        current = field.annotation
    return current


def _by_key(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """``model``'s fields by the key a file writes (pydantic's error paths use the alias: ``async``), and by
    field name."""
    fields = dict(model.model_fields)
    fields.update({f.alias: f for f in model.model_fields.values() if f.alias})
    return fields


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
