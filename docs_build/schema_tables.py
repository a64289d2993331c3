"""The topology file's parameter tables, generated from the schema's pydantic declarations (netfl.config.schema).

A docs page holds a marker line ``<!-- schema: StopSpec stop -->`` (a model of :mod:`netfl.config.schema` and the
YAML path of its mapping); this MkDocs hook (mkdocs.yml, ``hooks:``) replaces it with one row per field: its key,
type, default, bounds and description, as the declaration says them. So a field added, renamed or given another
default shows on the site at the next build, and a marker naming no model fails the build.
"""

from __future__ import annotations

import math
import re
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union

from annotated_types import Ge, Gt, Le, Lt, MaxLen, MinLen
from pydantic import BaseModel

from netfl import units
from netfl.config import schema
from netfl.distributions import Distribution

MARKER = re.compile(r"^<!-- schema: (\w+) ([\w.\[\]]+) -->$", re.M)

#: The quantity types of netfl.units: how the table names them, and the unit their defaults are written in.
QUANTITIES = {
    id(typing.get_args(units.Seconds)[1]): ("time", "s"),
    id(typing.get_args(units.Joules)[1]): ("energy", "J"),
    id(typing.get_args(units.Watts)[1]): ("power", "W"),
    id(typing.get_args(units.BitsPerSecond)[1]): ("rate", "bit/s"),
    id(typing.get_args(units.Bytes)[1]): ("size", "B"),
    id(typing.get_args(units.Fraction)[1]): ("fraction", ""),
    id(typing.get_args(units.Hertz)[1]): ("frequency", "Hz"),
}


def _quantity(metadata: list[Any]) -> tuple[str, str] | None:
    return next((QUANTITIES[id(m)] for m in metadata if id(m) in QUANTITIES), None)


def _type(annotation: Any, metadata: list[Any]) -> str:
    """A field's type as a reader of the YAML file needs it: a quantity with its unit, a per-device value, a
    choice of words, a mapping (its own table), a list."""
    quantity = _quantity(metadata)
    if quantity:
        return f"{quantity[0]} ({quantity[1]})" if quantity[1] else quantity[0]
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        inner, *more = typing.get_args(annotation)
        return _type(inner, list(more))
    if origin in (Union, types.UnionType):
        kinds = [_type(a, []) for a in typing.get_args(annotation) if a is not type(None)]
        return " or ".join(dict.fromkeys(kinds))
    if origin is Literal:
        return "one of " + ", ".join(f"`{v}`" for v in typing.get_args(annotation))
    if origin is list:
        return f"list of {_type(typing.get_args(annotation)[0], [])}"
    if origin is dict:
        value = typing.get_args(annotation)[1]
        return "mapping" if value is Any else f"mapping of names to {_type(value, [])}"
    if annotation is schema.Every:
        return "rounds (`10 rounds`) or time (`5min`)"
    if annotation is Any:
        return "any value"
    if annotation is Distribution:
        return "per-device value (a number or a distribution)"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation.__name__ == "PolicySpec":
            return "policy (`{policy: NAME, ...}`)"
        if annotation.__name__ in ("AlgorithmSpec", "ServerOptimizerSpec"):
            return "`{name, ...}`"
        return "mapping (its table)"
    names = {bool: "boolean", int: "integer", float: "number", str: "string", Path: "path"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _default(field: Any, metadata: list[Any]) -> str:
    if field.is_required():
        return "required"
    value = field.default if field.default_factory is None else field.default_factory()
    if value is None:
        return "—"
    if isinstance(value, BaseModel):
        return "see its table" if value.model_dump(exclude_defaults=True) == {} else f"`{_yaml(value)}`"
    if isinstance(value, Distribution):
        return f"`{value.params[0]:g}`" if value.kind == "constant" else value.describe()
    if isinstance(value, schema.Every):
        return f"`{value.as_scenario_value()}`".replace("`1 rounds`", "`1 round`")
    quantity = _quantity(metadata)
    if isinstance(value, float) and math.isinf(value):
        return "none (∞)"
    if quantity and isinstance(value, int | float) and not isinstance(value, bool):
        if quantity[0] == "fraction":
            return f"`{100 * value:g}%`"
        return f"`{units.format_si(value, quantity[1])}`".replace(" ", "")
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if value in ({}, []):
        return "none"
    return f"`{value}`"


def _yaml(model: BaseModel) -> str:
    data = model.model_dump(exclude_defaults=True, by_alias=True)
    return "{" + ", ".join(f"{k}: {v}" for k, v in data.items()) + "}"


def _bounds(metadata: list[Any]) -> str:
    words = []
    for m in metadata:
        for kind, attr, sign in ((Gt, "gt", ">"), (Ge, "ge", "≥"), (Lt, "lt", "<"), (Le, "le", "≤")):
            if isinstance(m, kind):
                bound = getattr(m, attr)
                words.append(f"{sign} {bound:g}" if isinstance(bound, float) else f"{sign} {bound}")
        if isinstance(m, MinLen):
            words.append(f"at least {m.min_length} item(s)")
        if isinstance(m, MaxLen):
            words.append(f"at most {m.max_length} item(s)")
    return ", ".join(words) or "—"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def table(model: type[BaseModel], path: str) -> str:
    """The Markdown table of ``model``'s fields, headed by ``path``, where its mapping sits in the YAML file."""
    where = "top level" if path == "." else f"`{path}`"
    rows = [f"| key ({where}) | type | default | bounds | description |", "| --- | --- | --- | --- | --- |"]
    for name, field in model.model_fields.items():
        if field.exclude:  # set by netfl, never written in a file (Scenario.source)
            continue
        key = field.alias or name
        metadata = list(field.metadata)
        cells = (
            f"`{key}`",
            _type(field.annotation, metadata),
            _default(field, metadata),
            _bounds(metadata),
            field.description or "",
        )
        rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(rows)


def expand(markdown: str) -> str:
    """``markdown`` with every schema marker replaced by its table; a marker naming no model raises ValueError."""

    def one(match: re.Match[str]) -> str:
        model = getattr(schema, match.group(1), None)
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise ValueError(f"schema marker names {match.group(1)!r}, which is no model of netfl.config.schema")
        return table(model, match.group(2))

    return MARKER.sub(one, markdown)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs' hook: each page's Markdown before it is rendered."""
    return expand(markdown)
