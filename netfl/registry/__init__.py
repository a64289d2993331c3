"""Registries: the names and parameter schemas of netfl's pluggable components.

Checking a scenario (``netfl validate``) and listing components (``netfl
algorithms``) need only what a component is called and which parameters it
takes, not its code; so an :class:`Entry` holds those and names its
implementation as a ``"module:attribute"`` string that :meth:`Entry.load`
imports when a run builds the component. Nothing in this package imports
torch or simpy.
"""

from __future__ import annotations

import importlib
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel

from netfl.problems import one_of

__all__ = ["Entry", "describe_params", "registered"]


@dataclass(frozen=True)
class Entry:
    """One component: its name, its parameters (a pydantic model) and where its implementation lives."""

    name: str
    params: type[BaseModel]
    implementation: str  # "package.module:attribute", imported only by load()
    summary: str  # one line, for listings
    paper: str  # where it comes from: authors, title, venue

    def load(self) -> Any:
        """Import the implementation (this is where torch gets imported, for the learning components)."""
        module, _, attribute = self.implementation.partition(":")
        return getattr(importlib.import_module(module), attribute)


def describe_params(params: type[BaseModel]) -> list[dict[str, Any]]:
    """A Params model's fields for listings: ``{name, type, default, required, description}`` each."""
    return [
        {
            "name": field,
            "type": _type_name(info.annotation),
            "default": info.default,
            "required": info.is_required(),
            "description": info.description or "",
        }
        for field, info in params.model_fields.items()
    ]


def registered(names: Sequence[str], own: str | None = None) -> Callable[[Any], Any]:
    """A pydantic validator that accepts only ``names`` and lists them when it refuses a value.

    Use it before the type check (``BeforeValidator``), so that even a number or a list is
    answered with the accepted names rather than "should be a valid string". ``own``: the key
    that takes the user's own component instead (``path``); a refused value that looks like a
    file is pointed there.
    """
    accepted = tuple(names)

    def check(value: Any) -> Any:
        if value not in accepted:
            hint = ""
            if own is not None and isinstance(value, str) and ("." in value or "/" in value):
                hint = f"; your own goes in `{own}: {value}`"
            raise ValueError(f"{value!r} is not accepted; use {one_of(accepted)}{hint}")
        return value

    return check


def _type_name(annotation: Any) -> str:
    """A parameter's type as a user reads it: ``float``, ``int or none``, ``'samples' | 'uniform'``."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        return _type_name(args[0])
    if origin in (Union, types.UnionType):
        names = [_type_name(a) for a in args if a is not type(None)]
        return " or ".join(names) + (" or none" if type(None) in args else "")
    if origin is Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (list, tuple):
        return f"list of {_type_name(args[0])}" if args else "list"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")
