"""The topology file's parameter tables, generated from the schema's pydantic declarations (netfl.config.schema).

A docs page holds each table between two marker lines, ``<!-- schema: StopSpec stop -->`` (a model of
:mod:`netfl.config.schema` and the YAML path of its mapping) and ``<!-- /schema -->``: one row per field, its
key, type, default, bounds and description, as the declaration says them. The tables are written into the
Markdown itself, so that a page read on a forge or in an editor has them too::

    python docs_build/schema_tables.py           # rewrite every page's tables from the code
    python docs_build/schema_tables.py --check   # exit 1 naming each page whose tables are out of date

The site's build (docs/conf.py, Sphinx's ``source-read`` event) calls :func:`expand` on each page: it checks the
page's tables against the code and drops the markers; a table out of date, a marker naming no model or one left
open is a warning, which fails the strict build, so the site shows what the Markdown shows, and both what the
code declares.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
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
#: The line that closes a marker's table.
END = "<!-- /schema -->"
#: A marker, the table it holds (possibly none yet) and its closing line.
BLOCK = re.compile(MARKER.pattern[:-1] + r"\n(?P<body>.*?)^" + re.escape(END) + "$", re.M | re.S)

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
    """One table cell: on one line, its bars escaped, and a ``<`` that opens a tag outside code written ``&lt;``
    (``results/<name>`` would otherwise be an HTML tag, hidden on the site and on a forge alike)."""
    parts = " ".join(text.split()).replace("|", "\\|").split("`")
    return "`".join(p if i % 2 else re.sub(r"<(?=[A-Za-z/!?])", "&lt;", p) for i, p in enumerate(parts))


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


def _model(name: str) -> type[BaseModel]:
    model = getattr(schema, name, None)
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise ValueError(f"schema marker names {name!r}, which is no model of netfl.config.schema")
    return model


def block(name: str, path: str) -> str:
    """A marker with its table, as the page holds it."""
    return f"<!-- schema: {name} {path} -->\n\n{table(_model(name), path)}\n\n{END}"


def _unclosed(markdown: str) -> list[str]:
    """The markers with no closing line before the next marker (or the page's end)."""
    opened = [m.start() for m in MARKER.finditer(markdown)]
    closed = [m.start() for m in BLOCK.finditer(markdown)]
    ends = [m.start() for m in re.finditer("^" + re.escape(END) + "$", markdown, re.M)]
    bad = []
    for i, at in enumerate(opened):
        following = opened[i + 1] if i + 1 < len(opened) else len(markdown)
        if at not in closed or not any(at < e < following for e in ends):
            bad.append(MARKER.match(markdown, at).group(0))
    return bad


def fill(markdown: str) -> str:
    """``markdown`` with every marker's table as the code declares it now (a bare marker, as a new page has it,
    gets its closing line); ValueError for a marker naming no model."""
    opened = {m.start() for m in MARKER.finditer(markdown)}
    closed = {m.start() for m in BLOCK.finditer(markdown)}
    if opened - closed:  # a new marker: give it its closing line, then fill every block alike
        lines = markdown.split("\n")
        out = []
        offset = 0
        for line in lines:
            out.append(line)
            if offset in opened - closed:
                out.append(END)
            offset += len(line) + 1
        markdown = "\n".join(out)
    return BLOCK.sub(lambda m: block(m.group(1), m.group(2)), markdown)


def stale(markdown: str) -> list[str]:
    """The markers whose table differs from the code's (or is missing, or left without its closing line)."""
    for m in MARKER.finditer(markdown):
        _model(m.group(1))
    out = _unclosed(markdown)
    for m in BLOCK.finditer(markdown):
        if m.group(0) != block(m.group(1), m.group(2)):
            out.append(MARKER.match(markdown, m.start()).group(0))
    return out


def expand(markdown: str) -> str:
    """``markdown`` as the site renders it: each table without its marker lines. ValueError for a marker
    naming no model, a table out of date with the code, or a marker without its closing line."""
    behind = stale(markdown)
    if behind:
        raise ValueError(
            f"parameter table(s) out of date with netfl.config.schema: {', '.join(behind)}; "
            "run python docs_build/schema_tables.py"
        )
    return BLOCK.sub(lambda m: table(_model(m.group(1)), m.group(2)), markdown)


def pages(docs: Path) -> list[Path]:
    """The Markdown pages under ``docs`` that hold a parameter table."""
    return sorted(p for p in docs.rglob("*.md") if MARKER.search(p.read_text()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the topology file's parameter tables into docs/*.md.")
    parser.add_argument("--docs", type=Path, default=Path("docs"), help="the docs folder (default: docs)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a table is out of date")
    args = parser.parse_args(argv)
    if not args.docs.is_dir():
        print(f"{args.docs}: no such folder (run this from the checkout's root, or give --docs)", file=sys.stderr)
        return 2
    behind = []
    for page in pages(args.docs):
        text = page.read_text()
        try:
            new = fill(text)
        except ValueError as exc:
            print(f"{page}: {exc}", file=sys.stderr)
            return 2
        if new != text:
            behind.append(page)
            if not args.check:
                page.write_text(new)
    if args.check and behind:
        print(
            f"out of date with netfl.config.schema: {', '.join(map(str, behind))}; "
            "run python docs_build/schema_tables.py",
            file=sys.stderr,
        )
        return 1
    if not args.check:
        print(f"{len(behind)} page(s) rewritten" if behind else "every table is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
